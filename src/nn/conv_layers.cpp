#include "loom/nn/conv_layers.h"

#include "loom/autograd/autograd.h"
#include "loom/nn/replicas.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/normalization.h"
#include "loom/ops/pooling.h"
#include "loom/ops/reduction.h"
#include "nn/register_kinds.h"
#include "ops/batch_norm_reduced.h"

namespace loom::nn {

namespace {

std::string ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// Sizes above this are refused: no window is that large, and the output-size arithmetic
// below then cannot overflow.
constexpr int64_t kMaxExtent = int64_t{1} << 31;

// One value per spatial axis from an IntList (a single value repeats; empty gives `dflt`, and
// an empty `dflt` means the value is required), each in [min_value, kMaxExtent].
std::vector<int64_t> per_axis(const IntList& l, size_t n, const std::vector<int64_t>& dflt, const char* what, const char* kind,
                              int64_t min_value) {
  const auto& v = l.values();
  std::vector<int64_t> r;
  if (v.empty()) r = dflt;
  else if (v.size() == 1) r.assign(n, v[0]);
  else if (v.size() == n) r = v;
  if (r.size() != n)
    throw ValueError(std::string(kind) + ": " + what + " " + ints(v) + " must give 1 or " + std::to_string(n) + " values");
  for (int64_t x : r)
    if (x < min_value || x > kMaxExtent)
      throw ValueError(std::string(kind) + ": " + what + " " + ints(v) + " is invalid (valid: values in [" + std::to_string(min_value) +
                       ", 2^31])");
  return r;
}

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

void require_rank(const Layer& in, size_t rank, const char* kind, const char* layout) {
  if (!in.defined()) throw ValueError(std::string(kind) + ": the input layer is undefined");
  if (in.shape().size() != rank)
    throw ShapeError(std::string(kind) + ": input '" + in.name() + "' has shape " + shape_str(in.shape()) + " (valid: " + layout + ")");
  if (in.shape()[1] <= 0)
    throw ShapeError(std::string(kind) + ": input '" + in.name() + "' must have a known channel count on axis 1, got " + shape_str(in.shape()));
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

struct PoolImpl final : LayerBase<PoolImpl> {
  bool pure() const override { return true; }
  bool max = true;
  std::vector<int64_t> kernel, stride, padding;
  bool ceil_mode = false;
  const char* kind() const override { return max ? "MaxPool2D" : "AvgPool2D"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    return max ? max_pool2d(in[0], kernel, stride, padding, 1, ceil_mode) : avg_pool2d(in[0], kernel, stride, padding, ceil_mode);
  }
  Options options() const override {
    return Options().set_ints("kernel_size", kernel).set_ints("stride", stride).set_ints("padding", padding).set_bool("ceil_mode", ceil_mode);
  }
};

std::shared_ptr<PoolImpl> make_pool(bool max, const Layer& input, const IntList& ks, const PoolOptions& o, const std::string& name) {
  const char* kind = max ? "MaxPool2D" : "AvgPool2D";
  require_rank(input, 4, kind, "(batch, channels, height, width)");
  auto impl = std::make_shared<PoolImpl>();
  impl->max = max;
  impl->kernel = per_axis(ks, 2, {}, "kernel_size", kind, 1);
  impl->stride = per_axis(o.stride, 2, impl->kernel, "stride", kind, 1);
  impl->padding = per_axis(o.padding, 2, {0, 0}, "padding", kind, 0);
  for (size_t i = 0; i < 2; ++i)
    if (impl->padding[i] > impl->kernel[i] / 2)
      throw ValueError(std::string(kind) + ": padding " + ints(impl->padding) + " must be at most half of kernel_size " + ints(impl->kernel));
  impl->ceil_mode = o.ceil_mode;
  Shape out{input.shape()[0], input.shape()[1]};
  for (size_t i = 0; i < 2; ++i) {
    const int64_t in = input.shape()[2 + i];
    if (in < 0) {
      out.push_back(-1);
      continue;
    }
    // the ops' rule (max_pool2d / avg_pool2d compute the same)
    const int64_t s = pool_output_size(in, impl->kernel[i], impl->stride[i], impl->padding[i], 1, o.ceil_mode);
    if (s <= 0) throw ShapeError(std::string(kind) + ": input '" + input.name() + "' of shape " + shape_str(input.shape()) + " is smaller than the window");
    out.push_back(s);
  }
  impl->inputs = {input};
  impl->shape = out;
  impl->dtype = input.dtype();
  impl->name = unique_name(max ? "max_pool" : "avg_pool", name);
  return impl;
}

struct GlobalPoolImpl final : LayerBase<GlobalPoolImpl> {
  bool pure() const override { return true; }
  bool max = false;
  const char* kind() const override { return "GlobalPool"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    Axes spatial;
    for (int64_t a = 2; a < in[0].ndim(); ++a) spatial.push_back(a);
    return max ? loom::max(in[0], spatial) : mean(in[0], spatial);
  }
  Options options() const override { return Options().set_string("mode", max ? "max" : "avg"); }
};

// Batch norm in Train mode with the statistics of the whole batch across the replicas: the
// per-channel sums of x and x^2 and the count, summed over the replicas in one collective
// (float64: E[x^2] - E[x]^2 loses too much in float32), then batch_norm's formula; the backward
// sums the gradient's per-channel sums in one more, as PyTorch's SyncBatchNorm. Fused kernels
// where they apply; otherwise composed of differentiable ops, gradients flowing through
// replica_sum.
Tensor sync_batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& w, const Tensor& b,
                       double momentum, double eps) {
  if (loom::detail::batch_norm_reduced_fused(x, w, b)) {
    // the fused kernels: one pass for the local sums, one collective, one pass for the output;
    // backward likewise
    ReplicaGroup* group = replica_group();
    return loom::detail::batch_norm_reduced(x, running_mean, running_var, w, b, momentum, eps,
                                      [group](Tensor& t) { group->sum(t); });
  }
  const int64_t C = x.shape()[1];
  Axes axes{0};
  for (int64_t i = 2; i < x.ndim(); ++i) axes.push_back(i);
  Shape bshape(static_cast<size_t>(x.ndim()), 1);
  bshape[1] = C;
  const Tensor x64 = astype(x, DType::Float64);
  const Tensor local = concatenate({sum(x64, axes), sum(multiply(x64, x64), axes),
                                    full({1}, static_cast<double>(C ? x.numel() / C : 0), DType::Float64, x.device())}, 0);
  const Tensor total = replica_sum(local);
  const double n = slice(total, 0, 2 * C, 2 * C + 1).item<double>();
  if (n <= 1)
    throw ValueError("BatchNorm (synchronized): expected more than 1 value per channel across the replicas when training, got " +
                     std::to_string(static_cast<int64_t>(n)) + " for input " + shape_str(x.shape()));
  const Tensor mean = slice(total, 0, 0, C) / n;
  const Tensor var = maximum(slice(total, 0, C, 2 * C) / n - multiply(mean, mean), 0.0);
  loom::detail::update_running_stats(running_mean, running_var, mean.detach(), var.detach(), momentum, n);
  Tensor y = multiply(subtract(x, reshape(astype(mean, x.dtype()), bshape)), rsqrt(reshape(astype(var, x.dtype()), bshape) + eps));
  if (w.defined()) y = multiply(y, reshape(w, bshape));
  if (b.defined()) y = add(y, reshape(b, bshape));
  return y;
}

struct BatchNormImpl final : LayerBase<BatchNormImpl> {
  BatchNormOptions opt;
  const char* kind() const override { return "BatchNorm"; }
  Tensor compute(const std::vector<Tensor>& in, Mode mode) override {
    Tensor w = opt.affine ? state->param("weight") : Tensor(), b = opt.affine ? state->param("bias") : Tensor();
    const ReplicaGroup* group = replica_group();
    if (opt.sync && mode == Mode::Train && group && group->size() > 1)
      return sync_batch_norm(in[0], state->buffer("running_mean"), state->buffer("running_var"), w, b, opt.momentum, opt.eps);
    return batch_norm(in[0], state->buffer("running_mean"), state->buffer("running_var"), w, b, mode == Mode::Train,
                      opt.momentum, opt.eps);
  }
  Options options() const override {
    return Options().set_float("momentum", opt.momentum).set_float("eps", opt.eps).set_bool("affine", opt.affine).set_bool("sync", opt.sync);
  }
};

struct LayerNormImpl final : LayerBase<LayerNormImpl> {
  bool pure() const override { return true; }
  double eps = 1e-5;
  const char* kind() const override { return "LayerNorm"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    return layer_norm(in[0], {in[0].shape().back()}, state->param("weight"), state->param("bias"), eps);
  }
  Options options() const override { return Options().set_float("eps", eps); }
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

MaxPool2D::MaxPool2D(const Layer& input, IntList k, PoolOptions o, const std::string& name) : Layer(make_pool(true, input, k, o, name)) {}
AvgPool2D::AvgPool2D(const Layer& input, IntList k, PoolOptions o, const std::string& name) : Layer(make_pool(false, input, k, o, name)) {}

// the forms without input (bound by their first call; nn/registry.h unbound_layer)
Conv1D::Conv1D(int64_t f, int64_t k, ConvOptions o, const std::string& name)
    : Layer(unbound_layer("Conv1D", [f, k, o](const LayerSpec& s) -> Layer { return Conv1D(s.input(), f, k, o, s.name); }, name)) {}
Conv2D::Conv2D(int64_t f, IntList k, ConvOptions o, const std::string& name)
    : Layer(unbound_layer("Conv2D", [f, k, o](const LayerSpec& s) -> Layer { return Conv2D(s.input(), f, k, o, s.name); }, name)) {}
MaxPool2D::MaxPool2D(IntList k, PoolOptions o, const std::string& name)
    : Layer(unbound_layer("MaxPool2D", [k, o](const LayerSpec& s) -> Layer { return MaxPool2D(s.input(), k, o, s.name); }, name)) {}
AvgPool2D::AvgPool2D(IntList k, PoolOptions o, const std::string& name)
    : Layer(unbound_layer("AvgPool2D", [k, o](const LayerSpec& s) -> Layer { return AvgPool2D(s.input(), k, o, s.name); }, name)) {}
GlobalPool::GlobalPool(Mode mode, const std::string& name)
    : Layer(unbound_layer("GlobalPool", [mode](const LayerSpec& s) -> Layer { return GlobalPool(s.input(), mode, s.name); }, name)) {}
BatchNorm::BatchNorm(BatchNormOptions o, const std::string& name)
    : Layer(unbound_layer("BatchNorm", [o](const LayerSpec& s) -> Layer { return BatchNorm(s.input(), o, s.name); }, name)) {}
LayerNorm::LayerNorm(double eps, const std::string& name)
    : Layer(unbound_layer("LayerNorm", [eps](const LayerSpec& s) -> Layer { return LayerNorm(s.input(), eps, s.name); }, name)) {}

GlobalPool::GlobalPool(const Layer& input, Mode mode, const std::string& name) {
  if (!input.defined()) throw ValueError("GlobalPool: the input layer is undefined");
  if (input.shape().size() < 3)
    throw ShapeError("GlobalPool: input '" + input.name() + "' has shape " + shape_str(input.shape()) + " (valid: (batch, channels, spatial...))");
  auto impl = std::make_shared<GlobalPoolImpl>();
  impl->max = mode == Mode::Max;
  impl->inputs = {input};
  impl->shape = {input.shape()[0], input.shape()[1]};
  impl->dtype = input.dtype();
  impl->name = unique_name("global_pool", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

BatchNorm::BatchNorm(const Layer& input, BatchNormOptions o, const std::string& name) {
  if (!input.defined()) throw ValueError("BatchNorm: the input layer is undefined");
  if (input.shape().size() < 2 || input.shape()[1] <= 0)
    throw ShapeError("BatchNorm: input '" + input.name() + "' has shape " + shape_str(input.shape()) + " (valid: (batch, channels, ...))");
  const int64_t c = input.shape()[1];
  auto impl = std::make_shared<BatchNormImpl>();
  impl->opt = o;
  impl->inputs = {input};
  impl->shape = input.shape();
  impl->dtype = input.dtype();
  impl->name = unique_name("batch_norm", name);
  if (o.affine) {
    impl->state->add_param("weight", initialize(Init::ones(), {c}, input.dtype()).requires_grad_());
    impl->state->add_param("bias", initialize(Init::zeros(), {c}, input.dtype()).requires_grad_());
  }
  impl->state->add_buffer("running_mean", initialize(Init::zeros(), {c}, input.dtype()));
  impl->state->add_buffer("running_var", initialize(Init::ones(), {c}, input.dtype()));
  static_cast<Layer&>(*this) = Layer(impl);
}

int64_t sync_batch_norm(const std::vector<Layer>& layers, bool sync) {
  int64_t n = 0;
  for (const Layer& l : layers)
    if (auto* bn = dynamic_cast<BatchNormImpl*>(l.impl().get())) {
      bn->opt.sync = sync;
      ++n;
    }
  return n;
}

LayerNorm::LayerNorm(const Layer& input, double eps, const std::string& name) {
  if (!input.defined()) throw ValueError("LayerNorm: the input layer is undefined");
  const int64_t n = input.n_units();
  if (n <= 0) throw ShapeError("LayerNorm: input '" + input.name() + "' must have a known last axis, got " + shape_str(input.shape()));
  auto impl = std::make_shared<LayerNormImpl>();
  impl->eps = eps;
  impl->inputs = {input};
  impl->shape = input.shape();
  impl->dtype = input.dtype();
  impl->name = unique_name("layer_norm", name);
  impl->state->add_param("weight", initialize(Init::ones(), {n}, input.dtype()).requires_grad_());
  impl->state->add_param("bias", initialize(Init::zeros(), {n}, input.dtype()).requires_grad_());
  static_cast<Layer&>(*this) = Layer(impl);
}

namespace {
constexpr int64_t kMaxSize = int64_t{1} << 40;  // sizes read from a file

IntList ints_option(const Options& o, const char* key, int64_t lo) { return IntList(o.get_ints(key, lo, kMaxSize)); }

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

Layer make_pool_layer(const LayerSpec& s, bool max) {
  PoolOptions o;
  o.stride = ints_option(s.options, "stride", 1);
  o.padding = ints_option(s.options, "padding", 0);
  o.ceil_mode = s.options.get_bool("ceil_mode");
  const IntList k = ints_option(s.options, "kernel_size", 1);
  if (max) return MaxPool2D(s.input(), k, o, s.name);
  return AvgPool2D(s.input(), k, o, s.name);
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
  add("MaxPool2D", [](const LayerSpec& s) { return make_pool_layer(s, true); });
  add("AvgPool2D", [](const LayerSpec& s) { return make_pool_layer(s, false); });
  add("GlobalPool", [](const LayerSpec& s) -> Layer {
    const std::string mode = s.options.get_string("mode");
    if (mode != "max" && mode != "avg") s.options.fail("has the mode '" + mode + "' (valid: \"max\", \"avg\")");
    return GlobalPool(s.input(), mode == "max" ? GlobalPool::Mode::Max : GlobalPool::Mode::Avg, s.name);
  });
  add("BatchNorm", [](const LayerSpec& s) -> Layer {
    // "sync" is optional: files written before synchronized batch norm lack it
    const bool sync = s.options.has("sync") && s.options.get_bool("sync");
    return BatchNorm(s.input(), {s.options.get_float("momentum"), s.options.get_float("eps"), s.options.get_bool("affine"), sync}, s.name);
  });
  add("LayerNorm", [](const LayerSpec& s) -> Layer { return LayerNorm(s.input(), s.options.get_float("eps"), s.name); });
}

}  // namespace loom::nn
