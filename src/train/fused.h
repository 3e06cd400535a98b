#pragma once
// How the optimizers split their fused updates (the backend's optimizer kernels, one pass over
// each parameter, no allocation) over the pool. Elementwise, but a vectorized loop may round its
// tail elements differently from its vector body (the AdamW + AMSGrad kernel does: GCC
// contracts the two paths differently), so ranges are split only at multiples of kFusedGrain:
// every element is computed at the same place of the same block whatever the thread count.
#include <algorithm>
#include <cstdint>

#include "loom/core/parallel.h"

namespace loom::train::detail {

inline constexpr int64_t kFusedGrain = 1 << 14;

// Runs range(b, e) over [0, n) in blocks of kFusedGrain, split over the pool.
template <typename Range>
void fused_blocks(int64_t n, Range range) {
  const int64_t blocks = (n + kFusedGrain - 1) / kFusedGrain;
  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) { range(b0 * kFusedGrain, std::min(n, b1 * kFusedGrain)); });
}

}  // namespace loom::train::detail
