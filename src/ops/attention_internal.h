#pragma once
// The math form of scaled dot-product attention (internal): the composite of matmul, softmax and
// dropout that forms the whole L x S weights. The op runs it where its fused kernel does not
// apply, and the tests hold the fused kernel to it (values and gradients).
#include <optional>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {
class Generator;
}

namespace loom::detail {

// scaled_dot_product_attention's arguments, already checked by the op (or by the test calling
// it): enable_gqa repeats each key / value head over its group of query heads.
LOOM_INTERNAL Tensor scaled_dot_product_attention_math(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                                       bool is_causal, std::optional<double> scale, double dropout_p,
                                                       bool enable_gqa, Generator* generator);

}  // namespace loom::detail
