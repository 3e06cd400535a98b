#pragma once
// Weight penalties to add to a loss: coef * sum |w| (L1) and coef * sum w^2 (L2), over chosen
// parameters — tensors, or every trainable parameter of chosen layers (each tensor once, also
// when layers share state through reuse_with). The result is a differentiable 0-d tensor.
//
//   Tensor loss = train::cross_entropy(logits, y) + train::l2_penalty({dense1, dense2}, 1e-4);
//
// Note: an L2 penalty coef * sum w^2 adds 2 coef w to the gradient, so it matches an
// optimizer's weight_decay = 2 coef for SGD (not for AdamW, whose decay is decoupled).
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"
#include "loom/nn/layer.h"

namespace loom::train {

// The trainable parameters of `layers`, in order, each tensor once.
LOOM_API std::vector<Tensor> parameters(const std::vector<nn::Layer>& layers);

// An empty list gives a 0-d float32 zero.
LOOM_API Tensor l1_penalty(const std::vector<Tensor>& params, double coef);
LOOM_API Tensor l2_penalty(const std::vector<Tensor>& params, double coef);
LOOM_API Tensor l1_penalty(const std::vector<nn::Layer>& layers, double coef);
LOOM_API Tensor l2_penalty(const std::vector<nn::Layer>& layers, double coef);

// A reusable penalty: l1 * sum |w| + l2 * sum w^2 over a fixed set of parameters.
class LOOM_API Regularizer {
 public:
  Regularizer(std::vector<Tensor> params, double l1, double l2) : params_(std::move(params)), l1_(l1), l2_(l2) {}
  Regularizer(const std::vector<nn::Layer>& layers, double l1, double l2)
      : Regularizer(parameters(layers), l1, l2) {}
  Tensor operator()() const;
  const std::vector<Tensor>& params() const { return params_; }

 private:
  std::vector<Tensor> params_;
  double l1_, l2_;
};

}  // namespace loom::train
