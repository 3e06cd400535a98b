// SparseInput and DropConnect (docs/sparse.md).
#include "loom/nn/sparse.h"

#include <cstdio>

#include "loom/ops/linalg.h"
#include "loom/ops/nn.h"
#include "loom/ops/random.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "nn/kind_util.h"
#include "nn/register_kinds.h"
#include "nn/sparse_internal.h"

namespace loom::nn {

using detail::fmt_double;

namespace {

// ---------------------------------------------------------------- SparseInput
// A source: its shape rule is the default, its declared (-1, n_units) (no inputs to follow).
struct SparseInputImpl final : KindBase<SparseInputImpl, SparseInputAttributes> {
  std::shared_ptr<SparseTensor> value = std::make_shared<SparseTensor>();
  const char* kind() const override { return "SparseInput"; }
  // The value is not a dense tensor: the consumers (Linear, DropConnect) read it through
  // detail::input_matmul; any other layer gets an undefined tensor and its op refuses it.
  Tensor compute(const std::vector<Tensor>&, Mode) override {
    get();  // no value: say so here, naming the input
    return Tensor();
  }
  const SparseTensor& get() const {
    if (!value->defined())
      throw ValueError("SparseInput '" + name + "' of shape " + shape_str(shape) + " has no value: call set_value() first");
    return *value;
  }
};

SparseInputImpl& sparse_input_impl(const Layer& l) {
  auto* p = dynamic_cast<SparseInputImpl*>(l.impl().get());
  if (!p) throw ValueError("SparseInput: layer '" + l.name() + "' is a " + l.kind() + ", not a SparseInput");
  return *p;
}

// ---------------------------------------------------------------- DropConnect
struct DropConnectImpl final : KindBase<DropConnectImpl, DropConnectAttributes> {
  const char* kind() const override { return "DropConnect"; }
  Tensor compute(const std::vector<Tensor>& in, Mode mode) override {
    Tensor w = state->param("weights");
    if (mode == Mode::Train) {
      // the stream position lives in the state (buffer "rng": seed, draws), as Dropout's
      Tensor& rng = state->buffer("rng");
      int64_t* s = rng.data<int64_t>();
      Generator g;
      g.set_state(static_cast<uint64_t>(s[0]), static_cast<uint64_t>(s[1]));
      w = dropout(w, attrs.probability, true, &g);  // W * M / (1 - p): gradients only through kept weights
      s[1] = static_cast<int64_t>(g.counter());
    }
    Tensor y = detail::input_matmul(inputs[0], in[0], w);
    return attrs.bias ? y + state->param("bias") : y;
  }
  // (..., in) -> (..., n_units); `in` is what the weights take
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    const Shape& x = in.at(0);
    const int64_t in_units = state->param("weights").shape()[0];
    if (x.empty()) throw ShapeError(detail::who(*this) + ": an input of shape () (valid: (..., units))");
    if (x.back() >= 0 && x.back() != in_units)
      throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(x) + " has " + std::to_string(x.back()) + " units; its weights take " +
                       std::to_string(in_units));
    Shape out = x;
    out.back() = attrs.n_units;
    return {out};
  }
};

}  // namespace

bool detail::is_sparse_input(const Layer& input) { return dynamic_cast<const SparseInputImpl*>(input.impl().get()) != nullptr; }

SparseTensor detail::sparse_input_value(const Layer& input) { return sparse_input_impl(input).get(); }

Tensor detail::input_matmul(const Layer& input, const Tensor& x, const Tensor& w) {
  if (!x.defined())
    if (auto* s = dynamic_cast<const SparseInputImpl*>(input.impl().get())) return matmul(s->get(), w);
  return matmul(x, w);
}

SparseInput::SparseInput(int64_t n_units, DType dtype, const std::string& name) {
  if (n_units <= 0) throw ValueError("SparseInput: n_units must be positive, got " + std::to_string(n_units));
  if (dtype != DType::Float32 && dtype != DType::Float64)
    throw DTypeError("SparseInput: dtype " + std::string(dtype_name(dtype)) + " is not valid (valid: float32, float64)");
  auto impl = std::make_shared<SparseInputImpl>();
  impl->attrs = {.n_units = n_units, .dtype = dtype};
  impl->shape = {-1, n_units};
  impl->dtype = dtype;
  impl->name = unique_name("sparse_input", name);
  static_cast<Layer&>(*this) = Layer(impl);
}

SparseInput::SparseInput(std::shared_ptr<LayerImpl> impl) : Layer(std::move(impl)) { sparse_input_impl(*this); }

void SparseInput::set_value(const SparseTensor& v) const {
  auto& in = sparse_input_impl(*this);
  if (!v.defined() || v.ndim() != 2 || v.shape()[1] != in.shape[1])
    throw ShapeError("SparseInput '" + in.name + "'.set_value: a sparse tensor of shape " +
                     (v.defined() ? shape_str(v.shape()) : "undefined") + " does not fit the input's shape " +
                     shape_str(in.shape) + " (-1 matches any number of rows)");
  if (v.dtype() != in.dtype)
    throw DTypeError("SparseInput '" + in.name + "'.set_value: a sparse tensor of dtype " + dtype_name(v.dtype()) +
                     " does not fit the input's dtype " + dtype_name(in.dtype));
  *in.value = v;
}
void SparseInput::set_value(const Tensor& rows) const {
  auto& in = sparse_input_impl(*this);
  if (!rows.defined() || rows.ndim() != 2)
    throw ShapeError("SparseInput '" + in.name + "'.set_value: rows of shape " + (rows.defined() ? shape_str(rows.shape()) : "undefined") +
                     " (valid: float rows (rows, " + std::to_string(in.shape[1]) + ") or integer ids (rows, length) padded with -1)");
  if (!is_integral(rows.dtype())) {
    if (rows.dim(1) != in.shape[1])
      throw ShapeError("SparseInput '" + in.name + "'.set_value: rows of shape " + shape_str(rows.shape()) + " do not have the input's " +
                       std::to_string(in.shape[1]) + " columns (integer ids (rows, length) are the other valid form)");
    set_value(SparseTensor::from_dense(rows.detach().astype(in.dtype), SparseLayout::CSR));
    return;
  }
  const std::vector<int64_t> ids = rows.astype(Int64).contiguous().to_vector<int64_t>();
  const int64_t n = rows.dim(0), length = rows.dim(1), units = in.shape[1];
  std::vector<int64_t> at;  // row indices, then column indices
  at.reserve(2 * ids.size());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < length; ++j) {
      const int64_t id = ids[static_cast<size_t>(r * length + j)];
      if (id < -1 || id >= units)
        throw IndexError("SparseInput '" + in.name + "'.set_value: id " + std::to_string(id) + " in row " + std::to_string(r) +
                         " is outside the vocabulary [0, " + std::to_string(units) + ") (-1 pads)");
      if (id >= 0) at.push_back(r);
    }
  const auto nnz = static_cast<int64_t>(at.size());
  for (int64_t id : ids)
    if (id >= 0) at.push_back(id);
  set_value(SparseTensor::coo(from_vector(at, {2, nnz}), ones({nnz}, in.dtype), {n, units}));
}

bool SparseInput::has_value() const { return sparse_input_impl(*this).value->defined(); }
SparseTensor SparseInput::value() const { return sparse_input_impl(*this).get(); }
void SparseInput::clear() const { *sparse_input_impl(*this).value = SparseTensor(); }

DropConnect::DropConnect(const Layer& input, int64_t n_units, double probability, DropConnectOptions o,
                         const std::string& name) {
  if (!input.defined()) throw ValueError("DropConnect: the input layer is undefined");
  if (n_units <= 0) throw ValueError("DropConnect: n_units must be positive, got " + std::to_string(n_units));
  if (!(probability >= 0 && probability <= 1))
    throw ValueError("DropConnect: probability must be in [0, 1], got " + fmt_double(probability));
  const int64_t in = input.n_units();
  if (in <= 0)
    throw ShapeError("DropConnect: input '" + input.name() + "' has shape " + shape_str(input.shape()) +
                     "; its last dimension (the units) must be known when the layer is created");
  if (!is_floating(input.dtype()))
    throw DTypeError("DropConnect: input '" + input.name() + "' has dtype " + dtype_name(input.dtype()) +
                     " (valid: a floating dtype)");
  auto impl = std::make_shared<DropConnectImpl>();
  impl->attrs = {.n_units = n_units, .probability = probability, .bias = o.bias, .seed = o.seed, .weight_init = o.weight_init, .bias_init = o.bias_init};
  impl->inputs = {input};
  impl->dtype = input.dtype();
  impl->name = unique_name("dropconnect", name);
  impl->state->add_param("weights", initialize(o.weight_init, {in, n_units}, input.dtype()).requires_grad_());
  if (o.bias) impl->state->add_param("bias", initialize(o.bias_init, {n_units}, input.dtype()).requires_grad_());
  impl->state->add_buffer("rng", from_vector<int64_t>({static_cast<int64_t>(o.seed), 0}, {2}));
  impl->shape = detail::shape_by_rule(*impl, {input});
  static_cast<Layer&>(*this) = Layer(impl);
}

void detail::register_sparse_layers(AddKind add) {
  add("SparseInput", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(0, 0);
    const auto a = read_attributes<SparseInputAttributes>(s.options);
    return SparseInput(a.n_units, a.dtype, s.name);
  }, {write_attributes(SparseInputAttributes{}), true});
  add("DropConnect", [](const LayerSpec& s) -> Layer {
    const auto a = read_attributes<DropConnectAttributes>(s.options);
    const DropConnectOptions o{.bias = a.bias, .weight_init = a.weight_init, .bias_init = a.bias_init, .seed = a.seed};
    return DropConnect(s.input(), a.n_units, a.probability, o, s.name);
  }, {write_attributes(DropConnectAttributes{})});
}

}  // namespace loom::nn
