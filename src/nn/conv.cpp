#include "loom/nn/conv.h"

#include "nn/conv_padding.h"
#include "nn/kind_util.h"
#include "nn/register_kinds.h"

namespace loom::nn {

using detail::ints;
using detail::kMaxExtent;
using detail::per_axis;
using detail::require_rank;

namespace {

// Output extent (the ops' rule, conv_output_size), -1 for an unknown input extent; 0 when the
// window does not fit.
int64_t conv_out(int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t before, int64_t after) {
  return in < 0 ? -1 : conv_output_size(in, k, stride, before, after, dil);
}

struct ConvImpl final : KindBase<ConvImpl, ConvAttributes> {
  bool pure() const override { return true; }
  size_t dims() const { return attrs.kernel_size.size(); }
  const char* kind() const override { return dims() == 1 ? "Conv1D" : "Conv2D"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    const ConvAttributes& a = attrs;
    Tensor b = a.bias ? state->param("bias") : Tensor();
    if (dims() == 1) return conv1d(in[0], state->param("weights"), b, a.stride, a.padding, a.dilation, a.groups);
    return conv2d(in[0], state->param("weights"), b, a.stride, a.padding, a.dilation, a.groups);
  }
  // (N, C, spatial...) -> (N, filters, spatial'...) by conv_output_size; C must be what the
  // weights take
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    const ConvAttributes& a = attrs;
    const Shape& x = in.at(0);
    if (x.size() != dims() + 2)
      throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(x) + " (valid: " +
                       (dims() == 1 ? "(batch, channels, length)" : "(batch, channels, height, width)") + ")");
    const int64_t cin = state->param("weights").shape()[1] * a.groups;
    if (x[1] >= 0 && x[1] != cin)
      throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(x) + " has " + std::to_string(x[1]) +
                       " channels; its weights take " + std::to_string(cin));
    const auto p = conv_padding(a);
    Shape out{x[0], a.filters};
    for (size_t i = 0; i < dims(); ++i) {
      const int64_t s = conv_out(x[2 + i], a.kernel_size[i], a.stride[i], a.dilation[i], p[i].first, p[i].second);
      if (x[2 + i] >= 0 && s <= 0)
        throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(x) + " is too small for kernel " + ints(a.kernel_size) +
                         " with this padding and dilation");
      out.push_back(s);
    }
    return {out};
  }
};

std::shared_ptr<ConvImpl> make_conv(size_t dims, const Layer& input, int64_t filters, const IntList& ks, const ConvOptions& o,
                                    const std::string& name) {
  const char* kind = dims == 1 ? "Conv1D" : "Conv2D";
  require_rank(input, dims + 2, kind, dims == 1 ? "(batch, channels, length)" : "(batch, channels, height, width)");
  auto impl = std::make_shared<ConvImpl>();
  ConvAttributes& a = impl->attrs;
  a.filters = filters;
  a.kernel_size = per_axis(ks, dims, {}, "kernel_size", kind, 1);
  a.stride = per_axis(o.stride, dims, std::vector<int64_t>(dims, 1), "stride", kind, 1);
  a.dilation = per_axis(o.dilation, dims, std::vector<int64_t>(dims, 1), "dilation", kind, 1);
  a.padding = o.padding;
  a.groups = o.groups;
  a.bias = o.bias;
  const int64_t cin = input.shape()[1];
  if (filters <= 0 || o.groups <= 0 || cin % o.groups != 0 || filters % o.groups != 0)
    throw ValueError(std::string(kind) + ": " + std::to_string(cin) + " input channels and " + std::to_string(filters) +
                     " filters must both be positive multiples of groups=" + std::to_string(o.groups));
  conv_padding(a);  // a bad padding is refused before any weight is made
  impl->inputs = {input};
  impl->dtype = input.dtype();
  impl->name = unique_name(dims == 1 ? "conv1d" : "conv2d", name);
  Shape ws{filters, cin / o.groups};
  ws.insert(ws.end(), a.kernel_size.begin(), a.kernel_size.end());
  impl->state->add_param("weights", initialize(o.weight_init, ws, input.dtype()).requires_grad_());
  if (o.bias) impl->state->add_param("bias", initialize(o.bias_init, {filters}, input.dtype()).requires_grad_());
  impl->shape = detail::shape_by_rule(*impl, {input});
  return impl;
}

struct ConvTImpl final : KindBase<ConvTImpl, ConvTransposeAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override { return "Conv2DTranspose"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    const ConvTransposeAttributes& a = attrs;
    return conv2d_transpose(in[0], state->param("weights"), a.bias ? state->param("bias") : Tensor(), a.stride, a.padding,
                            a.output_padding, a.groups, a.dilation);
  }
  // (N, C, H, W) -> (N, filters, (H - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1, ...)
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    const ConvTransposeAttributes& a = attrs;
    const Shape& x = in.at(0);
    if (x.size() != 4) throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(x) + " (valid: (batch, channels, height, width))");
    const int64_t cin = state->param("weights").shape()[0];
    if (x[1] >= 0 && x[1] != cin)
      throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(x) + " has " + std::to_string(x[1]) +
                       " channels; its weights take " + std::to_string(cin));
    Shape out{x[0], a.filters};
    for (size_t i = 0; i < 2; ++i) {
      const int64_t extent = x[2 + i];
      if (extent < 0) {
        out.push_back(-1);
        continue;
      }
      const __int128 s = static_cast<__int128>(extent - 1) * a.stride[i] - 2 * static_cast<__int128>(a.padding[i]) +
                         static_cast<__int128>(a.dilation[i]) * (a.kernel_size[i] - 1) + a.output_padding[i] + 1;
      if (s <= 0 || s > kMaxExtent * kMaxExtent)
        throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(x) + " gives an output extent of " +
                         (s <= 0 ? "zero or less" : "more than 2^62") + " with this stride, padding and kernel");
      out.push_back(static_cast<int64_t>(s));
    }
    return {out};
  }
};

}  // namespace

std::vector<std::pair<int64_t, int64_t>> conv_padding(const ConvAttributes& a) {
  // the ops' rule (loom/ops/conv.h), the one conv1d and conv2d resolve their padding by
  return loom::conv_padding(a.kernel_size.size() == 1 ? "Conv1D" : "Conv2D", a.padding, a.kernel_size, a.dilation, a.stride);
}

Conv1D::Conv1D(const Layer& input, int64_t filters, int64_t k, ConvOptions o, const std::string& name)
    : Layer(make_conv(1, input, filters, k, o, name)) {}
Conv2D::Conv2D(const Layer& input, int64_t filters, IntList k, ConvOptions o, const std::string& name)
    : Layer(make_conv(2, input, filters, k, o, name)) {}

Conv2DTranspose::Conv2DTranspose(const Layer& input, int64_t filters, IntList ks, ConvTransposeOptions o, const std::string& name) {
  const char* kind = "Conv2DTranspose";
  require_rank(input, 4, kind, "(batch, channels, height, width)");
  auto impl = std::make_shared<ConvTImpl>();
  ConvTransposeAttributes& a = impl->attrs;
  a.filters = filters;
  a.groups = o.groups;
  a.bias = o.bias;
  a.kernel_size = per_axis(ks, 2, {}, "kernel_size", kind, 1);
  a.stride = per_axis(o.stride, 2, {1, 1}, "stride", kind, 1);
  a.padding = per_axis(o.padding, 2, {0, 0}, "padding", kind, 0);
  a.output_padding = per_axis(o.output_padding, 2, {0, 0}, "output_padding", kind, 0);
  a.dilation = per_axis(o.dilation, 2, {1, 1}, "dilation", kind, 1);
  const int64_t cin = input.shape()[1];
  if (filters <= 0 || o.groups <= 0 || cin % o.groups != 0 || filters % o.groups != 0)
    throw ValueError(std::string(kind) + ": " + std::to_string(cin) + " input channels and " + std::to_string(filters) +
                     " filters must both be positive multiples of groups=" + std::to_string(o.groups));
  impl->inputs = {input};
  impl->dtype = input.dtype();
  impl->name = unique_name("conv2d_transpose", name);
  impl->state->add_param("weights", initialize(o.weight_init, {cin, filters / o.groups, a.kernel_size[0], a.kernel_size[1]}, input.dtype()).requires_grad_());
  if (o.bias) impl->state->add_param("bias", initialize(Init::zeros(), {filters}, input.dtype()).requires_grad_());
  impl->shape = detail::shape_by_rule(*impl, {input});
  static_cast<Layer&>(*this) = Layer(impl);
}

// the forms without input (bound by their first call; nn/registry.h unbound_layer)
Conv1D::Conv1D(int64_t f, int64_t k, ConvOptions o, const std::string& name)
    : Layer(unbound_layer("Conv1D", [f, k, o](const LayerSpec& s) -> Layer { return Conv1D(s.input(), f, k, o, s.name); }, name)) {}
Conv2D::Conv2D(int64_t f, IntList k, ConvOptions o, const std::string& name)
    : Layer(unbound_layer("Conv2D", [f, k, o](const LayerSpec& s) -> Layer { return Conv2D(s.input(), f, k, o, s.name); }, name)) {}

namespace {

Layer make_conv_layer(const LayerSpec& s, bool one_d) {
  const auto a = read_attributes<ConvAttributes>(s.options);
  ConvOptions o;
  o.stride = a.stride;
  o.dilation = a.dilation;
  o.padding = a.padding;
  o.groups = a.groups;
  o.bias = a.bias;
  if (!one_d) return Conv2D(s.input(), a.filters, IntList(a.kernel_size), o, s.name);
  if (a.kernel_size.size() != 1)
    s.options.fail("field 'kernel_size' has " + std::to_string(a.kernel_size.size()) + " values (valid: 1 for Conv1D)");
  return Conv1D(s.input(), a.filters, a.kernel_size[0], o, s.name);
}

}  // namespace

void detail::register_conv_layers(AddKind add) {
  add("Conv1D", [](const LayerSpec& s) { return make_conv_layer(s, true); }, {write_attributes(ConvAttributes{})});
  add("Conv2D", [](const LayerSpec& s) { return make_conv_layer(s, false); }, {write_attributes(ConvAttributes{})});
  add("Conv2DTranspose", [](const LayerSpec& s) -> Layer {
    const auto a = read_attributes<ConvTransposeAttributes>(s.options);
    ConvTransposeOptions o;
    o.stride = a.stride;
    o.padding = a.padding;
    o.output_padding = a.output_padding;
    o.dilation = a.dilation;
    o.groups = a.groups;
    o.bias = a.bias;
    return Conv2DTranspose(s.input(), a.filters, a.kernel_size, o, s.name);
  }, {write_attributes(ConvTransposeAttributes{})});
}

}  // namespace loom::nn
