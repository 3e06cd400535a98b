#pragma once
// What produced a model or dataset version (docs/workflow.md, "Lineage"): the workflow task and
// the training run, recorded with the version when it is saved.
#include <cstdint>

#include "loom/core/api.h"

namespace loom::store {

struct LOOM_API Provenance {
  int64_t task_id = 0;  // the flow task (flow::Claim::task_id) that saved it; 0: none
  int64_t run_id = 0;   // the run (Runs, StoreLogger) that trained it; 0: none

  // Its columns of the models (and datasets) table and its keys (loom/store/record.h).
  template <class Visit>
  void fields(Visit&& visit) {
    visit("task_id", task_id);
    visit("run_id", run_id);
  }
};

}  // namespace loom::store
