#pragma once
// Normalization layers as torch.nn.functional, channels on axis 1.
#include <cstdint>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

// x: (N, C, ...). running_mean / running_var / weight / bias: (C,), each optional (undefined).
// training: normalizes with the batch statistics (biased variance) and, when the running
// tensors are given, updates them IN PLACE: running = (1 - momentum) * running + momentum *
// batch statistic, with the unbiased variance for running_var (as PyTorch). Needs more than one
// value per channel.
// eval (training = false): normalizes with running_mean / running_var (required), unchanged.
// Differentiable in x, weight and bias.
LOOM_API Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), bool training = false, double momentum = 0.1, double eps = 1e-5);

// Normalizes over the trailing axes `normalized_shape` (biased variance); weight and bias,
// when given, have shape normalized_shape. Differentiable in x, weight and bias.
LOOM_API Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// Root-mean-square normalization (Zhang & Sennrich 2019; torch.nn.functional.rms_norm, Llama's
// RMSNorm): x / sqrt(mean(x^2 over `normalized_shape`) + eps), times weight (of shape
// normalized_shape) when given. No centring, no bias. Differentiable in x and weight.
LOOM_API Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(), double eps = 1e-6);

// Training-mode batch norm in parts, for batch norm whose statistics are reduced across
// replicas between the parts (loom::nn::BatchNorm with sync defines synchronized batch norm
// from them as a custom op, loom/autograd/custom_op.h). Fused CPU kernels for a float32 or
// float64 x (N, C, ...) with C > 0, weight and bias (C,) of its dtype or undefined:
// batch_norm_parts_supported says whether these operands qualify, and each part throws
// ValueError when they do not. mean, var, the sums: float64 (C,) / (2C + 1,) / (2C,).
// None of them is recorded for gradients.
LOOM_API bool batch_norm_parts_supported(const Tensor& x, const Tensor& weight = Tensor(), const Tensor& bias = Tensor());
// Per channel the sum of x, the sum of x^2 (from the centred sums, no float32 cancellation),
// then the count of values per channel: (2C + 1,).
LOOM_API Tensor batch_norm_sums(const Tensor& x);
// The batch mean and biased variance (clamped at 0) from sums as batch_norm_sums writes them,
// summed over replicas or not, and the count they are over (sums[2C]).
struct LOOM_API BatchNormStats {
  Tensor mean, var;
  double count = 0;
};
LOOM_API BatchNormStats batch_norm_stats(const Tensor& sums);
// y = (x - mean) / sqrt(var + eps) * weight + bias (weight, bias optional), x's dtype.
LOOM_API Tensor batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& weight, const Tensor& bias,
                        double eps);
// The backward's sums for output gradient g (x's shape): per channel sum g, then sum g (x - mean): (2C,).
LOOM_API Tensor batch_norm_grad_sums(const Tensor& g, const Tensor& x, const Tensor& mean);
// The input gradient from grad_sums (batch_norm_grad_sums', summed over replicas or not) over
// `count` values per channel.
LOOM_API Tensor batch_norm_input_grad(const Tensor& g, const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& weight,
                             const Tensor& grad_sums, double count, double eps);
// Moves the running statistics IN PLACE towards a batch's mean and biased var over `count`
// values (the var unbiased by count / (count - 1)), as batch_norm does; not recorded.
LOOM_API void batch_norm_update_running(const Tensor& running_mean, const Tensor& running_var, const Tensor& mean,
                               const Tensor& var, double momentum, double count);

}  // namespace loom
