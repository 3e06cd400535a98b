#include "loom/nn/merge.h"

#include <algorithm>

#include "loom/nn/init.h"
#include "loom/nn/lambda.h"
#include "nn/kind_util.h"
#include "nn/register_kinds.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/nn.h"

namespace loom::nn {

using detail::kMaxSize;
using detail::require_input;

namespace {

// ---------------------------------------------------------------- merges

// Concat: the inputs' shapes joined along `axis`; otherwise broadcast together (-1, a size known
// only at run time, matches anything)
Shape merge_shape(const LayerImpl& l, const std::vector<Shape>& in, MergeMode op, int64_t axis) {
  if (in.empty()) throw ValueError(detail::who(l) + ": needs at least one input");
  Shape s = in[0];
  if (op == MergeMode::Concat) {
    const int64_t a = normalize_axis(axis, static_cast<int64_t>(s.size()), l.kind());
    for (size_t i = 1; i < in.size(); ++i) {
      const Shape& t = in[i];
      bool ok = t.size() == s.size();
      for (size_t d = 0; ok && d < s.size(); ++d)
        if (static_cast<int64_t>(d) != a && t[d] != s[d] && t[d] >= 0 && s[d] >= 0) ok = false;
      if (!ok)
        throw ShapeError(detail::who(l) + ": input " + std::to_string(i) + " has shape " + shape_str(t) + " but input 0 has " + shape_str(s) +
                         " (all axes but " + std::to_string(axis) + " must match)");
      s[a] = (s[a] < 0 || t[a] < 0) ? -1 : s[a] + t[a];
    }
    return s;
  }
  for (size_t i = 1; i < in.size(); ++i) {
    const Shape& t = in[i];
    const size_t n = std::max(s.size(), t.size());
    Shape r(n);
    for (size_t d = 0; d < n; ++d) {
      const int64_t x = d < n - s.size() ? 1 : s[d - (n - s.size())];
      const int64_t y = d < n - t.size() ? 1 : t[d - (n - t.size())];
      if (x != y && x != 1 && y != 1 && x >= 0 && y >= 0)
        throw ShapeError(detail::who(l) + ": input " + std::to_string(i) + " has shape " + shape_str(t) + " which does not broadcast with " +
                         shape_str(s) + " (the inputs before it)");
      r[d] = (x < 0 || y < 0) ? -1 : std::max(x, y);
    }
    s = r;
  }
  return s;
}

struct MergeImpl final : KindBase<MergeImpl, MergeAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override {
    switch (attrs.mode) {
      case MergeMode::Sum: return "Add";
      case MergeMode::Subtract: return "Subtract";
      case MergeMode::Multiply: return "Multiply";
      case MergeMode::Mean: return "Mean";
      case MergeMode::Concat: return "Concat";
    }
    return "?";
  }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    const MergeMode op = attrs.mode;
    if (op == MergeMode::Concat) return concatenate(in, attrs.axis);
    Tensor acc = in[0];
    for (size_t i = 1; i < in.size(); ++i) {
      if (op == MergeMode::Subtract) acc = acc - in[i];
      else if (op == MergeMode::Multiply) acc = acc * in[i];
      else acc = acc + in[i];
    }
    if (op == MergeMode::Mean) acc = acc / static_cast<double>(in.size());
    return acc;
  }
  // only Concat has an axis to save (the other kinds' files have no options)
  Options options() const override { return attrs.mode == MergeMode::Concat ? write_attributes(attrs) : Options(); }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return {merge_shape(*this, in, attrs.mode, attrs.axis)}; }
};

template <typename Handle>
std::shared_ptr<MergeImpl> make_merge(const std::vector<Layer>& inputs, MergeMode op, int64_t axis, const std::string& name,
                                      const char* kind) {
  if (inputs.empty()) throw ValueError(std::string(kind) + ": needs at least one input layer");
  for (const Layer& l : inputs) require_input(l, kind);
  auto impl = std::make_shared<MergeImpl>();
  impl->attrs = {op, axis};
  impl->dtype = inputs[0].dtype();
  for (const Layer& l : inputs) impl->dtype = promote_types(impl->dtype, l.dtype());
  impl->inputs = inputs;
  impl->name = unique_name(std::string(kind) == "Add" ? "add" : std::string(kind), name);
  impl->shape = detail::shape_by_rule(*impl, inputs);
  return impl;
}

struct ResidualImpl final : LayerBase<ResidualImpl> {
  bool pure() const override { return true; }
  ResidualAttributes attrs;
  const void* attributes(const std::type_info& type) const override { return type == typeid(ResidualAttributes) ? &attrs : nullptr; }
  const char* kind() const override { return "Residual"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    return (attrs.projected ? matmul(in[0], state->param("projection")) : in[0]) + in[1];
  }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return {in.at(1)}; }  // the block's
};

struct GateImpl final : LayerBase<GateImpl> {
  bool pure() const override { return true; }
  GateAttributes attrs;
  const void* attributes(const std::type_info& type) const override { return type == typeid(GateAttributes) ? &attrs : nullptr; }
  const char* kind() const override { return "Gate"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    return in[0] * sigmoid(matmul(in[1], state->param("weights")) + state->param("bias"));
  }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return {in.at(0)}; }  // the gated input's
};

}  // namespace

Merge::Merge(const std::vector<Layer>& inputs, MergeMode mode, int64_t axis, const std::string& name) {
  static const char* kinds[] = {"Add", "Subtract", "Multiply", "Mean", "Concat"};
  const char* kind = kinds[static_cast<int>(mode)];
  if (mode == MergeMode::Subtract && inputs.size() != 2)
    throw ValueError("Merge: Subtract takes exactly two inputs, got " + std::to_string(inputs.size()));
  static_cast<Layer&>(*this) = Layer(make_merge<Merge>(inputs, mode, axis, name, kind));
}

Add::Add(const std::vector<Layer>& inputs, const std::string& name)
    : Layer(make_merge<Add>(inputs, MergeMode::Sum, -1, name, "Add")) {}
Subtract::Subtract(const Layer& a, const Layer& b, const std::string& name)
    : Layer(make_merge<Subtract>({a, b}, MergeMode::Subtract, -1, name, "Subtract")) {}
Multiply::Multiply(const std::vector<Layer>& inputs, const std::string& name)
    : Layer(make_merge<Multiply>(inputs, MergeMode::Multiply, -1, name, "Multiply")) {}
Concat::Concat(const std::vector<Layer>& inputs, int64_t axis, const std::string& name)
    : Layer(make_merge<Concat>(inputs, MergeMode::Concat, axis, name, "Concat")) {}
Mean::Mean(const std::vector<Layer>& inputs, const std::string& name)
    : Layer(make_merge<Mean>(inputs, MergeMode::Mean, -1, name, "Mean")) {}

Layer operator+(const Layer& a, const Layer& b) { return Add(a, b); }
Layer operator-(const Layer& a, const Layer& b) { return Subtract(a, b); }
Layer operator*(const Layer& a, const Layer& b) { return Multiply(a, b); }
Layer operator*(const Layer& a, double s) {
  return Lambda({a}, [s](const std::vector<Tensor>& t) { return t[0] * s; }, a.shape(), a.dtype(), unique_name("scale"));
}
Layer operator*(double s, const Layer& a) { return a * s; }
Layer operator+(const Layer& a, double s) {
  return Lambda({a}, [s](const std::vector<Tensor>& t) { return t[0] + s; }, a.shape(), a.dtype(), unique_name("shift"));
}

Residual::Residual(const Layer& input, const Layer& block, const std::string& name) {
  require_input(input, "Residual");
  require_input(block, "Residual");
  auto impl = std::make_shared<ResidualImpl>();
  impl->inputs = {input, block};
  impl->shape = block.shape();
  impl->dtype = block.dtype();
  impl->name = unique_name("residual", name);
  if (input.n_units() != block.n_units()) {
    impl->attrs.projected = true;
    impl->state->add_param("projection", initialize(Init::glorot_uniform(), {input.n_units(), block.n_units()}, block.dtype()).requires_grad_());
  }
  static_cast<Layer&>(*this) = Layer(impl);
}

Gate::Gate(const Layer& input, const Layer& gate_input, const std::string& name) {
  require_input(input, "Gate");
  require_input(gate_input, "Gate");
  auto impl = std::make_shared<GateImpl>();
  impl->inputs = {input, gate_input};
  impl->shape = input.shape();
  impl->dtype = input.dtype();
  impl->name = unique_name("gate", name);
  impl->state->add_param("weights", initialize(Init::glorot_uniform(), {gate_input.n_units(), input.n_units()}, input.dtype()).requires_grad_());
  impl->state->add_param("bias", initialize(Init::zeros(), {input.n_units()}, input.dtype()).requires_grad_());
  static_cast<Layer&>(*this) = Layer(impl);
}

void detail::register_merge_layers(AddKind add) {
  add("Add", [](const LayerSpec& s) -> Layer { return Add(s.inputs, s.name); }, {});
  add("Subtract", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(2, 2);
    return Subtract(s.inputs[0], s.inputs[1], s.name);
  }, {});
  add("Multiply", [](const LayerSpec& s) -> Layer { return Multiply(s.inputs, s.name); }, {});
  add("Mean", [](const LayerSpec& s) -> Layer { return Mean(s.inputs, s.name); }, {});
  add("Concat", [](const LayerSpec& s) -> Layer { return Concat(s.inputs, read_attributes<MergeAttributes>(s.options).axis, s.name); }, {write_attributes(MergeAttributes{})});
  add("Residual", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(2, 2);
    return Residual(s.inputs[0], s.inputs[1], s.name);
  }, {});
  add("Gate", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(2, 2);
    return Gate(s.inputs[0], s.inputs[1], s.name);
  }, {});
}

}  // namespace loom::nn
