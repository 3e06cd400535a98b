#include "loom/nn/feed_forward.h"

#include "nn/kind_util.h"
#include "nn/register_kinds.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"

namespace loom::nn {

using detail::require_input;

namespace {

struct SwiGLUImpl final : KindBase<SwiGLUImpl, SwiGLUAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override { return "SwiGLU"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    const Tensor gated = silu(matmul(in[0], state->param("gate"))) * matmul(in[0], state->param("up"));
    return matmul(gated, state->param("down"));
  }
  std::vector<Shape> output_shapes(const std::vector<Shape>& x) const override {
    const Shape& s = x.at(0);
    const int64_t d = state->param("gate").shape()[0];
    if (s.empty() || (s.back() >= 0 && s.back() != d))
      throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(s) + " (valid: (..., " + std::to_string(d) + "))");
    return {s};
  }
};

}  // namespace

SwiGLU::SwiGLU(const Layer& input, int64_t hidden, Init weight_init, const std::string& name) {
  require_input(input, "SwiGLU");
  if (hidden <= 0) throw ValueError("SwiGLU: hidden must be positive, got " + std::to_string(hidden));
  const int64_t d = input.n_units();
  if (d <= 0)
    throw ShapeError("SwiGLU: input '" + input.name() + "' has shape " + shape_str(input.shape()) +
                     "; its last dimension (the units) must be known when the layer is created");
  if (!is_floating(input.dtype()))
    throw DTypeError("SwiGLU: input '" + input.name() + "' has dtype " + dtype_name(input.dtype()) + " (valid: a floating dtype)");
  auto impl = std::make_shared<SwiGLUImpl>();
  impl->attrs = {hidden, weight_init};
  impl->inputs = {input};
  impl->dtype = input.dtype();
  impl->name = unique_name("swiglu", name);
  impl->state->add_param("gate", initialize(weight_init, {d, hidden}, input.dtype()).requires_grad_());
  impl->state->add_param("up", initialize(weight_init, {d, hidden}, input.dtype()).requires_grad_());
  impl->state->add_param("down", initialize(weight_init, {hidden, d}, input.dtype()).requires_grad_());
  impl->shape = detail::shape_by_rule(*impl, {input});
  static_cast<Layer&>(*this) = Layer(impl);
}

void detail::register_feed_forward_layers(AddKind add) {
  add("SwiGLU", [](const LayerSpec& s) -> Layer {
    const SwiGLUAttributes a = read_attributes<SwiGLUAttributes>(s.options);
    return SwiGLU(s.input(), a.hidden, a.weight_init, s.name);
  }, {write_attributes(SwiGLUAttributes{})});
}

}  // namespace loom::nn
