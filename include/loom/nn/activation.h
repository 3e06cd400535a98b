#pragma once
// Activation functions (ActivationFn, the named constants, activation_by_name) and the Activation layer.
#include <functional>
#include <string>

#include "loom/core/api.h"
#include "loom/nn/attributes.h"
#include "loom/nn/layer.h"

namespace loom::nn {

struct LOOM_API ActivationFn {
  std::string name;
  std::function<Tensor(const Tensor&)> fn;
  Tensor operator()(const Tensor& x) const { return fn(x); }
  // The same function as `other` (a copy of it): the same name and the same callable's type, so
  // an activation named "relu" that computes something else is not relu.
  bool is(const ActivationFn& other) const { return name == other.name && fn.target_type() == other.fn.target_type(); }
};
LOOM_API extern const ActivationFn identity, relu, tanh, sigmoid, gelu, elu, leaky_relu, softplus, softmax, log_softmax;
// PyTorch's ReLU6 (min(max(x, 0), 6)), Hardsigmoid (relu6(x + 3) / 6) and Hardswish (x hardsigmoid(x)),
// which MobileNets use; ONNX's Clip(0, 6), HardSigmoid(1/6, 1/2) and HardSwish.
LOOM_API extern const ActivationFn relu6, hard_sigmoid, hard_swish;
// x sigmoid(x) (torch's SiLU; Llama's SwiGLU gate) and GELU with the tanh approximation (GPT-2's
// "gelu_new", torch's gelu(approximate="tanh")).
LOOM_API extern const ActivationFn silu, gelu_tanh;
// The named activation; throws ValueError listing the known names.
LOOM_API const ActivationFn& activation_by_name(const std::string& name);

// What an Activation layer is besides its input (nn/attributes.h).
struct LOOM_API ActivationAttributes {
  ActivationFn fn;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("fn", fn);
  }
};

class LOOM_API Activation : public Layer {
 public:
  Activation(const Layer& input, ActivationFn fn, const std::string& name = "");
  explicit Activation(ActivationFn fn, const std::string& name = "");  // bound by its first call
};

}  // namespace loom::nn
