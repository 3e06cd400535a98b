#include "flow/task_schema.h"

namespace loom::flow::detail {

const store::SchemaPart& stream_schema() {
  // Append only: a released migration is never edited; a change is a new entry.
  static const store::SchemaPart part{
      "loom.flow.stream",
      {
          {1,
           {
               // Lineage of named queries and version ranges (flow::Lineage).
               "ALTER TABLE tasks ADD COLUMN input_dataset_last_version {int}",
               "ALTER TABLE tasks ADD COLUMN input_query {text}",
               // Stream controllers (docs/workflow.md, "Stream controllers"): what each watches,
               // when a batch is significant, the task it submits, and its progress: `batches`
               // (the number of the last batch, the watermark every trigger advances by a
               // conditional update) and `samples` (counted in the batches so far).
               "CREATE TABLE stream_controllers (name {text} PRIMARY KEY, dataset {text} NOT NULL, query {text}, "
               "min_samples {int} NOT NULL, min_fraction {real} NOT NULL, max_wait_ms {int} NOT NULL, kind {text} NOT NULL, "
               "hyper_parameters {text} NOT NULL, priority {int} NOT NULL, max_attempts {int} NOT NULL, timeout_ms {int} NOT NULL, "
               "lease_ms {int} NOT NULL, output_model {text}, batches {int} NOT NULL, samples {int} NOT NULL, "
               "created_ms {int} NOT NULL)",
               // One row per batch and one per version in it: the primary keys are the guard
               // that no batch is submitted twice and no version is in two batches.
               "CREATE TABLE stream_batches (controller {text} NOT NULL, batch {int} NOT NULL, task_id {int} NOT NULL, "
               "samples {int} NOT NULL, created_ms {int} NOT NULL, PRIMARY KEY (controller, batch))",
               "CREATE TABLE stream_batch_versions (controller {text} NOT NULL, version {int} NOT NULL, batch {int} NOT NULL, "
               "samples {int} NOT NULL, PRIMARY KEY (controller, version))",
           }},
          {2,
           {
               // A controller may submit a plan per batch (flow::ControllerSpec::plan, its JSON;
               // NULL: one task), and a batch records the plan it submitted (task_id 0 then).
               "ALTER TABLE stream_controllers ADD COLUMN plan {text}",
               "ALTER TABLE stream_batches ADD COLUMN plan_id {int}",
           }},
      }};
  return part;
}

}  // namespace loom::flow::detail
