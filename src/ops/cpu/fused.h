#pragma once
// Fused CPU kernels that ops use as fast paths inside composite ops (the composite stays the
// general definition; these only cover the common layouts).
#include "loom/core/tensor.h"

namespace loom::cpu {

// Softmax (log = false) or log-softmax of each row of a contiguous float32 tensor along its
// last axis, into the contiguous float32 tensor `out` of the same shape: one pass for the max,
// one for exp and sum, one to scale, per row, with rows split over the pool.
void softmax_lastdim_f32(const Tensor& out, const Tensor& x, bool log);

// Cross-entropy of a contiguous float32 (N, C) x with int64 targets t (N,), rows whose target
// is ignore_index skipped: per row, m = max, ls = log(sum exp(x - m)) and
// loss = -((x[t] - m) - ls) (0 where ignored), the log-softmax + pick composite's arithmetic
// bit for bit, in one read of x. Targets must be valid class ids or ignore_index.
void cross_entropy_rows_f32(const Tensor& loss, const Tensor& m, const Tensor& ls, const Tensor& x, const Tensor& t,
                            int64_t ignore_index);
// Its backward: gx = (softmax(x) - onehot(t)) * g per row (g: (N,) float32, 0 where ignored),
// computed as exp((x - m) - ls) * g, minus g at the target: the composite's bits.
void cross_entropy_rows_backward_f32(const Tensor& gx, const Tensor& g, const Tensor& x, const Tensor& m, const Tensor& ls,
                                     const Tensor& t, int64_t ignore_index);

}  // namespace loom::cpu
