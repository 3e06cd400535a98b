#include "loom/nn/linear.h"

#include "nn/init_options.h"
#include "nn/kind_util.h"
#include "nn/register_kinds.h"
#include "nn/sparse_internal.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/nn.h"

namespace loom::nn {

using detail::kMaxSize;
using detail::require_input;
using detail::with_units;

namespace {

// ---------------------------------------------------------------- Linear
struct LinearImpl final : LayerBase<LinearImpl> {
  bool pure() const override { return true; }
  int64_t n_units = 0;
  bool bias = true, transpose_weights = false;
  Init weight_init, bias_init;
  const char* kind() const override { return "Linear"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    const Tensor& w = state->param("weights");
    const Tensor wt = transpose_weights ? w.transpose() : w;
    if (bias && in[0].defined()) return linear(in[0], wt, state->param("bias"));  // the bias added inside the product
    Tensor y = detail::input_matmul(inputs[0], in[0], wt);  // a SparseInput too
    return bias ? y + state->param("bias") : y;
  }
  Options options() const override {
    return Options()
        .set_int("n_units", n_units)
        .set_bool("bias", bias)
        .set_bool("transpose_weights", transpose_weights)
        .set_object("weight_init", detail::init_options(weight_init))
        .set_object("bias_init", detail::init_options(bias_init));
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
  impl->n_units = n_units;
  impl->bias = o.bias;
  impl->transpose_weights = o.transpose_weights;
  impl->weight_init = o.weight_init;
  impl->bias_init = o.bias_init;
  impl->inputs = {input};
  impl->shape = with_units(input.shape(), n_units);
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
  static_cast<Layer&>(*this) = Layer(impl);
}

Linear::Linear(int64_t n_units, LinearOptions o, const std::string& name)
    : Layer(unbound_layer("Linear", [n_units, o](const LayerSpec& s) -> Layer { return Linear(s.input(), n_units, o, s.name); }, name)) {
  if (n_units <= 0) throw ValueError("Linear: n_units must be positive, got " + std::to_string(n_units));
}

void detail::register_linear_layers(AddKind add) {
  add("Linear", [](const LayerSpec& s) -> Layer {
    LinearOptions o;
    o.bias = s.options.get_bool("bias");
    o.transpose_weights = s.options.get_bool("transpose_weights");
    o.weight_init = init_from(s.options, "weight_init");
    o.bias_init = init_from(s.options, "bias_init");
    for (const auto& [param, t] : s.tied)
      if (param == "weights") o.shared_weights = t;
    return Linear(s.input(), s.options.get_int("n_units", 1, kMaxSize), o, s.name);
  });
}

}  // namespace loom::nn
