#pragma once
// Helpers for the optimizers' fused CPU update loops (one pass over each parameter, no
// allocation). Elementwise, but a vectorized loop may round its tail elements differently from
// its vector body (the AdamW + AMSGrad kernel does: GCC contracts the two paths differently),
// so ranges are split only at multiples of kFusedGrain: every element is computed at the same
// place of the same block whatever the thread count.
#include <algorithm>
#include <cstdint>

#include "loom/core/parallel.h"
#include "loom/core/tensor.h"

namespace loom::train::detail {

inline constexpr int64_t kFusedGrain = 1 << 14;

// Runs range(b, e) over [0, n) in blocks of kFusedGrain, split over the pool.
template <typename Range>
void fused_blocks(int64_t n, Range range) {
  const int64_t blocks = (n + kFusedGrain - 1) / kFusedGrain;
  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) { range(b0 * kFusedGrain, std::min(n, b1 * kFusedGrain)); });
}

// Runs body(i) for every element index of a tensor of n elements, split over the pool.
template <typename Body>
void fused_for(int64_t n, Body body) {
  fused_blocks(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) body(i);
  });
}

// The element pointer of a contiguous tensor (nullptr for an undefined one).
template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace loom::train::detail
