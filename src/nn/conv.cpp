#include "loom/nn/conv.h"

#include "nn/kind_util.h"
#include "nn/register_kinds.h"

namespace loom::nn {

using detail::ints;
using detail::ints_option;
using detail::kMaxExtent;
using detail::kMaxSize;
using detail::per_axis;
using detail::require_rank;

namespace {

// (before, after) zero padding per spatial axis.
std::vector<std::pair<int64_t, int64_t>> pads(const ConvPadding& p, const std::vector<int64_t>& k, const std::vector<int64_t>& dil,
                                              const std::vector<int64_t>& stride, const char* kind) {
  const size_t n = k.size();
  std::vector<std::pair<int64_t, int64_t>> out(n, {0, 0});
  if (p.mode() == "valid") return out;
  if (p.mode() == "same") {
    for (size_t i = 0; i < n; ++i) {
      if (stride[i] != 1) throw ValueError(std::string(kind) + ": padding \"same\" needs stride 1");
      const int64_t total = checked_mul(dil[i], k[i] - 1, kind);
      out[i] = {total / 2, total - total / 2};
    }
    return out;
  }
  if (!p.mode().empty()) throw ValueError(std::string(kind) + ": unknown padding \"" + p.mode() + "\" (valid: \"same\", \"valid\", integers)");
  const auto& v = p.values();
  for (int64_t x : v)
    if (x < 0 || x > kMaxExtent)
      throw ValueError(std::string(kind) + ": padding " + ints(v) + " is invalid (valid: values in [0, 2^31])");
  if (v.size() == 1) return std::vector<std::pair<int64_t, int64_t>>(n, {v[0], v[0]});
  if (v.size() == n) {
    for (size_t i = 0; i < n; ++i) out[i] = {v[i], v[i]};
    return out;
  }
  if (v.size() == 2 * n) {
    for (size_t i = 0; i < n; ++i) out[i] = {v[2 * i], v[2 * i + 1]};
    return out;
  }
  throw ValueError(std::string(kind) + ": padding " + ints(v) + " must give 1, " + std::to_string(n) + " or " + std::to_string(2 * n) + " values");
}

// Output extent (the ops' rule, conv_output_size), -1 for an unknown input extent; 0 when the
// window does not fit.
int64_t conv_out(int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t before, int64_t after) {
  return in < 0 ? -1 : conv_output_size(in, k, stride, before, after, dil);
}

struct ConvImpl final : LayerBase<ConvImpl> {
  bool pure() const override { return true; }
  size_t dims = 2;
  int64_t filters = 0;
  std::vector<int64_t> kernel, stride, dilation;
  ConvPadding padding = 0;
  int64_t groups = 1;
  bool bias = true;
  const char* kind() const override { return dims == 1 ? "Conv1D" : "Conv2D"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    Tensor b = bias ? state->param("bias") : Tensor();
    if (dims == 1) return conv1d(in[0], state->param("weights"), b, stride, padding, dilation, groups);
    return conv2d(in[0], state->param("weights"), b, stride, padding, dilation, groups);
  }
  Options options() const override {
    Options o;
    o.set_int("filters", filters).set_ints("kernel_size", kernel).set_ints("stride", stride);
    if (padding.mode().empty()) o.set_ints("padding", padding.values());
    else o.set_string("padding", padding.mode());
    return o.set_ints("dilation", dilation).set_int("groups", groups).set_bool("bias", bias);
  }
};

std::shared_ptr<ConvImpl> make_conv(size_t dims, const Layer& input, int64_t filters, const IntList& ks, const ConvOptions& o,
                                    const std::string& name) {
  const char* kind = dims == 1 ? "Conv1D" : "Conv2D";
  require_rank(input, dims + 2, kind, dims == 1 ? "(batch, channels, length)" : "(batch, channels, height, width)");
  auto impl = std::make_shared<ConvImpl>();
  impl->dims = dims;
  impl->filters = filters;
  impl->kernel = per_axis(ks, dims, {}, "kernel_size", kind, 1);
  impl->stride = per_axis(o.stride, dims, std::vector<int64_t>(dims, 1), "stride", kind, 1);
  impl->dilation = per_axis(o.dilation, dims, std::vector<int64_t>(dims, 1), "dilation", kind, 1);
  impl->padding = o.padding;
  impl->groups = o.groups;
  impl->bias = o.bias;
  const int64_t cin = input.shape()[1];
  if (filters <= 0 || o.groups <= 0 || cin % o.groups != 0 || filters % o.groups != 0)
    throw ValueError(std::string(kind) + ": " + std::to_string(cin) + " input channels and " + std::to_string(filters) +
                     " filters must both be positive multiples of groups=" + std::to_string(o.groups));
  const auto p = pads(o.padding, impl->kernel, impl->dilation, impl->stride, kind);
  Shape out{input.shape()[0], filters};
  for (size_t i = 0; i < dims; ++i) {
    const int64_t s = conv_out(input.shape()[2 + i], impl->kernel[i], impl->stride[i], impl->dilation[i], p[i].first, p[i].second);
    if (input.shape()[2 + i] >= 0 && s <= 0)
      throw ShapeError(std::string(kind) + ": input '" + input.name() + "' of shape " + shape_str(input.shape()) +
                       " is too small for kernel " + ints(impl->kernel) + " with this padding and dilation");
    out.push_back(s);
  }
  impl->inputs = {input};
  impl->shape = out;
  impl->dtype = input.dtype();
  impl->name = unique_name(dims == 1 ? "conv1d" : "conv2d", name);
  Shape ws{filters, cin / o.groups};
  ws.insert(ws.end(), impl->kernel.begin(), impl->kernel.end());
  impl->state->add_param("weights", initialize(o.weight_init, ws, input.dtype()).requires_grad_());
  if (o.bias) impl->state->add_param("bias", initialize(o.bias_init, {filters}, input.dtype()).requires_grad_());
  return impl;
}

struct ConvTImpl final : LayerBase<ConvTImpl> {
  bool pure() const override { return true; }
  int64_t filters = 0, groups = 1;
  std::vector<int64_t> kernel, stride, padding, output_padding, dilation;
  bool bias = true;
  const char* kind() const override { return "Conv2DTranspose"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    return conv2d_transpose(in[0], state->param("weights"), bias ? state->param("bias") : Tensor(), stride, padding,
                            output_padding, groups, dilation);
  }
  Options options() const override {
    return Options()
        .set_int("filters", filters)
        .set_ints("kernel_size", kernel)
        .set_ints("stride", stride)
        .set_ints("padding", padding)
        .set_ints("output_padding", output_padding)
        .set_ints("dilation", dilation)
        .set_int("groups", groups)
        .set_bool("bias", bias);
  }
};

}  // namespace

Conv1D::Conv1D(const Layer& input, int64_t filters, int64_t k, ConvOptions o, const std::string& name)
    : Layer(make_conv(1, input, filters, k, o, name)) {}
Conv2D::Conv2D(const Layer& input, int64_t filters, IntList k, ConvOptions o, const std::string& name)
    : Layer(make_conv(2, input, filters, k, o, name)) {}

Conv2DTranspose::Conv2DTranspose(const Layer& input, int64_t filters, IntList ks, ConvTransposeOptions o, const std::string& name) {
  const char* kind = "Conv2DTranspose";
  require_rank(input, 4, kind, "(batch, channels, height, width)");
  auto impl = std::make_shared<ConvTImpl>();
  impl->filters = filters;
  impl->groups = o.groups;
  impl->bias = o.bias;
  impl->kernel = per_axis(ks, 2, {}, "kernel_size", kind, 1);
  impl->stride = per_axis(o.stride, 2, {1, 1}, "stride", kind, 1);
  impl->padding = per_axis(o.padding, 2, {0, 0}, "padding", kind, 0);
  impl->output_padding = per_axis(o.output_padding, 2, {0, 0}, "output_padding", kind, 0);
  impl->dilation = per_axis(o.dilation, 2, {1, 1}, "dilation", kind, 1);
  const int64_t cin = input.shape()[1];
  if (filters <= 0 || o.groups <= 0 || cin % o.groups != 0 || filters % o.groups != 0)
    throw ValueError(std::string(kind) + ": " + std::to_string(cin) + " input channels and " + std::to_string(filters) +
                     " filters must both be positive multiples of groups=" + std::to_string(o.groups));
  Shape out{input.shape()[0], filters};
  for (size_t i = 0; i < 2; ++i) {
    const int64_t in = input.shape()[2 + i];
    if (in < 0) {
      out.push_back(-1);
      continue;
    }
    const __int128 s = static_cast<__int128>(in - 1) * impl->stride[i] - 2 * static_cast<__int128>(impl->padding[i]) +
                       static_cast<__int128>(impl->dilation[i]) * (impl->kernel[i] - 1) + impl->output_padding[i] + 1;
    if (s <= 0 || s > kMaxExtent * kMaxExtent)
      throw ShapeError(std::string(kind) + ": input '" + input.name() + "' of shape " + shape_str(input.shape()) +
                       " gives an output extent of " + (s <= 0 ? "zero or less" : "more than 2^62") + " with this stride, padding and kernel");
    out.push_back(static_cast<int64_t>(s));
  }
  impl->inputs = {input};
  impl->shape = out;
  impl->dtype = input.dtype();
  impl->name = unique_name("conv2d_transpose", name);
  impl->state->add_param("weights", initialize(o.weight_init, {cin, filters / o.groups, impl->kernel[0], impl->kernel[1]}, input.dtype()).requires_grad_());
  if (o.bias) impl->state->add_param("bias", initialize(Init::zeros(), {filters}, input.dtype()).requires_grad_());
  static_cast<Layer&>(*this) = Layer(impl);
}

// the forms without input (bound by their first call; nn/registry.h unbound_layer)
Conv1D::Conv1D(int64_t f, int64_t k, ConvOptions o, const std::string& name)
    : Layer(unbound_layer("Conv1D", [f, k, o](const LayerSpec& s) -> Layer { return Conv1D(s.input(), f, k, o, s.name); }, name)) {}
Conv2D::Conv2D(int64_t f, IntList k, ConvOptions o, const std::string& name)
    : Layer(unbound_layer("Conv2D", [f, k, o](const LayerSpec& s) -> Layer { return Conv2D(s.input(), f, k, o, s.name); }, name)) {}

namespace {

Layer make_conv_layer(const LayerSpec& s, bool one_d) {
  const Options& opt = s.options;
  ConvOptions o;
  o.stride = ints_option(opt, "stride", 1);
  o.dilation = ints_option(opt, "dilation", 1);
  if (opt.is_string("padding")) o.padding = ConvPadding(opt.get_string("padding"));
  else o.padding = ConvPadding(opt.get_ints("padding", 0, kMaxSize));
  o.groups = opt.get_int("groups", 1, kMaxSize);
  o.bias = opt.get_bool("bias");
  const auto k = opt.get_ints("kernel_size", 1, kMaxSize);
  const int64_t filters = opt.get_int("filters", 1, kMaxSize);
  if (!one_d) return Conv2D(s.input(), filters, IntList(k), o, s.name);
  if (k.size() != 1) opt.fail("field 'kernel_size' has " + std::to_string(k.size()) + " values (valid: 1 for Conv1D)");
  return Conv1D(s.input(), filters, k[0], o, s.name);
}

}  // namespace

void detail::register_conv_layers(AddKind add) {
  add("Conv1D", [](const LayerSpec& s) { return make_conv_layer(s, true); });
  add("Conv2D", [](const LayerSpec& s) { return make_conv_layer(s, false); });
  add("Conv2DTranspose", [](const LayerSpec& s) -> Layer {
    ConvTransposeOptions o;
    o.stride = ints_option(s.options, "stride", 1);
    o.padding = ints_option(s.options, "padding", 0);
    o.output_padding = ints_option(s.options, "output_padding", 0);
    o.dilation = ints_option(s.options, "dilation", 1);
    o.groups = s.options.get_int("groups", 1, kMaxSize);
    o.bias = s.options.get_bool("bias");
    return Conv2DTranspose(s.input(), s.options.get_int("filters", 1, kMaxSize), ints_option(s.options, "kernel_size", 1), o, s.name);
  });
}

}  // namespace loom::nn
