#pragma once
// Training-mode batch norm's internals shared with loom::nn: the running-statistics update,
// and batch norm whose statistics are reduced across replicas (synchronized batch norm,
// loom::nn::BatchNorm with sync).
#include <functional>

#include "loom/core/tensor.h"

namespace loom::detail {

// Sums a contiguous float64 tensor over every replica, in place; each replica calls it in the
// same order.
using ReplicaReduce = std::function<void(Tensor&)>;

// The running statistics moved towards a batch's mean and biased var over `count` values
// (the var unbiased by count / (count - 1)), as batch_norm does; not recorded for gradients.
void update_running_stats(const Tensor& running_mean, const Tensor& running_var, const Tensor& mean, const Tensor& var,
                          double momentum, double count);

// Whether batch_norm_reduced runs fused here (float32 / float64 on the CPU, weight and bias of
// x's dtype); otherwise the caller composes it from differentiable ops.
bool batch_norm_reduced_fused(const Tensor& x, const Tensor& weight, const Tensor& bias);

// batch_norm(x, running_mean, running_var, weight, bias, training=true, momentum, eps) over the
// replicas' whole batch: the per-channel sum, sum of squares and count are reduced (one call)
// before the statistics are formed, and the backward reduces the gradient's per-channel sums
// (one call). The weight and bias gradients are this replica's (the optimizer's gradient
// averaging sums them). Throws as batch_norm when the whole batch has one value per channel.
Tensor batch_norm_reduced(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                          const Tensor& bias, double momentum, double eps, ReplicaReduce reduce);

}  // namespace loom::detail
