#pragma once
#include "loom/core/tensor.h"

namespace loom {

// numpy.matmul: 1-d operands are promoted and squeezed back, batch axes broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor dot(const Tensor& a, const Tensor& b);    // numpy.dot for 1-d and 2-d operands
Tensor outer(const Tensor& a, const Tensor& b);  // of the flattened operands
Tensor tensordot(const Tensor& a, const Tensor& b, int64_t axes = 2);
Tensor tensordot(const Tensor& a, const Tensor& b, const Axes& axes_a, const Axes& axes_b);

}  // namespace loom
