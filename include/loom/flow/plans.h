#pragma once
// Plans: sets of tasks with local names and dependencies between them, submitted in one
// transaction, watched, cancelled and replayed as one (docs/workflow.md, "Plans").
//
//   flow::Plans plans(tasks);
//   int64_t id = plans.submit({.name = "cv", .tasks = {
//       {.name = "fold-0", .kind = "train", .hyper_parameters = R"({"fold": 0})"},
//       {.name = "fold-1", .kind = "train", .hyper_parameters = R"({"fold": 1})"},
//       {.name = "mean", .kind = "aggregate", .depends_on = {"fold-0", "fold-1"}}}});
//   flow::PlanInfo p = plans.get(id);          // p.status, p.tasks (each a TaskInfo)
#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/flow/tasks.h"

namespace loom::flow {

struct LOOM_API PlanTask {
  std::string name;                     // unique in the plan: 1-128 characters of [A-Za-z0-9_.:/-]
  std::string kind;
  std::string hyper_parameters = "{}";  // a JSON object
  TaskOptions options;                  // options.depends_on: ids of tasks already in the store
  std::vector<std::string> depends_on;  // names of tasks of this plan
};

// The tasks of a plan and the dependencies between them, as submitted (Plans::submit); a plan
// is a TaskGraph in the store. (loom::Plan is another thing: a compiled layer graph.)
struct LOOM_API TaskGraph {
  std::string name;  // free text for people (1 to 256 bytes of UTF-8)
  std::vector<PlanTask> tasks;

  // The task graph as JSON (what `loom plans submit` reads and a stream controller stores):
  //   {"name": "...", "tasks": [{"name": "a", "kind": "K", "hyper_parameters": {...},
  //     "depends_on": ["other task's name"], "after": [task id], "lineage": {...},
  //     "priority": P, "max_attempts": N, "timeout_ms": T, "lease_ms": L}]}
  // from_json checks the text's shape only (ValueError starting with `where` and naming the
  // key at fault); Plans::submit checks the rest.
  std::string to_json() const;
  static TaskGraph from_json(const std::string& text, const std::string& where = "plan");
};

// A TaskGraph as a record's field (loom/store/record.h): kept as its JSON text (to_json) in one
// column, "" (NULL) for a graph of no tasks, which is null in the record's JSON. ValueError for
// malformed text.
LOOM_API std::string record_text(const TaskGraph& g);
LOOM_API TaskGraph record_from_text(const std::string& text, const TaskGraph*);

struct LOOM_API PlanInfo {
  int64_t id = 0;
  std::string name;
  int64_t created_ms = 0;
  // Finished when every task finished; Failed when one failed; Cancelled when every task ended
  // and one was cancelled (none failed); Running while one is running; Pending otherwise.
  Status status = Status::Pending;
  std::vector<TaskInfo> tasks;  // in id order (a dependency always before its dependents)
  int64_t task_id(const std::string& name) const;  // NotFoundError for a name not in the plan

  // Its columns of plans and its JSON's keys, listed once (loom/store/record.h): the status is
  // its tasks', the tasks are the tasks table's rows (each its TaskInfo's JSON).
  template <class Visit>
  void fields(Visit&& visit) {
    visit("id", id);
    visit("name", name);
    visit("status", status, store::RecordField::not_stored());
    visit("created_ms", created_ms);
    visit("tasks", tasks, store::RecordField::not_stored());
  }
};

class LOOM_API Plans {
 public:
  explicit Plans(Tasks tasks) : tasks_(std::move(tasks)) {}

  // Submits every task of `plan` in one transaction (pending; claimable once their dependencies
  // finished) and returns the plan's id. Nothing is written on error: ValueError for no tasks,
  // a bad or repeated name, a dependency on a name not in the plan or on the task itself, a
  // cycle (naming its tasks) or a task's bad kind, hyper-parameters or options; NotFoundError /
  // ConflictError for an id in options.depends_on as for Tasks::submit.
  int64_t submit(const TaskGraph& plan);

  PlanInfo get(int64_t id) const;            // NotFoundError for an unknown id
  std::vector<PlanInfo> list(int64_t limit = 0) const;  // in id order; 0: all

  // Cancels every pending or running task of the plan (and their dependents elsewhere) in one
  // transaction; returns how many of the plan's tasks it ended.
  int64_t cancel(int64_t id);
  // Reopens every failed or cancelled task of the plan and their dependents (Tasks::replay) in
  // one transaction; returns the reopened ids. ConflictError as for Tasks::replay.
  std::vector<int64_t> replay(int64_t id);

  // Waits until every task of the plan has ended or `timeout_ms` passes; returns the plan.
  // Woken by task events, as Tasks::wait; poll_ms bounds a missed wake.
  PlanInfo wait(int64_t id, int64_t timeout_ms, int64_t poll_ms = 100) const;

  Tasks& tasks() { return tasks_; }

 private:
  Tasks tasks_;
};

}  // namespace loom::flow
