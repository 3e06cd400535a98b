#include "loom/nn/shape.h"

#include "nn/kind_util.h"
#include "nn/register_kinds.h"
#include "loom/ops/manipulation.h"

namespace loom::nn {

using detail::kMaxSize;
using detail::require_input;

namespace {

struct ReshapeImpl final : LayerBase<ReshapeImpl> {
  bool pure() const override { return true; }
  Shape target;  // without the batch axis
  const char* kind() const override { return "Reshape"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    Shape s{in[0].ndim() ? in[0].shape()[0] : 1};
    s.insert(s.end(), target.begin(), target.end());
    return reshape(in[0], s);
  }
  Options options() const override { return Options().set_ints("shape", target); }
};

struct TransposeImpl final : LayerBase<TransposeImpl> {
  bool pure() const override { return true; }
  Axes perm;
  const char* kind() const override { return "Transpose"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    Axes p{0};
    for (int64_t a : perm) p.push_back(a + 1);
    return permute(in[0], p);
  }
  Options options() const override { return Options().set_ints("perm", perm); }
};

struct FlipImpl final : LayerBase<FlipImpl> {
  bool pure() const override { return true; }
  Axes axes;  // after the batch axis
  const char* kind() const override { return "Flip"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    Axes a;
    for (int64_t x : axes) a.push_back(x + 1);
    return flip(in[0], a);
  }
  Options options() const override { return Options().set_ints("axes", axes); }
};

}  // namespace

Reshape::Reshape(const Layer& input, const Shape& shape, const std::string& name) {
  require_input(input, "Reshape");
  auto impl = std::make_shared<ReshapeImpl>();
  impl->target = shape;
  // the per-sample element count must match when known
  int64_t known = 1, infer = 0;
  for (int64_t d : shape) {
    if (d == -1) ++infer;
    else known = checked_mul(known, d, "Reshape");
  }
  int64_t have = 1;
  bool dynamic = false;
  for (size_t i = 1; i < input.shape().size(); ++i) {
    if (input.shape()[i] < 0) dynamic = true;
    else have = checked_mul(have, input.shape()[i], "Reshape");
  }
  Shape out{input.shape().empty() ? -1 : input.shape()[0]};
  for (int64_t d : shape) out.push_back(d == -1 && !dynamic && known > 0 ? have / known : d);
  if (infer > 1 || (!dynamic && (infer ? have % known != 0 : have != known)))
    throw ShapeError("Reshape: samples of shape " + shape_str(Shape(input.shape().begin() + std::min<size_t>(1, input.shape().size()), input.shape().end())) +
                     " from '" + input.name() + "' cannot be reshaped to " + shape_str(shape));
  impl->inputs = {input};
  impl->shape = out;
  impl->dtype = input.dtype();
  impl->name = unique_name("reshape", name);
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
  Shape out{input.shape()[0]};
  for (int64_t a : perm) {
    if (a < 0 || a >= rank || seen[a]) throw ValueError("Transpose: perm " + shape_str(perm) + " is not a permutation of 0.." + std::to_string(rank - 1));
    seen[a] = true;
    out.push_back(input.shape()[a + 1]);
  }
  impl->perm = perm;
  impl->inputs = {input};
  impl->shape = out;
  impl->dtype = input.dtype();
  impl->name = unique_name("transpose", name);
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
  impl->axes = axes;
  impl->inputs = {input};
  impl->shape = input.shape();
  impl->dtype = input.dtype();
  impl->name = unique_name("flip", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

void detail::register_shape_layers(AddKind add) {
  add("Reshape", [](const LayerSpec& s) -> Layer { return Reshape(s.input(), s.options.get_ints("shape", -1, kMaxSize), s.name); });
  add("Transpose",
      [](const LayerSpec& s) -> Layer { return Transpose(s.input(), s.options.get_ints("perm", -kMaxSize, kMaxSize), s.name); });
  add("Flip", [](const LayerSpec& s) -> Layer { return Flip(s.input(), s.options.get_ints("axes", -kMaxSize, kMaxSize), s.name); });
}

}  // namespace loom::nn
