#pragma once
// Gradient clipping with torch.nn.utils semantics, applied in place to the parameters'
// accumulated gradients (parameters without a gradient are skipped).
#include <limits>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom::train {

// Scales every gradient by min(1, max_norm / (total_norm + 1e-6)), where total_norm is the
// norm_type-norm of all gradients together (norm_type = infinity: the largest |g|), and returns
// total_norm (per-gradient norms combined in double; a float32 gradient's 2-norm is computed in
// float32, as PyTorch, other norms and dtypes in double). Like PyTorch, the gradients are always
// multiplied (by 1 when within the norm). error_if_nonfinite: throw ValueError when the total
// norm is NaN or infinite.
LOOM_API double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                      bool error_if_nonfinite = false);
// The total norm clip_grad_norm computes, without scaling anything; the coefficient it would
// scale by is min(1, max_norm / (norm + 1e-6)). TrainStep passes that to Optimizer::step, which
// scales each gradient inside its update instead of in a pass of its own.
LOOM_API double total_grad_norm(const std::vector<Tensor>& params, double norm_type = 2.0, bool error_if_nonfinite = false);
// Clamps every gradient element to [-value, value].
LOOM_API void clip_grad_value(const std::vector<Tensor>& params, double value);

}  // namespace loom::train
