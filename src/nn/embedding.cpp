#include "loom/nn/embedding.h"

#include "nn/kind_util.h"
#include "nn/register_kinds.h"
#include "nn/sparse_internal.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/indexing.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/nn.h"
#include "loom/ops/sparse.h"

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

// A bag of ids per row (a SparseInput's value, weights as values) combined into one row each:
// sparse x table, then divided per row by the weights' sum ("mean") or the root of their squares'
// sum ("sqrtn"); an empty row stays zeros.
Tensor lookup_bag(const SparseTensor& bag, const Tensor& table, const std::string& combiner) {
  Tensor y = matmul(bag, table);
  if (y.dtype() != table.dtype()) y = y.astype(table.dtype());  // float64 weights, float32 table
  if (combiner == "sum") return y;
  SparseTensor w = bag;
  if (combiner == "sqrtn") {
    const Tensor v = bag.values().detach();
    w = bag.layout() == SparseLayout::CSR ? SparseTensor::csr(bag.crow_indices(), bag.col_indices(), v * v, bag.shape())
                                          : SparseTensor::coo(bag.indices(), v * v, bag.shape());
  }
  Tensor d = matmul(w, ones({bag.shape()[1], 1}, bag.dtype(), table.device()));
  if (combiner == "sqrtn") d = sqrt(d);
  d = where(d == 0.0, Scalar(1.0), d);
  return y / d.astype(y.dtype());
}

struct LookupImpl final : KindBase<LookupImpl, LookupAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override { return "Lookup"; }
  bool over_bags() const { return !inputs.empty() && detail::is_sparse_input(inputs[0]); }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    if (!in[0].defined() && over_bags())
      return lookup_bag(detail::sparse_input_value(inputs[0]), state->param("weights"), attrs.combiner);
    return embedding(state->param("weights"), in[0], attrs.padding_id);
  }
  // ids of any shape -> (..., n_units); bags (rows, vocab_size) -> (rows, n_units)
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    Shape out = in.at(0);
    if (over_bags()) {
      if (out.size() != 2 || (out[1] >= 0 && out[1] != attrs.vocab_size))
        throw ShapeError(detail::who(*this) + ": a bag of ids of shape " + shape_str(out) + " (valid: (rows, " +
                         std::to_string(attrs.vocab_size) + "), the vocabulary's size)");
      out[1] = attrs.n_units;
      return {out};
    }
    out.push_back(attrs.n_units);
    return {out};
  }
};

// The table's first T rows for a sequence of T positions (the input's axis 1).
struct PositionEmbeddingImpl final : KindBase<PositionEmbeddingImpl, PositionEmbeddingAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override { return "PositionEmbedding"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    const int64_t t = in[0].ndim() >= 2 ? in[0].dim(1) : -1;
    check_length(t, in[0].shape());
    const Tensor& table = state->param("weights");
    return embedding(table, arange(t, DType::Int64, table.device()));
  }
  void check_length(int64_t t, const Shape& s) const {
    if (s.size() < 2)
      throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(s) + " (valid: (batch, positions, ...))");
    if (t > attrs.n_positions)
      throw ShapeError(detail::who(*this) + ": a sequence of " + std::to_string(t) + " positions, longer than its " +
                       std::to_string(attrs.n_positions) + " learned positions (valid: at most " + std::to_string(attrs.n_positions) + ")");
  }
  // (N, T, ...) -> (T, n_units)
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    const Shape& s = in.at(0);
    check_length(s.size() >= 2 ? s[1] : -1, s);
    return {Shape{s[1], attrs.n_units}};
  }
};

}  // namespace

PositionEmbedding::PositionEmbedding(const Layer& sequence, int64_t n_positions, int64_t n_units, Init init, const std::string& name) {
  require_input(sequence, "PositionEmbedding");
  if (n_positions <= 0 || n_units <= 0)
    throw ValueError("PositionEmbedding: n_positions and n_units must be positive, got " + std::to_string(n_positions) + " and " +
                     std::to_string(n_units));
  auto impl = std::make_shared<PositionEmbeddingImpl>();
  impl->attrs = {n_positions, n_units, init};
  impl->inputs = {sequence};
  impl->dtype = DType::Float32;
  impl->name = unique_name("position_embedding", name);
  impl->shape = detail::shape_by_rule(*impl, {sequence});
  impl->state->add_param("weights", initialize(init, {n_positions, n_units}).requires_grad_());
  static_cast<Layer&>(*this) = Layer(impl);
}

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
  const bool bags = detail::is_sparse_input(ids);
  if (!bags && !is_integral(ids.dtype()))
    throw DTypeError("Lookup: ids '" + ids.name() + "' have dtype " + dtype_name(ids.dtype()) +
                     " (valid: an integer dtype, or a SparseInput of bags of ids)");
  if (o.combiner != "sum" && o.combiner != "mean" && o.combiner != "sqrtn")
    throw ValueError("Lookup: combiner '" + o.combiner + "' is not one of sum, mean, sqrtn");
  if (bags && o.padding_id >= 0)
    throw ValueError("Lookup: padding_id " + std::to_string(o.padding_id) + " over the SparseInput '" + ids.name() +
                     "': a bag of ids has no padding (an absent id is not in the row); leave padding_id at -1");
  if (vocab_size <= 0 || n_units <= 0)
    throw ValueError("Lookup: vocab_size and n_units must be positive, got " + std::to_string(vocab_size) + " and " + std::to_string(n_units));
  if (o.padding_id >= vocab_size)
    throw ValueError("Lookup: padding_id " + std::to_string(o.padding_id) + " is outside the vocabulary of " + std::to_string(vocab_size));
  auto impl = std::make_shared<LookupImpl>();
  impl->attrs = {vocab_size, n_units, o.padding_id, o.init, o.combiner};
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
  }, {write_attributes(OneHotAttributes{})});
  add("Lookup", [](const LayerSpec& s) -> Layer {
    const auto a = read_attributes<LookupAttributes>(s.options);
    return Lookup(s.input(), a.vocab_size, a.n_units, {a.padding_id, a.init, a.combiner}, s.name);
  }, {write_attributes(LookupAttributes{})});
  add("PositionEmbedding", [](const LayerSpec& s) -> Layer {
    const auto a = read_attributes<PositionEmbeddingAttributes>(s.options);
    return PositionEmbedding(s.input(), a.n_positions, a.n_units, a.init, s.name);
  }, {write_attributes(PositionEmbeddingAttributes{})});
}

}  // namespace loom::nn
