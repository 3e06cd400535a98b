#pragma once
// Training runs in a Store (docs/store.md, "Runs"): an experiment name, a run name,
// hyper-parameters (a JSON object), tags, a status (running, then finished or failed: RunStatus),
// start and end times, per-epoch metric series (the learning curves) and the final checkpoint
// (a blob). StoreLogger records all of it from Model::fit:
//
//   auto logger = std::make_shared<store::StoreLogger>(s, "fashion", R"({"lr": 0.001})");
//   model.fit(train, {.epochs = 10, .validation = &test, .callbacks = {logger}});
//   auto best = s.runs().find({.experiment = "fashion", .metrics = {{"val_accuracy", ">", 0.9, store::At::Max}}});
//   auto curves = s.runs().compare({best[0].id, best[1].id}, {"val_loss"});
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/store/record.h"
#include "loom/store/store.h"
#include "loom/train/callbacks.h"

namespace loom::store {

// One metric over epochs (0-based, ascending; a NaN value is kept as NaN), with the wall-clock
// time each epoch was logged (Unix milliseconds; 0 for epochs logged by a Loom older than schema
// version 7, which did not record it), for curves over time rather than epochs.
struct LOOM_API Curve {
  std::vector<int64_t> epochs;
  std::vector<double> values;
  std::vector<int64_t> times_ms;

  // Its JSON's keys (loom/store/record.h); its rows are run_metrics'.
  template <class Visit>
  void fields(Visit&& visit) {
    visit("epochs", epochs, RecordField::not_stored());
    visit("values", values, RecordField::not_stored());
    visit("times_ms", times_ms, RecordField::not_stored());
  }
};
using Curves = std::map<std::string, Curve>;

// A run is running until it ends, finished or failed.
enum class RunStatus { Running, Finished, Failed };
// Each status's one spelling, stored in the runs table and shown everywhere (loom/store/record.h).
constexpr Spellings<3> spellings(RunStatus) { return {"run status", {"running", "finished", "failed"}}; }

struct LOOM_API RunInfo {
  int64_t id = 0;
  std::string experiment;
  std::string name;
  RunStatus status = RunStatus::Running;
  std::string hyper_parameters;     // a JSON object, as text
  std::vector<std::string> tags;    // sorted
  int64_t started_ms = 0;           // Unix time in milliseconds
  int64_t ended_ms = 0;             // 0 while running
  std::string error;                // why a failed run failed
  Curves metrics;
  std::string checkpoint_sha256;    // empty: none

  // Its columns of the runs table and its JSON's keys, listed once (loom/store/record.h): the
  // store's reader, `loom runs --json` and the dashboard's /api/runs come from this list.
  template <class Visit>
  void fields(Visit&& visit) {
    visit("id", id);
    visit("experiment", experiment);
    visit("name", name);
    visit("status", status);
    visit("hyper_parameters", hyper_parameters, RecordField::json());
    visit("tags", tags, RecordField::not_stored());  // run_tags
    visit("started_ms", started_ms);
    visit("ended_ms", ended_ms);
    visit("error", error);
    visit("metrics", metrics, RecordField::not_stored());  // run_metrics
    visit("checkpoint_sha256", checkpoint_sha256, RecordField::in_column("checkpoint"));
  }
};

// Which value of a metric's series a filter compares: the last epoch's, or the highest or
// lowest over all epochs (the best, for accuracy-like or loss-like metrics).
enum class At { Final, Max, Min };

// `metric op value` with op one of < <= == != >= >; a run without the metric does not match.
// One metric of a run in brief: its last epoch's value, its lowest and highest value over epochs
// (NaN epochs skipped; NaN when every value is NaN) and how many epochs it has.
struct LOOM_API MetricSummary {
  double final = std::numeric_limits<double>::quiet_NaN();
  double min = std::numeric_limits<double>::quiet_NaN();
  double max = std::numeric_limits<double>::quiet_NaN();
  int64_t epochs = 0;

  // Its columns of run_metric_summaries (a NULL value: NaN) and its JSON's keys (loom/store/record.h).
  template <class Visit>
  void fields(Visit&& visit) {
    visit("final", final, RecordField::in_column("final_value"));
    visit("min", min, RecordField::in_column("min_value"));
    visit("max", max, RecordField::in_column("max_value"));
    visit("epochs", epochs);
  }
};

// A run without its curves (run.metrics empty) and each of its metrics in brief.
struct LOOM_API RunSummary {
  RunInfo run;
  std::map<std::string, MetricSummary> metrics;

  // Its columns (the run's) and its JSON's keys, listed once (loom/store/record.h): the run as an
  // object, its metrics' summaries by name (run_metric_summaries' rows).
  template <class Visit>
  void fields(Visit&& visit) {
    visit("run", run);
    visit("metrics", metrics, RecordField::not_stored());
  }
};

// One metric over several runs, epoch by epoch (NaN values skipped): a group of runs' mean
// curve and its min..max band.
struct LOOM_API EpochStatistics {
  std::vector<int64_t> epochs;          // ascending: those where at least one run has a value
  std::vector<double> mean, min, max;
  std::vector<int64_t> count;           // how many runs have a value at the epoch
};

struct LOOM_API RunMetricFilter {
  std::string metric;
  std::string op;
  double value = 0;
  At at = At::Final;
};

struct LOOM_API RunQuery {
  std::optional<std::string> experiment;
  std::optional<std::string> name;
  std::optional<RunStatus> status;
  std::vector<std::string> tags;             // a run must carry all of them
  std::vector<RunMetricFilter> metrics;      // and satisfy all of them
};

class LOOM_API Runs {
 public:
  explicit Runs(std::shared_ptr<detail::StoreImpl> impl);

  // A new run, "running". An empty name becomes "<experiment>-<id>". ValueError for an invalid
  // experiment, name or tag, or hyper-parameters that are not a JSON object.
  RunInfo start(const std::string& experiment, const std::string& name = "", const std::string& hyper_parameters = "{}",
                const std::vector<std::string>& tags = {});
  // Records the metrics of one epoch, stamped with the time now (a metric logged again for an
  // epoch replaces its value and time).
  // NotFoundError for a missing run, ConflictError for a run that has ended.
  void log_epoch(int64_t run, int64_t epoch, const std::map<std::string, double>& metrics);
  // Stores `bytes` (a Model::save_checkpoint file) as the run's checkpoint blob, replacing and
  // releasing any previous one.
  void set_checkpoint(int64_t run, const std::string& bytes);
  // Ends a running run: Finished or Failed (with `error`, stored as every backend can: a NUL or
  // a byte that is not UTF-8 becomes '?', as in a task's error). ValueError for Running,
  // ConflictError for a run that has already ended.
  void finish(int64_t run, RunStatus status = RunStatus::Finished, const std::string& error = "");

  RunInfo get(int64_t run) const;                                    // NotFoundError
  // The runs matching `query` by id (start order), with only `metrics`' curves when given.
  std::vector<RunInfo> find(const RunQuery& query = {}, const std::vector<std::string>& metrics = {}) const;
  // The runs matching `query` by id with each metric summarised by the database instead of
  // loaded: what a table of many runs needs (the dashboard lists 1,000 runs this way).
  std::vector<RunSummary> summaries(const RunQuery& query = {}) const;
  // `metric` over `runs` epoch by epoch, reduced by the database (ids of no run add nothing).
  EpochStatistics epoch_statistics(const std::vector<int64_t>& runs, const std::string& metric) const;
  // The k runs matching `query` with the best value of `metric` at `at` (Final: the last
  // epoch's value, Max/Min: the best over epochs), highest first for Final and Max, lowest
  // first for Min; ties go to the older run.
  std::vector<RunInfo> find_top(const std::string& metric, At at, int64_t k = 1, const RunQuery& query = {}) const;
  // The curves of several runs side by side, in the order of `runs`: only `metrics` when given
  // (a run without one has an empty curve). NotFoundError naming a missing run.
  std::vector<RunInfo> compare(const std::vector<int64_t>& runs, const std::vector<std::string>& metrics = {}) const;

  // The checkpoint's bytes, verified (BlobError if missing or corrupt); NotFoundError for a run
  // without one. save_checkpoint_file writes them to `path` for Model::load_checkpoint.
  std::string checkpoint(int64_t run) const;
  void save_checkpoint_file(int64_t run, const std::string& path) const;

  // Deletes a run (metrics, tags) and releases its checkpoint blob.
  void remove(int64_t run);

 private:
  std::shared_ptr<detail::StoreImpl> impl_;
};

// A Model::fit callback that records a run: it starts at on_train_begin (hyper-parameters,
// tags), logs the logs of every on_epoch_end (train metrics, "val_" metrics, "lr"), and at
// on_train_end stores the checkpoint (Model::save_checkpoint) and finishes the run. A fit that
// throws leaves the run "running" until the logger is destroyed, which marks it "failed".
// Each fit with the same logger records a new run.
class LOOM_API StoreLogger : public train::Callback {
 public:
  StoreLogger(Store store, std::string experiment, std::string hyper_parameters = "{}", std::vector<std::string> tags = {},
              std::string name = "", bool save_checkpoint = true);
  ~StoreLogger() override;

  void on_train_begin(train::Model& model) override;
  void on_epoch_end(train::Model& model, int64_t epoch, const train::Logs& logs) override;
  void on_train_end(train::Model& model, const train::History& history) override;

  int64_t run_id() const { return run_; }  // 0 before the first fit

 private:
  Store store_;
  std::string experiment_, hyper_, name_;
  std::vector<std::string> tags_;
  bool save_checkpoint_;
  int64_t run_ = 0;
  bool running_ = false;
};

}  // namespace loom::store
