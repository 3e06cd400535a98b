#pragma once
// Loss functions matching torch.nn.functional. Class dimension: axis 1 of (N, C, d1, ...), or
// axis 0 of an unbatched (C,) input.
#include <cstdint>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

enum class Reduction { None, Mean, Sum };

// log_probs (N, C, ...) with integer target (N, ...) of class ids in [0, C) or ignore_index.
// loss_i = -weight[t_i] * log_probs[i, t_i] (0 where ignored); Mean divides the sum by the sum
// of weight[t_i] over the non-ignored targets (NaN when all are ignored, as PyTorch). weight
// (C,) is optional and gets no gradient. Differentiable in log_probs.
// Each loss has a two-argument overload (the defaults) so that its name is a function of
// (prediction, target): train::Model(graph, cross_entropy, optimizer) (issue 36).
LOOM_API Tensor nll_loss(const Tensor& log_probs, const Tensor& target);
LOOM_API Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight,
                Reduction reduction = Reduction::Mean, int64_t ignore_index = -100);

// nll_loss(log_softmax(logits, class axis), ...) with label smoothing as PyTorch:
// (1 - s) * nll + s / C * smooth, where smooth_i = -sum_c weight[c] * log_probs[i, c] (0 where
// ignored), normalized under Mean by the same denominator as nll. A floating target of the
// logits' shape holds class probabilities instead (smoothed as t * (1 - s) + s / C; Mean
// divides by the number of samples). Differentiable in logits (and probability targets).
LOOM_API Tensor cross_entropy(const Tensor& logits, const Tensor& target);
LOOM_API Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight,
                     Reduction reduction = Reduction::Mean, int64_t ignore_index = -100,
                     double label_smoothing = 0.0);

// Numerically stable binary cross-entropy on logits (torch's formula):
// loss = (1 - y) * x + (1 + (pos_weight - 1) * y) * log(1 + exp(-x)), times weight when given.
// weight and pos_weight broadcast against x (pos_weight usually (C,), one per class).
// Differentiable in logits, targets, weight and pos_weight.
LOOM_API Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets);
LOOM_API Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets, const Tensor& weight,
                                        const Tensor& pos_weight = Tensor(), Reduction reduction = Reduction::Mean);

}  // namespace loom
