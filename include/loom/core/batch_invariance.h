#pragma once

#include "loom/core/api.h"
// Whether float32 products computed on this thread are batch-invariant: each row of a matmul's
// (or linear's) result then has the same bits whatever the number of rows it was computed
// with, where it sat among them and how many threads shared the work (docs/kernels.md,
// "Batch-invariant products"). Off by default: training keeps oneDNN's faster GEMM, whose
// rounding of a row depends on the call's sizes. Inference turns it on: a compiled Plan or a
// graph function run without gradients (Model::predict and evaluate, the model server), so
// an answer never depends on what else shared its batch.

namespace loom {

LOOM_API bool batch_invariant();

// Sets the mode for the current thread while alive (on by default), and restores it after.
class LOOM_API BatchInvariantScope {
 public:
  explicit BatchInvariantScope(bool enabled = true);
  ~BatchInvariantScope();
  BatchInvariantScope(const BatchInvariantScope&) = delete;
  BatchInvariantScope& operator=(const BatchInvariantScope&) = delete;

 private:
  bool previous_;
};

}  // namespace loom
