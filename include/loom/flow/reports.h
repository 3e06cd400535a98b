#pragma once
// Intermediate metrics that a running task reports (step, value), persisted with the task, and
// the scheduler's answer to each: go on, or stop early (docs/workflow.md, "Search"). In an agent,
// a task reports through its context:
//
//   agent.register_kind("train", [](const std::string& hyper, flow::TaskContext& ctx) {
//     for (int64_t epoch = 1; epoch <= 27; ++epoch) {
//       double accuracy = ...;
//       if (ctx.report(epoch, accuracy) == flow::Decision::Stop)   // ASHA stopped this trial
//         return R"({"accuracy": ...})";                             // the partial result
//     }
//     ...
//   });
//
// A task of a flow::search with an ASHA scheduler gets the scheduler's decision at each report,
// decided in the report's own transaction from the results of the search's other trials that
// reached the same rung; every other task gets Continue.
#include <cstdint>
#include <vector>

#include "loom/core/api.h"
#include "loom/flow/tasks.h"
#include "loom/store/record.h"
#include "loom/store/store.h"

namespace loom::flow {

enum class Decision { Continue, Stop };
LOOM_API const char* decision_name(Decision d);  // "continue", "stop"

struct LOOM_API Report {
  int64_t task_id = 0;
  int64_t step = 0;
  double value = 0;
  int64_t token = 0;       // the claim that reported it
  int64_t created_ms = 0;

  // Its columns of task_reports and its JSON's keys, listed once (loom/store/record.h).
  template <class Visit>
  void fields(Visit&& visit) {
    visit("task_id", task_id);
    visit("step", step);
    visit("value", value);
    visit("token", token);
    visit("created_ms", created_ms);
  }
};

class LOOM_API Reports {
 public:
  // Creates flow's search tables on first use of the store (schema part "loom.flow.search").
  explicit Reports(store::Store store, Clock clock = {});

  // Records `value` at `step` for the claim's task (a later report of the same step, e.g. by a
  // replayed attempt, replaces it) and returns the scheduler's decision. ClaimLostError (nothing
  // recorded) when the claim is not current; ValueError for a step below 1 or a value that is
  // not finite (a diverged trial should report a finite worst value).
  Decision report(const Claim& claim, int64_t step, double value);

  // The task's reports in step order (NotFoundError for an unknown task).
  std::vector<Report> list(int64_t task_id) const;

  const store::Store& store() const { return store_; }

 private:
  store::Store store_;
  Clock clock_;
};

}  // namespace loom::flow
