#pragma once
#include "loom/nn/layer.h"

namespace loom::nn::detail {

// x @ w for a layer whose first input is `input`. A SparseInput computes an undefined tensor (its
// value is a SparseTensor): then the product is the sparse one with the input's current value.
Tensor input_matmul(const Layer& input, const Tensor& x, const Tensor& w);

}  // namespace loom::nn::detail
