#pragma once
// Scaled dot-product attention (torch.nn.functional.scaled_dot_product_attention, math form):
//   softmax(q @ k^T * scale + mask) @ v
// q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev); batch axes broadcast.
#include <optional>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

// mask (optional) broadcasts to (..., L, S): bool (true = attend, false = masked out with
// -inf) or floating (added to the scores). is_causal masks j > i (top-left aligned, as
// torch); it cannot be combined with a mask. scale defaults to 1 / sqrt(E). A row with every
// position masked gives NaN (as the math formula). Differentiable in q, k, v and a float mask.
LOOM_API Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask = Tensor(),
                                    bool is_causal = false, std::optional<double> scale = std::nullopt);

}  // namespace loom
