#include "loom/nn/activation.h"

#include "nn/kind_util.h"
#include "nn/register_kinds.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/nn.h"
#include "loom/ops/reduction.h"

namespace loom::nn {

using detail::require_input;

namespace {

// ---------------------------------------------------------------- Activation
struct ActivationImpl final : KindBase<ActivationImpl, ActivationAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override { return "Activation"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override { return attrs.fn(in[0]); }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return {in.at(0)}; }
};

}  // namespace

Activation::Activation(ActivationFn fn, const std::string& name)
    : Layer(unbound_layer("Activation", [fn](const LayerSpec& s) -> Layer { return Activation(s.input(), fn, s.name); }, name)) {}

Activation::Activation(const Layer& input, ActivationFn fn, const std::string& name) {
  require_input(input, "Activation");
  auto impl = std::make_shared<ActivationImpl>();
  impl->attrs.fn = std::move(fn);
  impl->inputs = {input};
  impl->shape = input.shape();
  impl->dtype = is_floating(input.dtype()) ? input.dtype() : DType::Float32;
  impl->name = unique_name("activation", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

void detail::register_activation_layers(AddKind add) {
  add("Activation", [](const LayerSpec& s) -> Layer {
    return Activation(s.input(), read_attributes<ActivationAttributes>(s.options).fn, s.name);
  }, {write_attributes(ActivationAttributes{})});
}

// ---------------------------------------------------------------- activation functions
const ActivationFn identity{"identity", [](const Tensor& x) { return x; }};
const ActivationFn relu{"relu", [](const Tensor& x) { return loom::relu(x); }};
const ActivationFn tanh{"tanh", [](const Tensor& x) { return loom::tanh(x); }};
const ActivationFn sigmoid{"sigmoid", [](const Tensor& x) { return loom::sigmoid(x); }};
const ActivationFn gelu{"gelu", [](const Tensor& x) { return loom::gelu(x); }};
const ActivationFn elu{"elu", [](const Tensor& x) { return loom::elu(x); }};
const ActivationFn leaky_relu{"leaky_relu", [](const Tensor& x) { return loom::leaky_relu(x); }};
const ActivationFn softplus{"softplus", [](const Tensor& x) { return loom::softplus(x); }};
const ActivationFn softmax{"softmax", [](const Tensor& x) { return loom::softmax(x, -1); }};
const ActivationFn log_softmax{"log_softmax", [](const Tensor& x) { return loom::log_softmax(x, -1); }};
const ActivationFn relu6{"relu6", [](const Tensor& x) { return loom::clip(x, 0.0, 6.0); }};
// written as torch computes them, so that imported MobileNets round as torch's do
const ActivationFn hard_sigmoid{"hard_sigmoid", [](const Tensor& x) { return loom::clip(x + 3.0, 0.0, 6.0) / 6.0; }};
const ActivationFn hard_swish{"hard_swish", [](const Tensor& x) { return x * (loom::clip(x + 3.0, 0.0, 6.0) / 6.0); }};
const ActivationFn silu{"silu", [](const Tensor& x) { return loom::silu(x); }};
const ActivationFn gelu_tanh{"gelu_tanh", [](const Tensor& x) { return loom::gelu(x, true); }};

const ActivationFn& activation_by_name(const std::string& name) {
  static const ActivationFn* all[] = {&identity, &relu, &tanh, &sigmoid, &gelu, &elu, &leaky_relu, &softplus, &softmax, &log_softmax,
                                     &relu6,    &hard_sigmoid, &hard_swish, &silu, &gelu_tanh};
  std::string known;
  for (const ActivationFn* f : all) {
    if (f->name == name) return *f;
    known += (known.empty() ? "" : ", ") + f->name;
  }
  throw ValueError("activation_by_name: unknown activation '" + name + "' (known: " + known + ")");
}

}  // namespace loom::nn
