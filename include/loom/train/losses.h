#pragma once
// Loss functions for training, each a composition of differentiable ops (gradients flow to the
// predictions, and to the targets where the formula depends on them), with torch.nn.functional
// semantics. `reduction` is Mean (the default), Sum or None (the elementwise / per-sample loss).
//
// The classification losses on logits and log-probabilities (cross_entropy, nll_loss,
// binary_cross_entropy_with_logits) have one definition each, in loom/ops/losses.h with
// torch.nn.functional's parameter order (weight before reduction); they are visible here under
// the same names. The losses below exist only here.
#include <cstdint>

#include "loom/core/api.h"
#include "loom/core/tensor.h"
#include "loom/ops/losses.h"

namespace loom::train {

using loom::Reduction;
using loom::cross_entropy;
using loom::nll_loss;
using loom::binary_cross_entropy_with_logits;

// Every loss of (prediction, target) has a two-argument overload with the defaults, so that its
// name is a function of (prediction, target) where one is expected:
// train::Model(graph, train::mse, optimizer) (issue 36). The operands of the elementwise losses
// must have one shape, or one must broadcast into the other's: shapes that broadcast to a third
// shape ((N, 1) against (N,)) throw ShapeError naming both and the fix.

// mean((pred - target)^2) (F.mse_loss).
LOOM_API Tensor mse(const Tensor& pred, const Tensor& target);
LOOM_API Tensor mse(const Tensor& pred, const Tensor& target, Reduction reduction);
// mean(|pred - target|) (F.l1_loss); gradient 0 where pred == target.
LOOM_API Tensor mae(const Tensor& pred, const Tensor& target);
LOOM_API Tensor mae(const Tensor& pred, const Tensor& target, Reduction reduction);
// F.huber_loss: 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta), d = pred - target.
LOOM_API Tensor huber(const Tensor& pred, const Tensor& target);
LOOM_API Tensor huber(const Tensor& pred, const Tensor& target, double delta, Reduction reduction = Reduction::Mean);

// Binary cross-entropy on probabilities in [0, 1] (F.binary_cross_entropy): each log term is
// clamped to >= -100 as in PyTorch, so p = 0 or 1 gives a finite loss. At exactly p = 0 or 1 the
// clamped term contributes no gradient (PyTorch's backward instead divides by max(p(1-p), 1e-12)).
// weight (optional) broadcasts against pred.
LOOM_API Tensor binary_cross_entropy(const Tensor& pred, const Tensor& target);
LOOM_API Tensor binary_cross_entropy(const Tensor& pred, const Tensor& target, Reduction reduction,
                            const Tensor& weight = Tensor());

// KL divergence with F.kl_div semantics: `input` holds log-probabilities; `target` holds
// probabilities (or log-probabilities with log_target). Pointwise
// target * (log(target) - input) (0 where target == 0). BatchMean divides the sum by the batch
// size input.dim(0) — the mathematically correct KL per sample, and the default here (PyTorch
// defaults to the elementwise Mean and warns about it).
enum class KLReduction { None, Mean, Sum, BatchMean };
LOOM_API Tensor kl_divergence(const Tensor& input, const Tensor& target);
LOOM_API Tensor kl_divergence(const Tensor& input, const Tensor& target, KLReduction reduction,
                     bool log_target = false);

// Cosine similarity along `axis` as F.cosine_similarity: sum(a b) / sqrt(max(|a|^2 |b|^2, eps^2)).
LOOM_API Tensor cosine_similarity(const Tensor& a, const Tensor& b, int64_t axis = -1, double eps = 1e-8);
// 1 - cosine_similarity(a, b) along the last axis, reduced over the remaining elements.
LOOM_API Tensor cosine(const Tensor& a, const Tensor& b);
LOOM_API Tensor cosine(const Tensor& a, const Tensor& b, Reduction reduction);
// F.cosine_embedding_loss: a, b (N, D) or (D,), y of +1 / -1 per sample: 1 - cos where y = 1,
// max(0, cos - margin) where y = -1 (cos with PyTorch's 1e-12 added to each squared norm).
LOOM_API Tensor cosine_embedding(const Tensor& a, const Tensor& b, const Tensor& y, double margin = 0.0,
                        Reduction reduction = Reduction::Mean);

}  // namespace loom::train
