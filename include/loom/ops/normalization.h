#pragma once
// Normalization layers as torch.nn.functional, channels on axis 1.
#include <cstdint>

#include "loom/core/tensor.h"

namespace loom {

// x: (N, C, ...). running_mean / running_var / weight / bias: (C,), each optional (undefined).
// training: normalizes with the batch statistics (biased variance) and, when the running
// tensors are given, updates them IN PLACE: running = (1 - momentum) * running + momentum *
// batch statistic, with the unbiased variance for running_var (as PyTorch). Needs more than one
// value per channel.
// eval (training = false): normalizes with running_mean / running_var (required), unchanged.
// Differentiable in x, weight and bias.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), bool training = false, double momentum = 0.1, double eps = 1e-5);

// Normalizes over the trailing axes `normalized_shape` (biased variance); weight and bias,
// when given, have shape normalized_shape. Differentiable in x, weight and bias.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace loom
