#include "loom/nn/shape.h"

#include <algorithm>

#include "nn/kind_util.h"
#include "nn/register_kinds.h"
#include "loom/ops/manipulation.h"

namespace loom::nn {

using detail::require_input;

namespace {

struct ReshapeImpl final : KindBase<ReshapeImpl, ReshapeAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override { return "Reshape"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    Shape s{in[0].ndim() ? in[0].shape()[0] : 1};
    s.insert(s.end(), attrs.shape.begin(), attrs.shape.end());
    return reshape(in[0], s);
  }
  // (batch, sample...) -> (batch, target...); a -1 in the target takes what is left when the
  // sample's sizes are known, and the element count must match then
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    const Shape& x = in.at(0);
    const std::vector<int64_t>& target = attrs.shape;
    int64_t known = 1, infer = 0;
    for (int64_t d : target) {
      if (d == -1) ++infer;
      else known = checked_mul(known, d, "Reshape");
    }
    int64_t have = 1;
    bool dynamic = false;
    for (size_t i = 1; i < x.size(); ++i) {
      if (x[i] < 0) dynamic = true;
      else have = checked_mul(have, x[i], "Reshape");
    }
    Shape out{x.empty() ? -1 : x[0]};
    for (int64_t d : target) out.push_back(d == -1 && !dynamic && known > 0 ? have / known : d);
    if (infer > 1 || (!dynamic && (infer ? have % known != 0 : have != known)))
      throw ShapeError(detail::who(*this) + ": samples of shape " + shape_str(Shape(x.begin() + std::min<size_t>(1, x.size()), x.end())) +
                       " cannot be reshaped to " + shape_str(target));
    return {out};
  }
};

struct TransposeImpl final : KindBase<TransposeImpl, TransposeAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override { return "Transpose"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    Axes p{0};
    for (int64_t a : attrs.perm) p.push_back(a + 1);
    return permute(in[0], p);
  }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    const Shape& x = in.at(0);
    if (x.size() != attrs.perm.size() + 1)
      throw ShapeError(detail::who(*this) + ": perm " + shape_str(attrs.perm) + " cannot permute the non-batch axes of an input of shape " + shape_str(x));
    Shape out{x[0]};
    for (int64_t a : attrs.perm) out.push_back(x[a + 1]);
    return {out};
  }
};

struct FlipImpl final : KindBase<FlipImpl, FlipAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override { return "Flip"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    Axes a;
    for (int64_t x : attrs.axes) a.push_back(x + 1);
    return flip(in[0], a);
  }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    const Shape& x = in.at(0);
    for (int64_t a : attrs.axes)
      if (a + 1 >= static_cast<int64_t>(x.size()))
        throw ShapeError(detail::who(*this) + ": axes " + shape_str(attrs.axes) + " reach past an input of shape " + shape_str(x));
    return {x};
  }
};

struct AxisSliceImpl final : KindBase<AxisSliceImpl, AxisSliceAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override { return "AxisSlice"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override { return slice(in[0], attrs.axis + 1, attrs.start, attrs.stop, attrs.step); }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    const Shape& x = in.at(0);
    if (attrs.axis + 1 >= static_cast<int64_t>(x.size()))
      throw ShapeError(detail::who(*this) + ": axis " + std::to_string(attrs.axis) + " is past the " + std::to_string(x.size() > 0 ? x.size() - 1 : 0) +
                       " axes after the batch axis of an input of shape " + shape_str(x));
    Shape out = x;
    const int64_t n = x[attrs.axis + 1];
    if (n < 0) return {out};  // sized at run time
    // NumPy's bounds: negative from the end, then clamped to [0, n]
    const auto bound = [n](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t{0}, n); };
    const int64_t b = bound(attrs.start), e = bound(attrs.stop);
    out[attrs.axis + 1] = e > b ? (e - b + attrs.step - 1) / attrs.step : 0;
    return {out};
  }
};

}  // namespace

Reshape::Reshape(const Layer& input, const Shape& shape, const std::string& name) {
  require_input(input, "Reshape");
  auto impl = std::make_shared<ReshapeImpl>();
  impl->attrs.shape = shape;
  impl->inputs = {input};
  impl->dtype = input.dtype();
  impl->name = unique_name("reshape", name);
  impl->shape = detail::shape_by_rule(*impl, {input});
  static_cast<Layer&>(*this) = Layer(impl);
}

Flatten::Flatten(const Layer& input, const std::string& name) : Layer(Reshape(input, {-1}, unique_name("flatten", name)).impl()) {}

// the forms without input (bound by their first call; nn/registry.h unbound_layer)
Reshape::Reshape(const Shape& shape, const std::string& name)
    : Layer(unbound_layer("Reshape", [shape](const LayerSpec& s) -> Layer { return Reshape(s.input(), shape, s.name); }, name)) {}
Flatten::Flatten() : Layer(unbound_layer("Reshape", [](const LayerSpec& s) -> Layer { return Reshape(s.input(), {-1}, s.name); }, unique_name("flatten"))) {}

Transpose::Transpose(const Layer& input, const Axes& perm, const std::string& name) {
  require_input(input, "Transpose");
  const int64_t rank = static_cast<int64_t>(input.shape().size()) - 1;
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 0)), false);
  if (static_cast<int64_t>(perm.size()) != rank)
    throw ValueError("Transpose: perm " + shape_str(perm) + " must permute the " + std::to_string(rank) + " non-batch axes of '" +
                     input.name() + "' " + shape_str(input.shape()));
  auto impl = std::make_shared<TransposeImpl>();
  for (int64_t a : perm) {
    if (a < 0 || a >= rank || seen[a]) throw ValueError("Transpose: perm " + shape_str(perm) + " is not a permutation of 0.." + std::to_string(rank - 1));
    seen[a] = true;
  }
  impl->attrs.perm = perm;
  impl->inputs = {input};
  impl->dtype = input.dtype();
  impl->name = unique_name("transpose", name);
  impl->shape = detail::shape_by_rule(*impl, {input});
  static_cast<Layer&>(*this) = Layer(impl);
}

Flip::Flip(const Layer& input, const Axes& axes, const std::string& name) {
  require_input(input, "Flip");
  const int64_t rank = static_cast<int64_t>(input.shape().size()) - 1;
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 0)), false);
  if (axes.empty())
    throw ValueError("Flip: no axes given for '" + input.name() + "' " + shape_str(input.shape()) +
                     " (valid: axes after the batch axis, 0.." + std::to_string(rank - 1) + ")");
  for (int64_t a : axes) {
    if (a < 0 || a >= rank || seen[a])
      throw ValueError("Flip: axes " + shape_str(axes) + " must be distinct axes after the batch axis of '" + input.name() +
                       "' " + shape_str(input.shape()) + " (valid: 0.." + std::to_string(rank - 1) + ")");
    seen[a] = true;
  }
  auto impl = std::make_shared<FlipImpl>();
  impl->attrs.axes = axes;
  impl->inputs = {input};
  impl->dtype = input.dtype();
  impl->name = unique_name("flip", name);
  impl->shape = detail::shape_by_rule(*impl, {input});
  static_cast<Layer&>(*this) = Layer(impl);
}

AxisSlice::AxisSlice(const Layer& input, int64_t axis, int64_t start, int64_t stop, int64_t step, const std::string& name) {
  require_input(input, "AxisSlice");
  const int64_t rank = static_cast<int64_t>(input.shape().size()) - 1;
  if (axis < 0 || axis >= rank)
    throw ValueError("AxisSlice: axis " + std::to_string(axis) + " is not an axis after the batch axis of '" + input.name() + "' " +
                     shape_str(input.shape()) + " (valid: 0.." + std::to_string(rank - 1) + ")");
  if (step < 1) throw ValueError("AxisSlice: step " + std::to_string(step) + " must be at least 1 (nn::Flip reverses an axis)");
  const int64_t lim = Field::kMaxSize;
  if (start < -lim || start > lim || stop < -lim || stop > lim)
    throw ValueError("AxisSlice: start " + std::to_string(start) + " and stop " + std::to_string(stop) + " must lie in [-2^40, 2^40]");
  auto impl = std::make_shared<AxisSliceImpl>();
  impl->attrs = {axis, start, stop, step};
  impl->inputs = {input};
  impl->dtype = input.dtype();
  impl->name = unique_name("axis_slice", name);
  impl->shape = detail::shape_by_rule(*impl, {input});
  static_cast<Layer&>(*this) = Layer(impl);
}

void detail::register_shape_layers(AddKind add) {
  add("Reshape", [](const LayerSpec& s) -> Layer { return Reshape(s.input(), read_attributes<ReshapeAttributes>(s.options).shape, s.name); }, {write_attributes(ReshapeAttributes{})});
  add("Transpose", [](const LayerSpec& s) -> Layer { return Transpose(s.input(), read_attributes<TransposeAttributes>(s.options).perm, s.name); }, {write_attributes(TransposeAttributes{})});
  add("Flip", [](const LayerSpec& s) -> Layer { return Flip(s.input(), read_attributes<FlipAttributes>(s.options).axes, s.name); }, {write_attributes(FlipAttributes{})});
  add("AxisSlice", [](const LayerSpec& s) -> Layer {
    const AxisSliceAttributes a = read_attributes<AxisSliceAttributes>(s.options);
    return AxisSlice(s.input(), a.axis, a.start, a.stop, a.step, s.name);
  }, {write_attributes(AxisSliceAttributes{})});
}

}  // namespace loom::nn
