#pragma once
// Helpers for the optimizers' fused CPU update loops (one pass over each parameter, no
// allocation). Elementwise, so the result does not depend on how the range is split.
#include <cstdint>

#include "loom/core/parallel.h"
#include "loom/core/tensor.h"

namespace loom::train::detail {

inline constexpr int64_t kFusedGrain = 1 << 14;

// Runs body(i) for every element index of a tensor of n elements, split over the pool.
template <typename Body>
void fused_for(int64_t n, Body body) {
  parallel_for(0, n, kFusedGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) body(i);
  });
}

// The element pointer of a contiguous tensor (nullptr for an undefined one).
template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace loom::train::detail
