#pragma once
// Activation functions (ActivationFn, the named constants, activation_by_name) and the Activation layer.
#include <functional>
#include <string>

#include "loom/nn/layer.h"

namespace loom::nn {

struct ActivationFn {
  std::string name;
  std::function<Tensor(const Tensor&)> fn;
  Tensor operator()(const Tensor& x) const { return fn(x); }
};
extern const ActivationFn identity, relu, tanh, sigmoid, gelu, elu, leaky_relu, softplus, softmax, log_softmax;
// The named activation; throws ValueError listing the known names.
const ActivationFn& activation_by_name(const std::string& name);

class Activation : public Layer {
 public:
  Activation(const Layer& input, ActivationFn fn, const std::string& name = "");
  explicit Activation(ActivationFn fn, const std::string& name = "");  // bound by its first call
};

}  // namespace loom::nn
