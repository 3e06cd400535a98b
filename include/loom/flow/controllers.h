#pragma once
// Stream controllers (docs/workflow.md, "Stream controllers"): a controller watches a dataset
// (or a named query over one) and, when the samples of versions committed since its last
// batch become significant (a count, a fraction of what earlier batches held, or a time
// window), submits one task (or one plan) for them: its hyper-parameters say which versions,
// its lineage names the dataset's version range (and the query). Exactly once per batch: the controller's
// progress and the task (or the plan) are written in one transaction, guarded by unique keys, so two
// controllers running at once, or one killed half way, never submit a batch twice or lose one.
//
//   flow::Controllers controllers(tasks);
//   controllers.create({.name = "retrain", .dataset = "fashion", .min_samples = 1000, .kind = "train"});
//   controllers.run("retrain", [&] { return stopping; });   // wakes on each dataset commit
//   controllers.create({.name = "two-stage", .dataset = "fashion", .min_samples = 1000, .plan = {.name = "cnn then rnn",
//       .tasks = {{.name = "cnn", .kind = "train_cnn"}, {.name = "rnn", .kind = "train_rnn", .depends_on = {"cnn"}}}}});
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/flow/plans.h"
#include "loom/flow/tasks.h"
#include "loom/store/record.h"

namespace loom::flow {

struct LOOM_API ControllerSpec {
  std::string name;     // 1-128 characters of [A-Za-z0-9_.:/-]
  std::string dataset;  // the dataset watched (it may not exist yet); "" with a query: the query's
  std::string query;    // a named query (store::Queries): only its selected samples count, in its versions
  // A batch is significant when it holds samples and one of these (those not 0) holds; with
  // none set, any new sample is: at least min_samples new samples; at least min_fraction times
  // the samples of every earlier batch (the first batch: any sample); its oldest version
  // committed max_wait_ms ago or more.
  int64_t min_samples = 0;
  double min_fraction = 0;
  int64_t max_wait_ms = 0;
  // The task submitted per batch: its kind, hyper-parameters (a JSON object, to which the
  // controller adds "stream": {"controller", "batch", "dataset", "versions", "samples"}) and options.
  std::string kind;
  std::string hyper_parameters = "{}";
  int64_t priority = 0;
  int64_t max_attempts = 3;
  int64_t timeout_ms = 0;
  int64_t lease_ms = 30000;
  std::string output_model;  // its lineage's output model ("" for none)
  // Or, instead of one task (kind, hyper_parameters and output_model left empty then; each
  // of the plan's tasks has its own, and its own options), a plan
  // submitted per batch (its name suffixed ": batch N"). Every task of it gets "stream" in its
  // hyper-parameters; those depending on no task of the plan whose lineage names no input
  // dataset, or names the watched one without a version, read the batch: their lineage gets
  // its dataset, version range and query. E.g. train a model on the new samples, then a
  // second model on its features (a task depending on the first); outputs are named in the
  // tasks' own lineage. Checked when the controller is created, as Plans::submit checks.
  TaskGraph plan;

  // Its columns of stream_controllers and its JSON's keys, listed once (loom/store/record.h).
  template <class Visit>
  void fields(Visit&& visit) {
    visit("name", name);
    visit("dataset", dataset);
    visit("query", query);
    visit("min_samples", min_samples);
    visit("min_fraction", min_fraction);
    visit("max_wait_ms", max_wait_ms);
    visit("kind", kind);
    visit("hyper_parameters", hyper_parameters, store::RecordField::json());
    visit("priority", priority);
    visit("max_attempts", max_attempts);
    visit("timeout_ms", timeout_ms);
    visit("lease_ms", lease_ms);
    visit("output_model", output_model);
    visit("plan", plan);  // JSON text, NULL for none (record_text, loom/flow/plans.h)
  }
};

struct LOOM_API ControllerInfo {
  ControllerSpec spec;
  int64_t batches = 0;     // submitted so far (the last batch's number)
  int64_t samples = 0;     // counted in them
  int64_t pending_versions = 0;  // committed versions not in a batch yet
  int64_t pending_samples = 0;   // their samples (of the dataset; a query's count is taken at a trigger)
  int64_t created_ms = 0;

  // Its columns and its JSON's keys, listed once (loom/store/record.h): the spec's fields as its
  // own (one flat object, as `loom controllers ... --json` prints it), then its progress; the
  // pending counts are computed when it is read, not stored.
  template <class Visit>
  void fields(Visit&& visit) {
    spec.fields(visit);
    visit("batches", batches);
    visit("samples", samples);
    visit("pending_versions", pending_versions, store::RecordField::not_stored());
    visit("pending_samples", pending_samples, store::RecordField::not_stored());
    visit("created_ms", created_ms);
  }
};

struct LOOM_API BatchInfo {
  std::string controller;
  int64_t batch = 0;              // 1, 2, ... per controller
  std::vector<int64_t> versions;  // the dataset versions in it, ascending
  int64_t samples = 0;            // their samples (selected by the query, if any)
  int64_t task_id = 0;             // the task submitted (0 when the controller submits plans)
  int64_t created_ms = 0;
  int64_t plan_id = 0;             // the plan submitted (0 when it submits a task)

  // Its columns of stream_batches and its JSON's keys, listed once (loom/store/record.h): the
  // versions are stream_batch_versions' rows; a NULL plan_id (a batch of a task) reads as 0. The
  // controller is the key the batches are asked by (Controllers::batches), not a field: a batch's
  // JSON is shown under its controller (`loom controllers show --json`'s batch_list).
  template <class Visit>
  void fields(Visit&& visit) {
    visit("batch", batch);
    visit("versions", versions, store::RecordField::not_stored());
    visit("samples", samples);
    visit("task_id", task_id);
    visit("plan_id", plan_id);
    visit("created_ms", created_ms);
  }
};

class LOOM_API Controllers {
 public:
  explicit Controllers(Tasks tasks);

  // ValueError for a bad name, kind, hyper-parameters, option or threshold; NotFoundError for
  // an unknown query; ValueError for a dataset that is not the query's; ConflictError for a
  // name taken. Nothing is written on error.
  ControllerInfo create(const ControllerSpec& spec);
  ControllerInfo get(const std::string& name) const;  // NotFoundError
  std::vector<ControllerInfo> list() const;           // by name
  // Deletes the controller and its batch records (its tasks stay). NotFoundError.
  void remove(const std::string& name);
  std::vector<BatchInfo> batches(const std::string& name) const;  // by batch

  // Looks once: when the versions committed since the last batch are significant, submits
  // their task and returns the batch; nullopt otherwise (not significant yet, or another
  // controller took them first). NotFoundError for an unknown controller.
  std::optional<BatchInfo> step(const std::string& name);
  // Runs the controller until `stop` returns true (checked after every wake): steps, then
  // sleeps until a dataset version is committed (store::Notifications on
  // store::kDatasetVersionChannel), a time window ends, or recheck_ms passes (a wake lost with
  // a killed writer is caught then). Returns the number of batches it submitted.
  int64_t run(const std::string& name, const std::function<bool()>& stop, int64_t recheck_ms = 1000);

  Tasks& tasks() { return tasks_; }

 private:
  Tasks tasks_;
};

}  // namespace loom::flow
