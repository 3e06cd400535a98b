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
          {2,
           {
               // Plans and dependencies (docs/workflow.md, "Plans"): `waiting` counts the task's
               // dependencies that have not finished (claimable at 0).
               "ALTER TABLE tasks ADD COLUMN plan_id {int}",
               "ALTER TABLE tasks ADD COLUMN name {text}",
               "ALTER TABLE tasks ADD COLUMN waiting {int} NOT NULL DEFAULT 0",
               "CREATE INDEX tasks_ready ON tasks (status, waiting, kind, priority, id)",
               "CREATE INDEX tasks_by_plan ON tasks (plan_id, id)",
               "CREATE TABLE task_dependencies (task_id {int} NOT NULL, depends_on {int} NOT NULL, PRIMARY KEY (task_id, depends_on))",
               "CREATE INDEX task_dependents ON task_dependencies (depends_on, task_id)",
               "CREATE TABLE plans (id {id}, name {text} NOT NULL, created_ms {int} NOT NULL)",
               // Notifications ("Notifications"): events in commit order. Every transaction that
               // writes one first updates the one row of task_event_lock, so that event ids are
               // taken (and committed) in one order on PostgreSQL too: a subscriber's cursor
               // never passes an id whose transaction has yet to commit.
               "CREATE TABLE task_events (id {id}, task_id {int} NOT NULL, plan_id {int}, "
               "event {text} NOT NULL CHECK (event IN ('finished', 'failed', 'cancelled', 'replayed')), detail {text} NOT NULL, "
               "created_ms {int} NOT NULL)",
               "CREATE TABLE task_event_lock (id {int} PRIMARY KEY, n {int} NOT NULL)",
               "INSERT INTO task_event_lock (id, n) VALUES (1, 0)",
           }},
          {3,
           {
               // Lineage (docs/workflow.md, "Lineage"): what a task reads and writes.
               "ALTER TABLE tasks ADD COLUMN input_dataset {text}",
               "ALTER TABLE tasks ADD COLUMN input_dataset_version {int}",
               "ALTER TABLE tasks ADD COLUMN input_dataset_query {text}",
               "ALTER TABLE tasks ADD COLUMN input_model {text}",
               "ALTER TABLE tasks ADD COLUMN input_model_version {int}",
               "ALTER TABLE tasks ADD COLUMN output_model {text}",
               "ALTER TABLE tasks ADD COLUMN output_dataset {text}",
           }},
      }};
  return part;
}

}  // namespace loom::flow::detail
