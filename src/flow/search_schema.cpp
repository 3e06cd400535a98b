#include "flow/search_schema.h"

namespace loom::flow::detail {

const store::SchemaPart& search_schema() {
  // Append only: a released migration is never edited; a change is a new entry.
  static const store::SchemaPart part{
      "loom.flow.search",
      {
          {1,
           {
               // Intermediate metrics of running tasks (docs/workflow.md, "Search"); `token` is
               // the claim that reported the step (a replayed attempt overwrites it).
               "CREATE TABLE task_reports (task_id {int} NOT NULL, step {int} NOT NULL, value {real} NOT NULL, "
               "token {int} NOT NULL, created_ms {int} NOT NULL, PRIMARY KEY (task_id, step))",
               // A search, its ASHA scheduler (min_resource 0: none) and its trials' tasks.
               "CREATE TABLE searches (id {id}, name {text} NOT NULL, kind {text} NOT NULL, space {text} NOT NULL, "
               "sampler {text} NOT NULL, metric {text} NOT NULL, mode {text} NOT NULL CHECK (mode IN ('min', 'max')), "
               "min_resource {int} NOT NULL, max_resource {int} NOT NULL, reduction_factor {int} NOT NULL, "
               "created_ms {int} NOT NULL)",
               "CREATE TABLE search_trials (task_id {int} PRIMARY KEY, search_id {int} NOT NULL, number {int} NOT NULL, "
               "params {text} NOT NULL)",
               "CREATE INDEX search_trials_by_search ON search_trials (search_id, number)",
               // ASHA's rungs: the value each trial had on reaching a rung and the decision taken
               // then, kept so that a replayed attempt gets the same decision again.
               "CREATE TABLE search_rungs (search_id {int} NOT NULL, rung {int} NOT NULL, task_id {int} NOT NULL, "
               "value {real} NOT NULL, decision {text} NOT NULL CHECK (decision IN ('continue', 'stop')), "
               "PRIMARY KEY (search_id, rung, task_id))",
           }},
      }};
  return part;
}

}  // namespace loom::flow::detail
