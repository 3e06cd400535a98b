#pragma once
// Hyper-parameter search on a store: each trial is a task, so agents on any machine sharing the
// store run them; a sampler proposes the trials' parameters and an optional ASHA scheduler
// stops poor trials early through the metrics they report (docs/workflow.md, "Search").
//
//   flow::SearchSpace space;
//   space.log_uniform("lr", 1e-3, 1.0).integer("width", 16, 256);
//   flow::TPESampler tpe({.seed = 0});
//   flow::SearchInfo s = flow::search(tasks, space, tpe, {.kind = "train", .metric = "accuracy",
//       .mode = flow::Mode::Maximize, .n_trials = 30, .asha = flow::Asha{.min_resource = 1, .max_resource = 27}});
//   if (const flow::TrialInfo* best = s.best_trial()) std::printf("%s %g\n", best->params.c_str(), *best->value);
//
// The trials' kind is run by agents (Agent::register_kind); each trial's hyper-parameters are
// options.hyper_parameters with the sampled parameters added. With ASHA, a trial reports its
// metric after each step (TaskContext::report, 1 to max_resource) and returns its result when the
// report says Stop; its value is its result's `metric` field (else its last report).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/flow/reports.h"
#include "loom/flow/search_space.h"
#include "loom/flow/tasks.h"
#include "loom/store/record.h"

namespace loom::flow {

enum class Mode { Minimize, Maximize };
// Each mode's one spelling, stored in the searches table and shown everywhere (loom/store/record.h).
constexpr store::Spellings<2> spellings(Mode) { return {"search mode", {"min", "max"}}; }

// Asynchronous successive halving (Li et al. 2018, as Ray Tune's ASHAScheduler): rungs at
// min_resource * reduction_factor^k steps up to max_resource; a trial reaching a rung goes on
// only if its value is in the top 1 / reduction_factor of the values recorded at that rung so
// far, else it is stopped.
struct LOOM_API Asha {
  int64_t min_resource = 1;      // r: the first rung (steps), at least 1
  int64_t max_resource = 0;      // R: a trial's whole budget, at least min_resource
  int64_t reduction_factor = 3;  // eta, at least 2

  // Its columns of searches and its JSON's keys (loom/store/record.h).
  template <class Visit>
  void fields(Visit&& visit) {
    visit("min_resource", min_resource);
    visit("max_resource", max_resource);
    visit("reduction_factor", reduction_factor);
  }
};

struct LOOM_API SearchOptions {
  std::string name = "search";          // free text for people (1 to 256 bytes)
  std::string kind;                     // the trials' task kind
  std::string metric;                   // the field of a trial's result to optimise
  Mode mode = Mode::Minimize;
  int64_t n_trials = 0;                 // at least 1; fewer if the sampler runs out (a grid)
  int64_t max_concurrent_trials = 4;    // trials submitted and not ended at any time
  std::string hyper_parameters = "{}";  // fixed hyper-parameters of every trial (a JSON object)
  std::optional<Asha> asha;
  // With ASHA, the steps all trials may spend together (0: no limit): a trial is submitted only
  // while the steps reported so far plus max_resource for it and for what each running trial may
  // still spend fit in the budget, so the search never spends more (its trials respecting
  // max_resource). The search then ends before n_trials when the budget is spent.
  int64_t step_budget = 0;
  TaskOptions task_options;             // of every trial's task (priority, attempts, lease, ...)
  int64_t timeout_ms = 0;               // then the trials not ended are cancelled (0: none)
  int64_t poll_ms = 100;                // the longest wait between two reads of the trials (a trial's end wakes it)
};

enum class TrialState { Pending, Running, Completed, Stopped, Failed, Cancelled };
// Each state's one spelling (loom/store/record.h); trial_state_name(s) is store::to_string(s).
constexpr store::Spellings<6> spellings(TrialState) {
  return {"trial state", {"pending", "running", "completed", "stopped", "failed", "cancelled"}};
}
LOOM_API const char* trial_state_name(TrialState s);  // "pending", ..., "stopped", ...

struct LOOM_API TrialInfo {
  int64_t number = 0;   // 0, 1, ... in the order the sampler proposed them
  int64_t task_id = 0;
  std::string params;   // the sampled parameters (a JSON object)
  TrialState state = TrialState::Pending;  // Stopped: ASHA stopped it below max_resource
  std::optional<double> value;             // once finished
  int64_t steps = 0;    // the last step its latest attempt reported (0: none)
  std::string result;   // the task's result (JSON) once finished
  std::string error;    // the task's last error

  // Its JSON's keys and the columns its reader takes by name from the query of a search's trials
  // (loom/store/record.h): the state and the value are decided from the task's status, result and
  // reports, not read. The result is the task's (`loom tasks show`), not a key of the trial's JSON.
  template <class Visit>
  void fields(Visit&& visit) {
    visit("number", number);
    visit("task_id", task_id);
    visit("state", state, store::RecordField::not_stored());
    visit("value", value, store::RecordField::not_stored());
    visit("steps", steps);
    visit("params", params, store::RecordField::json());
    visit("error", error);
  }
};

struct LOOM_API SearchInfo {
  int64_t id = 0;
  std::string name, kind, sampler, metric;
  Mode mode = Mode::Minimize;
  std::optional<Asha> asha;
  int64_t created_ms = 0;
  std::vector<TrialInfo> trials;  // in trial order
  // The best completed trial (ties: the earliest); if none completed, the stopped trial that
  // went furthest, best among those; nullptr if no trial has a value.
  const TrialInfo* best_trial() const;
  int64_t total_steps() const;  // the steps reported by all trials: the budget spent

  // Its columns of searches and its JSON's keys, listed once (loom/store/record.h): ASHA is
  // null in the JSON when there is none, its columns (Asha's, min_resource 0 for none) read
  // beside these; the trials are search_trials' rows.
  template <class Visit>
  void fields(Visit&& visit) {
    visit("id", id);
    visit("name", name);
    visit("kind", kind);
    visit("sampler", sampler);
    visit("metric", metric);
    visit("mode", mode);
    visit("asha", asha, store::RecordField::not_stored());
    visit("created_ms", created_ms);
    visit("trials", trials, store::RecordField::not_stored());
  }
};

// Runs a search to its end (every trial ended, or the timeout) and returns it. ValueError
// (nothing written) for bad options: an invalid kind, an empty metric, n_trials or
// max_concurrent_trials below 1, hyper_parameters that are not a JSON object or that name a
// parameter of the space, a bad Asha, bad task options; a sampler's invalid point too.
LOOM_API SearchInfo search(Tasks tasks, const SearchSpace& space, Sampler& sampler, const SearchOptions& options);

// A search of the store as it stands (its trials may still run); NotFoundError for an unknown id.
LOOM_API SearchInfo get_search(const Tasks& tasks, int64_t id);
// The searches of the store, in id order, without their trials (0: all).
LOOM_API std::vector<SearchInfo> list_searches(const Tasks& tasks, int64_t limit = 0);

}  // namespace loom::flow
