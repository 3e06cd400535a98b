#pragma once
// Scaled dot-product attention (torch.nn.functional.scaled_dot_product_attention):
//   softmax(q @ k^T * scale + mask) @ v
// q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev); batch axes broadcast.
//
// On the CPU, float32 and float64 run one fused kernel forward and backward (FlashAttention-2:
// tiles of queries against tiles of keys with an online softmax; masks, causality and dropout
// applied inside the tile loop; tiles with every position masked skipped; the backward
// recomputes the weights from each row's saved log-sum-exp), so no L x S tensor is formed and a
// step's memory grows with L + S, not L x S ([kernels.md](../../../docs/kernels.md#attention)).
// Key / value heads read by several query heads (grouped-query and multi-query attention) are
// not copied. The math form (the composite of matmul and softmax) runs where the fused kernel
// does not apply: 16-bit floats, a float mask that requires grad (its gradient is L x S anyway),
// a float mask of another dtype than q (promotion, as the composite adds it), and empty
// operands (L, S or E = 0 give what PyTorch's math form gives: an empty result, zeros, uniform
// weights). Results do not depend on the thread count.
#include <optional>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

class Generator;

// mask (optional) broadcasts to (..., L, S): bool (true = attend, false = masked out with
// -inf) or floating (added to the scores). is_causal masks j > i (top-left aligned, as
// torch); it cannot be combined with a mask. scale defaults to 1 / sqrt(E). A row with every
// position masked gives 0 and takes no gradient (PyTorch >= 2.5's rule: softmax's formula would
// give NaN); a NaN score gives its row NaN. Differentiable in q, k, v and a float mask.
//
// dropout_p in [0, 1): dropout on the attention weights (kept ones scaled by 1 / (1 - p)),
// drawn from `generator` (the default generator when null) with one key per call, so a seeded
// generator reproduces it; the kept weights are those bernoulli(scores' shape, 1 - p) draws with
// that key. p = 0 is no dropout and draws nothing. Pass dropout_p only in training (torch's
// F.scaled_dot_product_attention applies it whenever it is given, too).
//
// enable_gqa (torch 2.5's flag): k and v have Hkv heads on axis -3 and q has H, a multiple of
// Hkv; query head h attends with key / value head h / (H / Hkv) (torch's repeat_interleave of k
// and v over the heads, without the copy). Without it, k and v of 1 head broadcast over q's
// heads (multi-query attention) as any batch axis does, also without a copy in the fused kernel.
LOOM_API Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask = Tensor(),
                                             bool is_causal = false, std::optional<double> scale = std::nullopt,
                                             double dropout_p = 0.0, bool enable_gqa = false, Generator* generator = nullptr);

}  // namespace loom
