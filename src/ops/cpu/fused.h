#pragma once
// Fused CPU kernels that ops use as fast paths inside composite ops (the composite stays the
// general definition; these only cover the common layouts).
#include "loom/core/tensor.h"

namespace loom::cpu {

// Softmax (log = false) or log-softmax of each row of a contiguous float32 tensor along its
// last axis, into the contiguous float32 tensor `out` of the same shape: one pass for the max,
// one for exp and sum, one to scale, per row, with rows split over the pool.
void softmax_lastdim_f32(const Tensor& out, const Tensor& x, bool log);

}  // namespace loom::cpu
