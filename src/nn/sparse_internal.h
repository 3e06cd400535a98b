#pragma once
#include "loom/nn/layer.h"
#include "loom/ops/sparse.h"

namespace loom::nn::detail {

// x @ w for a layer whose first input is `input`. A SparseInput computes an undefined tensor (its
// value is a SparseTensor): then the product is the sparse one with the input's current value.
Tensor input_matmul(const Layer& input, const Tensor& x, const Tensor& w);
// Whether `input` is a SparseInput, and its current value (ValueError naming it when it has none).
bool is_sparse_input(const Layer& input);
SparseTensor sparse_input_value(const Layer& input);

}  // namespace loom::nn::detail
