#include "loom/nn/pooling.h"

#include <vector>

#include "nn/kind_util.h"
#include "nn/register_kinds.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/pooling.h"
#include "loom/ops/reduction.h"

namespace loom::nn {

using detail::ints;
using detail::per_axis;
using detail::require_rank;

namespace {

struct PoolImpl final : KindBase<PoolImpl, PoolAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override { return attrs.max ? "MaxPool2D" : "AvgPool2D"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    const PoolAttributes& a = attrs;
    return a.max ? max_pool2d(in[0], a.kernel_size, a.stride, a.padding, 1, a.ceil_mode)
                 : avg_pool2d(in[0], a.kernel_size, a.stride, a.padding, a.ceil_mode);
  }
  // (N, C, H, W) -> (N, C, H', W') by pool_output_size (max_pool2d / avg_pool2d compute the same)
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    const PoolAttributes& a = attrs;
    const Shape& x = in.at(0);
    if (x.size() != 4) throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(x) + " (valid: (batch, channels, height, width))");
    Shape out{x[0], x[1]};
    for (size_t i = 0; i < 2; ++i) {
      if (x[2 + i] < 0) {
        out.push_back(-1);
        continue;
      }
      const int64_t s = pool_output_size(x[2 + i], a.kernel_size[i], a.stride[i], a.padding[i], 1, a.ceil_mode);
      if (s <= 0) throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(x) + " is smaller than the window");
      out.push_back(s);
    }
    return {out};
  }
};

std::shared_ptr<PoolImpl> make_pool(bool max, const Layer& input, const IntList& ks, const PoolOptions& o, const std::string& name) {
  const char* kind = max ? "MaxPool2D" : "AvgPool2D";
  require_rank(input, 4, kind, "(batch, channels, height, width)");
  auto impl = std::make_shared<PoolImpl>();
  PoolAttributes& a = impl->attrs;
  a.max = max;
  a.kernel_size = per_axis(ks, 2, {}, "kernel_size", kind, 1);
  a.stride = per_axis(o.stride, 2, a.kernel_size, "stride", kind, 1);
  a.padding = per_axis(o.padding, 2, {0, 0}, "padding", kind, 0);
  for (size_t i = 0; i < 2; ++i)
    if (a.padding[i] > a.kernel_size[i] / 2)
      throw ValueError(std::string(kind) + ": padding " + ints(a.padding) + " must be at most half of kernel_size " + ints(a.kernel_size));
  a.ceil_mode = o.ceil_mode;
  impl->inputs = {input};
  impl->dtype = input.dtype();
  impl->name = unique_name(max ? "max_pool" : "avg_pool", name);
  impl->shape = detail::shape_by_rule(*impl, {input});
  return impl;
}

struct GlobalPoolImpl final : LayerBase<GlobalPoolImpl> {
  bool pure() const override { return true; }
  GlobalPoolAttributes attrs;
  const void* attributes(const std::type_info& type) const override { return type == typeid(GlobalPoolAttributes) ? &attrs : nullptr; }
  const char* kind() const override { return "GlobalPool"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    Axes spatial;
    for (int64_t a = 2; a < in[0].ndim(); ++a) spatial.push_back(a);
    return attrs.max ? loom::max(in[0], spatial) : mean(in[0], spatial);
  }
  // its attribute is an enum the field list has no type for: written as "max" / "avg" here
  Options options() const override { return Options().set_string("mode", attrs.max ? "max" : "avg"); }
  // (N, C, spatial...) -> (N, C)
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    const Shape& x = in.at(0);
    if (x.size() < 3) throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(x) + " (valid: (batch, channels, spatial...))");
    return {{x[0], x[1]}};
  }
};

// ---------------------------------------------------------------- adaptive average pooling
std::vector<int64_t> out_hw(const IntList& size, const char* where) {
  const auto& v = size.values();
  std::vector<int64_t> hw;
  if (v.size() == 1) hw = {v[0], v[0]};
  else if (v.size() == 2) hw = v;
  else throw ValueError(std::string(where) + ": output_size must give 1 or 2 values, got " + std::to_string(v.size()));
  if (hw[0] <= 0 || hw[1] <= 0)
    throw ValueError(std::string(where) + ": output_size must be positive, got (" + std::to_string(hw[0]) + ", " +
                     std::to_string(hw[1]) + ")");
  return hw;
}

struct AdaptiveAvgPoolImpl final : KindBase<AdaptiveAvgPoolImpl, AdaptiveAvgPoolAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override { return "AdaptiveAvgPool2D"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override { return adaptive_avg_pool2d(in[0], IntList(attrs.output_size)); }
  // (N, C, H, W) -> (N, C, oh, ow); a known H or W must not be empty
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    const Shape& x = in.at(0);
    if (x.size() != 4) throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(x) + " (valid: (batch, channels, height, width))");
    if (x[2] == 0 || x[3] == 0) throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(x) + " has an empty plane");
    return {Shape{x[0], x[1], attrs.output_size[0], attrs.output_size[1]}};
  }
};

}  // namespace

MaxPool2D::MaxPool2D(const Layer& input, IntList k, PoolOptions o, const std::string& name) : Layer(make_pool(true, input, k, o, name)) {}
AvgPool2D::AvgPool2D(const Layer& input, IntList k, PoolOptions o, const std::string& name) : Layer(make_pool(false, input, k, o, name)) {}

// the forms without input (bound by their first call; nn/registry.h unbound_layer)
MaxPool2D::MaxPool2D(IntList k, PoolOptions o, const std::string& name)
    : Layer(unbound_layer("MaxPool2D", [k, o](const LayerSpec& s) -> Layer { return MaxPool2D(s.input(), k, o, s.name); }, name)) {}
AvgPool2D::AvgPool2D(IntList k, PoolOptions o, const std::string& name)
    : Layer(unbound_layer("AvgPool2D", [k, o](const LayerSpec& s) -> Layer { return AvgPool2D(s.input(), k, o, s.name); }, name)) {}
GlobalPool::GlobalPool(Mode mode, const std::string& name)
    : Layer(unbound_layer("GlobalPool", [mode](const LayerSpec& s) -> Layer { return GlobalPool(s.input(), mode, s.name); }, name)) {}

GlobalPool::GlobalPool(const Layer& input, Mode mode, const std::string& name) {
  if (!input.defined()) throw ValueError("GlobalPool: the input layer is undefined");
  if (input.shape().size() < 3)
    throw ShapeError("GlobalPool: input '" + input.name() + "' has shape " + shape_str(input.shape()) + " (valid: (batch, channels, spatial...))");
  auto impl = std::make_shared<GlobalPoolImpl>();
  impl->attrs.max = mode == Mode::Max;
  impl->inputs = {input};
  impl->dtype = input.dtype();
  impl->name = unique_name("global_pool", name);
  impl->shape = detail::shape_by_rule(*impl, {input});
  static_cast<Layer&>(*this) = Layer(impl);
}

Tensor adaptive_avg_pool_matrix(int64_t in_size, int64_t out_size, DType dtype, Device device) {
  std::vector<double> m(static_cast<size_t>(out_size * in_size), 0.0);
  for (int64_t i = 0; i < out_size; ++i) {
    const int64_t start = (i * in_size) / out_size;                           // floor(i * in / out)
    const int64_t end = ((i + 1) * in_size + out_size - 1) / out_size;       // ceil((i + 1) * in / out)
    for (int64_t k = start; k < end; ++k) m[static_cast<size_t>(i * in_size + k)] = 1.0 / static_cast<double>(end - start);
  }
  return astype(from_vector(m, Shape{out_size, in_size}, device), dtype);
}

Tensor adaptive_avg_pool2d(const Tensor& x, IntList output_size) {
  if (x.ndim() != 3 && x.ndim() != 4)
    throw ShapeError("adaptive_avg_pool2d: input has shape " + shape_str(x.shape()) + " (valid: (N, C, H, W) or (C, H, W))");
  const auto hw = out_hw(output_size, "adaptive_avg_pool2d");
  const int64_t H = x.shape()[x.ndim() - 2], W = x.shape()[x.ndim() - 1];
  if (H <= 0 || W <= 0) throw ShapeError("adaptive_avg_pool2d: input has an empty plane, shape " + shape_str(x.shape()));
  const int64_t oh = hw[0], ow = hw[1];
  if (oh == 1 && ow == 1) return mean(x, {-2, -1}, /*keepdims=*/true);
  if (H % oh == 0 && W % ow == 0) {
    if (H == oh && W == ow) return x;
    return avg_pool2d(x, {H / oh, W / ow});
  }
  // Separable: the bins are rectangles, so averaging rows then columns is the bin average.
  Tensor rows = adaptive_avg_pool_matrix(H, oh, x.dtype(), x.device());                // (oh, H)
  Tensor cols = transpose(adaptive_avg_pool_matrix(W, ow, x.dtype(), x.device()));     // (W, ow)
  return matmul(matmul(rows, x), cols);
}

AdaptiveAvgPool2D::AdaptiveAvgPool2D(const Layer& input, IntList output_size, const std::string& name) {
  const char* kind = "AdaptiveAvgPool2D";
  if (!input.defined()) throw ValueError(std::string(kind) + ": the input layer is undefined");
  if (input.shape().size() != 4)
    throw ShapeError(std::string(kind) + ": input '" + input.name() + "' has shape " + shape_str(input.shape()) +
                     " (valid: (batch, channels, height, width))");
  const auto hw = out_hw(output_size, kind);
  auto impl = std::make_shared<AdaptiveAvgPoolImpl>();
  impl->attrs.output_size = hw;
  impl->inputs = {input};
  impl->dtype = input.dtype();
  impl->name = unique_name("adaptive_avg_pool", name);
  impl->shape = detail::shape_by_rule(*impl, {input});
  static_cast<Layer&>(*this) = Layer(impl);
}

namespace {

Layer make_pool_layer(const LayerSpec& s, bool max) {
  const auto a = read_attributes<PoolAttributes>(s.options);
  PoolOptions o;
  o.stride = a.stride;
  o.padding = a.padding;
  o.ceil_mode = a.ceil_mode;
  if (max) return MaxPool2D(s.input(), a.kernel_size, o, s.name);
  return AvgPool2D(s.input(), a.kernel_size, o, s.name);
}

}  // namespace

void detail::register_pooling_layers(AddKind add) {
  add("MaxPool2D", [](const LayerSpec& s) { return make_pool_layer(s, true); }, {write_attributes(PoolAttributes{})});
  add("AvgPool2D", [](const LayerSpec& s) { return make_pool_layer(s, false); }, {write_attributes(PoolAttributes{})});
  add("GlobalPool", [](const LayerSpec& s) -> Layer {
    const std::string mode = s.options.get_string("mode");
    if (mode != "max" && mode != "avg") s.options.fail("has the mode '" + mode + "' (valid: \"max\", \"avg\")");
    return GlobalPool(s.input(), mode == "max" ? GlobalPool::Mode::Max : GlobalPool::Mode::Avg, s.name);
  }, {Options().set_string("mode", "avg")});
  add("AdaptiveAvgPool2D", [](const LayerSpec& s) -> Layer {
    return AdaptiveAvgPool2D(s.input(), IntList(read_attributes<AdaptiveAvgPoolAttributes>(s.options).output_size), s.name);
  }, {write_attributes(AdaptiveAvgPoolAttributes{})});
}

}  // namespace loom::nn
