#include "flow/task_schema.h"

namespace loom::flow::detail {

const store::SchemaPart& task_schema() {
  // Append only: a released migration is never edited; a change is a new entry.
  static const store::SchemaPart part{
      "loom.flow",
      {
          {1,
           {
               // The task queue (docs/workflow.md). `token` is the fencing token: the number of
               // the latest claim; `deadline_ms` the running attempt's timeout as a time.
               // IF NOT EXISTS: stores made before flow had a schema part of its own (store
               // schema versions 3 and 4) already hold these tables, created by the store's
               // migration 3 with the same statements, and keep their tasks.
               "CREATE TABLE IF NOT EXISTS tasks (id {id}, kind {text} NOT NULL, hyper_parameters {text} NOT NULL, "
               "priority {int} NOT NULL, "
               "status {text} NOT NULL CHECK (status IN ('pending', 'running', 'finished', 'failed', 'cancelled')), "
               "attempts {int} NOT NULL, max_attempts {int} NOT NULL, timeout_ms {int} NOT NULL, lease_ms {int} NOT NULL, "
               "token {int} NOT NULL, agent {text}, lease_expires_ms {int}, deadline_ms {int}, result {text}, error {text}, "
               "created_ms {int} NOT NULL, started_ms {int}, finished_ms {int})",
               "CREATE INDEX IF NOT EXISTS tasks_by_queue ON tasks (status, kind, priority, id)",
               "CREATE INDEX IF NOT EXISTS tasks_by_lease ON tasks (status, lease_expires_ms)",
           }},
      }};
  return part;
}

}  // namespace loom::flow::detail
