#include "loom/nn/linear.h"

#include "nn/kind_util.h"
#include "nn/register_kinds.h"
#include "nn/sparse_internal.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/nn.h"

namespace loom::nn {

using detail::require_input;
using detail::with_units;

namespace {

// ---------------------------------------------------------------- Linear
struct LinearImpl final : KindBase<LinearImpl, LinearAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override { return "Linear"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    const Tensor& w = state->param("weights");
    const Tensor wt = attrs.transpose_weights ? w.transpose() : w;
    if (attrs.bias && in[0].defined()) return linear(in[0], wt, state->param("bias"));  // the bias added inside the product
    Tensor y = detail::input_matmul(inputs[0], in[0], wt);  // a SparseInput too
    return attrs.bias ? y + state->param("bias") : y;
  }
  // (..., in) -> (..., n_units); `in` must be what the weights take
  std::vector<Shape> output_shapes(const std::vector<Shape>& x) const override {
    const Tensor& w = state->param("weights");
    const int64_t in = attrs.transpose_weights ? w.shape()[1] : w.shape()[0];
    const Shape& s = x.at(0);
    const int64_t units = s.empty() ? 1 : s.back();
    if (units >= 0 && units != in)
      throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(s) + " has " + std::to_string(units) +
                       " units; its weights take " + std::to_string(in));
    return {with_units(s, attrs.n_units)};
  }
};

}  // namespace

Linear::Linear(const Layer& input, int64_t n_units, LinearOptions o, const std::string& name) {
  require_input(input, "Linear");
  if (n_units <= 0) throw ValueError("Linear: n_units must be positive, got " + std::to_string(n_units));
  const int64_t in = input.n_units();
  if (in <= 0)
    throw ShapeError("Linear: input '" + input.name() + "' has shape " + shape_str(input.shape()) +
                     "; its last dimension (the units) must be known when the layer is created");
  if (!is_floating(input.dtype()))
    throw DTypeError("Linear: input '" + input.name() + "' has dtype " + dtype_name(input.dtype()) + " (valid: a floating dtype)");
  auto impl = std::make_shared<LinearImpl>();
  impl->attrs = {n_units, o.bias, o.transpose_weights, o.weight_init, o.bias_init};
  impl->inputs = {input};
  impl->dtype = input.dtype();
  impl->name = unique_name("linear", name);
  const Shape ws = o.transpose_weights ? Shape{n_units, in} : Shape{in, n_units};
  Tensor w;
  if (o.shared_weights) {
    w = *o.shared_weights;
    if (w.shape() != ws)
      throw ShapeError("Linear '" + impl->name + "': shared weights have shape " + shape_str(w.shape()) + " but " +
                       shape_str(ws) + " is needed" + (o.transpose_weights ? " (transposed)" : ""));
  } else {
    w = initialize(o.weight_init, ws, input.dtype()).requires_grad_();
  }
  impl->state->add_param("weights", w);
  if (o.bias) impl->state->add_param("bias", initialize(o.bias_init, {n_units}, input.dtype()).requires_grad_());
  impl->shape = detail::shape_by_rule(*impl, {input});
  static_cast<Layer&>(*this) = Layer(impl);
}

Linear::Linear(int64_t n_units, LinearOptions o, const std::string& name)
    : Layer(unbound_layer("Linear", [n_units, o](const LayerSpec& s) -> Layer { return Linear(s.input(), n_units, o, s.name); }, name)) {
  if (n_units <= 0) throw ValueError("Linear: n_units must be positive, got " + std::to_string(n_units));
}

void detail::register_linear_layers(AddKind add) {
  add("Linear", [](const LayerSpec& s) -> Layer {
    const auto a = read_attributes<LinearAttributes>(s.options);
    std::optional<Tensor> tied;
    for (const auto& [param, t] : s.tied)
      if (param == "weights") tied = t;
    const LinearOptions o{
        .bias = a.bias, .weight_init = a.weight_init, .bias_init = a.bias_init, .shared_weights = tied, .transpose_weights = a.transpose_weights};
    return Linear(s.input(), a.n_units, o, s.name);
  }, {write_attributes(LinearAttributes{})});
}

}  // namespace loom::nn
