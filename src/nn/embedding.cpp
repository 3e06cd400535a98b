#include "loom/nn/embedding.h"

#include "nn/kind_util.h"
#include "nn/register_kinds.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/indexing.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/nn.h"

namespace loom::nn {

using detail::require_input;

namespace {

struct OneHotImpl final : KindBase<OneHotImpl, OneHotAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override { return "OneHot"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    Tensor classes = arange(attrs.n_classes, DType::Int64, in[0].device());
    return astype(equal(expand_dims(astype(in[0], DType::Int64), -1), classes), dtype);
  }
  // ids of any shape -> (..., n_classes)
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    Shape out = in.at(0);
    out.push_back(attrs.n_classes);
    return {out};
  }
};

struct LookupImpl final : KindBase<LookupImpl, LookupAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override { return "Lookup"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override { return embedding(state->param("weights"), in[0], attrs.padding_id); }
  // ids of any shape -> (..., n_units)
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    Shape out = in.at(0);
    out.push_back(attrs.n_units);
    return {out};
  }
};

}  // namespace

OneHot::OneHot(const Layer& ids, int64_t n_classes, DType dtype, const std::string& name) {
  require_input(ids, "OneHot");
  if (n_classes <= 0) throw ValueError("OneHot: n_classes must be positive, got " + std::to_string(n_classes));
  if (!is_integral(ids.dtype()))
    throw DTypeError("OneHot: ids '" + ids.name() + "' have dtype " + dtype_name(ids.dtype()) + " (valid: an integer dtype)");
  auto impl = std::make_shared<OneHotImpl>();
  impl->attrs = {n_classes, dtype};
  impl->inputs = {ids};
  impl->dtype = dtype;
  impl->shape = detail::shape_by_rule(*impl, {ids});
  impl->name = unique_name("one_hot", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

Lookup::Lookup(const Layer& ids, int64_t vocab_size, int64_t n_units, LookupOptions o, const std::string& name) {
  require_input(ids, "Lookup");
  if (!is_integral(ids.dtype()))
    throw DTypeError("Lookup: ids '" + ids.name() + "' have dtype " + dtype_name(ids.dtype()) + " (valid: an integer dtype)");
  if (vocab_size <= 0 || n_units <= 0)
    throw ValueError("Lookup: vocab_size and n_units must be positive, got " + std::to_string(vocab_size) + " and " + std::to_string(n_units));
  if (o.padding_id >= vocab_size)
    throw ValueError("Lookup: padding_id " + std::to_string(o.padding_id) + " is outside the vocabulary of " + std::to_string(vocab_size));
  auto impl = std::make_shared<LookupImpl>();
  impl->attrs = {vocab_size, n_units, o.padding_id, o.init};
  impl->inputs = {ids};
  impl->shape = detail::shape_by_rule(*impl, {ids});
  impl->dtype = DType::Float32;
  impl->name = unique_name("lookup", name);
  Tensor table = initialize(o.init, {vocab_size, n_units});
  if (o.padding_id >= 0) table.index_put_({o.padding_id}, 0.0);
  impl->state->add_param("weights", table.requires_grad_());
  static_cast<Layer&>(*this) = Layer(impl);
}

void detail::register_embedding_layers(AddKind add) {
  add("OneHot", [](const LayerSpec& s) -> Layer {
    const auto a = read_attributes<OneHotAttributes>(s.options);
    return OneHot(s.input(), a.n_classes, a.dtype, s.name);
  });
  add("Lookup", [](const LayerSpec& s) -> Layer {
    const auto a = read_attributes<LookupAttributes>(s.options);
    return Lookup(s.input(), a.vocab_size, a.n_units, {a.padding_id, a.init}, s.name);
  });
}

}  // namespace loom::nn
