#include "loom/nn/recurrent.h"

#include <algorithm>
#include <optional>

#include "loom/nn/lambda.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/recurrent.h"
#include "nn/kind_util.h"
#include "nn/register_kinds.h"

namespace loom::nn {

namespace {

int64_t gate_count(CellKind k) { return k == CellKind::LSTM ? 4 : k == CellKind::GRU ? 3 : 1; }
const char* cell_name(CellKind k) { return k == CellKind::LSTM ? "LSTM" : k == CellKind::GRU ? "GRU" : "RNN"; }

void add_cell_params(State& s, CellKind kind, int64_t in, int64_t n, const CellOptions& o, DType dtype) {
  const int64_t g = gate_count(kind);
  s.add_param("w_ih", initialize(o.weight_init, {in, g * n}, dtype).requires_grad_());
  s.add_param("w_hh", initialize(o.recurrent_init, {n, g * n}, dtype).requires_grad_());
  if (o.bias) {
    s.add_param("b_ih", initialize(Init::zeros(), {g * n}, dtype).requires_grad_());
    s.add_param("b_hh", initialize(Init::zeros(), {g * n}, dtype).requires_grad_());
  }
}

// One step given the input projection xw (input_projection); `state` is h, or [h, c] for LSTM.
Tensor cell_step(CellKind kind, const State& s, const ActivationFn& act, const Tensor& xw, const Tensor& state, int64_t n) {
  if (kind == CellKind::LSTM) {
    // both biases are already in xw; the gate activations and the state update are one fused
    // op (docs/nn_ops.md "Recurrent cells")
    Tensor h = slice(state, -1, 0, n), c = slice(state, -1, n, 2 * n);
    return lstm_cell(xw + matmul(h, s.param("w_hh")), c);
  }
  Tensor hw = matmul(state, s.param("w_hh"));
  if (s.has_param("b_hh")) hw = hw + s.param("b_hh");
  if (kind == CellKind::RNN) return act(xw + hw);
  Tensor r = sigmoid(slice(xw, -1, 0, n) + slice(hw, -1, 0, n));
  Tensor z = sigmoid(slice(xw, -1, n, 2 * n) + slice(hw, -1, n, 2 * n));
  Tensor cand = loom::tanh(slice(xw, -1, 2 * n, 3 * n) + r * slice(hw, -1, 2 * n, 3 * n));
  return (1.0 - z) * cand + z * state;
}

// x w_ih + b_ih, for all steps of a sequence at once. An LSTM adds b_hh here too (once per
// sequence instead of once per step); GRU cannot: its b_hh sits inside r * (h w_hh + b_hh).
Tensor input_projection(CellKind kind, const State& s, const Tensor& x) {
  Tensor xw = matmul(x, s.param("w_ih"));
  if (!s.has_param("b_ih")) return xw;
  return xw + (kind == CellKind::LSTM ? s.param("b_ih") + s.param("b_hh") : s.param("b_ih"));
}


// One leading size of two inputs that broadcast together: equal, or 1 against any; -1 (known at
// run time) against a known size other than 1 is that size.
int64_t broadcast_size(int64_t a, int64_t b, const LayerImpl& l, const Shape& x, const Shape& h) {
  if (a == b || b == 1) return a;
  if (a == 1) return b;
  if (a < 0) return b;
  if (b < 0) return a;
  throw ShapeError(detail::who(l) + ": inputs of shapes " + shape_str(x) + " and " + shape_str(h) + " have leading sizes that do not broadcast");
}

struct CellImpl final : KindBase<CellImpl, CellAttributes> {
  const char* kind() const override {
    return attrs.cell == CellKind::LSTM ? "LSTMCell" : attrs.cell == CellKind::GRU ? "GRUCell" : "RNNCell";
  }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    return cell_step(attrs.cell, *state, attrs.activation, input_projection(attrs.cell, *state, in[0]), in[1], attrs.n_units);
  }
  // (x (..., features), state (..., n or 2n)) -> (..., n or 2n): the state's units, the leading
  // sizes of x and the state broadcast
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    const Shape& x = in.at(0);
    const Shape& h = in.at(1);
    const int64_t n = attrs.n_units, units = attrs.cell == CellKind::LSTM ? 2 * n : n;
    const int64_t features = state->param("w_ih").shape()[0];
    if (x.empty() || h.empty())
      throw ShapeError(detail::who(*this) + ": inputs of shapes " + shape_str(x) + " and " + shape_str(h) +
                       " (valid: (..., features) and a state (..., units))");
    if (x.back() >= 0 && x.back() != features)
      throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(x) + " has " + std::to_string(x.back()) +
                       " features; its weights take " + std::to_string(features));
    if (h.back() >= 0 && h.back() != units)
      throw ShapeError(detail::who(*this) + ": a state of shape " + shape_str(h) + " has " + std::to_string(h.back()) + " units; a cell of " +
                       std::to_string(n) + " units needs " + std::to_string(units) + (attrs.cell == CellKind::LSTM ? " ([h, c] packed)" : ""));
    const size_t rank = std::max(x.size(), h.size());
    Shape out(rank, 1);
    out.back() = units;
    for (size_t i = 1; i < rank; ++i) {
      const int64_t a = i < x.size() ? x[x.size() - 1 - i] : 1, b = i < h.size() ? h[h.size() - 1 - i] : 1;
      out[rank - 1 - i] = broadcast_size(a, b, *this, x, h);
    }
    return {out};
  }
};

std::shared_ptr<CellImpl> make_cell(CellKind kind, const Layer& input, const Layer& st, int64_t n, const CellOptions& o,
                                    const std::string& name) {
  const char* what = cell_name(kind);
  if (!input.defined() || !st.defined()) throw ValueError(std::string(what) + "Cell: an input layer is undefined");
  if (n <= 0) throw ValueError(std::string(what) + "Cell: n_units must be positive, got " + std::to_string(n));
  const int64_t state_units = kind == CellKind::LSTM ? 2 * n : n;
  if (st.n_units() != state_units)
    throw ShapeError(std::string(what) + "Cell: state layer '" + st.name() + "' has " + std::to_string(st.n_units()) +
                     " units; a cell of " + std::to_string(n) + " units needs " + std::to_string(state_units) +
                     (kind == CellKind::LSTM ? " ([h, c] packed)" : ""));
  auto impl = std::make_shared<CellImpl>();
  impl->attrs = {.cell = kind, .n_units = n, .activation = o.activation, .bias = o.bias};
  impl->inputs = {input, st};
  impl->dtype = input.dtype();
  impl->name = unique_name(std::string(what) + "_cell", name);
  add_cell_params(*impl->state, kind, input.n_units(), n, o, input.dtype());
  impl->shape = detail::shape_by_rule(*impl, {input, st});
  return impl;
}

struct RNNData {
  Tensor kept;  // final state of the previous call (stateful)
};

std::optional<CellKind> cell_by_name(const std::string& name) {
  for (CellKind k : {CellKind::RNN, CellKind::LSTM, CellKind::GRU})
    if (name == cell_name(k)) return k;
  return std::nullopt;
}

struct RNNImpl final : KindBase<RNNImpl, RNNAttributes> {
  CellKind cell = CellKind::LSTM;  // attrs.cell by its name
  std::shared_ptr<RNNData> data = std::make_shared<RNNData>();
  const char* kind() const override { return "RNN"; }

  // Runs one direction; returns the outputs per step (h) and leaves the final state in `last`.
  std::vector<Tensor> run(const State& s, const Tensor& x, bool backwards, Tensor init, Tensor& last) const {
    const int64_t B = x.dim(0), T = x.dim(1), n = attrs.n_units;
    // one GEMM for all steps; unbind: backward gathers the steps' gradients into one tensor
    const std::vector<Tensor> xw = unbind(input_projection(cell, s, x), 1);
    Tensor st = init.defined() ? init : zeros({B, cell == CellKind::LSTM ? 2 * n : n}, x.dtype(), x.device());
    std::vector<Tensor> outs(static_cast<size_t>(T));
    for (int64_t k = 0; k < T; ++k) {
      const int64_t t = backwards ? T - 1 - k : k;
      st = cell_step(cell, s, attrs.activation, xw[t], st, n);
      outs[t] = cell == CellKind::LSTM ? slice(st, -1, 0, n) : st;
    }
    last = st;
    return outs;
  }

  const State& direction(size_t d) const { return attrs.bidirectional ? *state->children()[d].second : *state; }

  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    const Tensor& x = in[0];
    if (x.ndim() != 3)
      throw ShapeError("RNN '" + name + "': expects (batch, time, features), got " + shape_str(x.shape()));
    const size_t n_dirs = attrs.bidirectional ? 2 : 1;
    std::vector<Tensor> results, finals;
    for (size_t d = 0; d < n_dirs; ++d) {
      Tensor init;
      if (attrs.stateful && data->kept.defined()) init = split(data->kept, static_cast<int64_t>(n_dirs), -1)[d];
      if (init.defined() && init.dim(0) != x.dim(0)) init = Tensor();  // batch size changed: start afresh
      Tensor last;
      std::vector<Tensor> outs = run(direction(d), x, attrs.reverse != (d == 1), init, last);
      finals.push_back(last);
      results.push_back(attrs.return_sequences ? stack(outs, 1) : outs[attrs.reverse != (d == 1) ? 0 : outs.size() - 1]);
    }
    if (attrs.stateful) data->kept = concatenate(finals, -1).detach();
    return results.size() == 1 ? results[0] : concatenate(results, -1);
  }

  // (batch, time, features) -> (batch, time, units) with return_sequences, else (batch, units);
  // units: n_units, twice that bidirectional
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    const Shape& x = in.at(0);
    if (x.size() != 3) throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(x) + " (valid: (batch, time, features))");
    const int64_t features = direction(0).param("w_ih").shape()[0];
    if (x[2] >= 0 && x[2] != features)
      throw ShapeError(detail::who(*this) + ": an input of shape " + shape_str(x) + " has " + std::to_string(x[2]) +
                       " features; its weights take " + std::to_string(features));
    const int64_t units = attrs.bidirectional ? 2 * attrs.n_units : attrs.n_units;
    return {attrs.return_sequences ? Shape{x[0], x[1], units} : Shape{x[0], units}};
  }
};

}  // namespace

RNNCell::RNNCell(const Layer& input, const Layer& state, int64_t n, CellOptions o, const std::string& name)
    : Layer(make_cell(CellKind::RNN, input, state, n, o, name)) {}
LSTMCell::LSTMCell(const Layer& input, const Layer& state, int64_t n, CellOptions o, const std::string& name)
    : Layer(make_cell(CellKind::LSTM, input, state, n, o, name)) {}
GRUCell::GRUCell(const Layer& input, const Layer& state, int64_t n, CellOptions o, const std::string& name)
    : Layer(make_cell(CellKind::GRU, input, state, n, o, name)) {}

Layer LSTMCell::hidden(const Layer& packed) {
  const int64_t n = packed.n_units() / 2;
  Shape s = packed.shape();
  s.back() = n;
  return Lambda({packed}, [n](const std::vector<Tensor>& t) { return slice(t[0], -1, 0, n); }, s, packed.dtype(),
                unique_name(packed.name() + "_h"));
}

RNN::RNN(const Layer& sequence, int64_t n, RNNOptions o, const std::string& name) {
  if (!sequence.defined()) throw ValueError("RNN: the input layer is undefined");
  if (sequence.shape().size() != 3)
    throw ShapeError("RNN: input '" + sequence.name() + "' has shape " + shape_str(sequence.shape()) + " (valid: (batch, time, features))");
  if (n <= 0) throw ValueError("RNN: n_units must be positive, got " + std::to_string(n));
  auto impl = std::make_shared<RNNImpl>();
  impl->cell = o.cell;
  impl->attrs = {.cell = cell_name(o.cell),
                 .n_units = n,
                 .return_sequences = o.return_sequences,
                 .reverse = o.reverse,
                 .bidirectional = o.bidirectional,
                 .stateful = o.stateful,
                 .activation = o.cell_options.activation,
                 .bias = o.cell_options.bias};
  impl->inputs = {sequence};
  impl->dtype = sequence.dtype();
  impl->name = unique_name("rnn", name);
  if (o.bidirectional) {
    for (const char* d : {"forward", "backward"}) {
      auto child = std::make_shared<State>();
      add_cell_params(*child, o.cell, sequence.n_units(), n, o.cell_options, sequence.dtype());
      impl->state->add_child(d, child);
    }
  } else {
    add_cell_params(*impl->state, o.cell, sequence.n_units(), n, o.cell_options, sequence.dtype());
  }
  impl->shape = detail::shape_by_rule(*impl, {sequence});
  static_cast<Layer&>(*this) = Layer(impl);
}

void RNN::reset_state() const { static_cast<RNNImpl&>(*impl()).data->kept = Tensor(); }

namespace {

CellOptions cell_options(const CellAttributes& a) { return {.activation = a.activation, .bias = a.bias}; }

}  // namespace

void detail::register_recurrent_layers(AddKind add) {
  add("RNNCell", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(2, 2);
    const auto a = read_attributes<CellAttributes>(s.options);
    return RNNCell(s.inputs[0], s.inputs[1], a.n_units, cell_options(a), s.name);
  }, {write_attributes(CellAttributes{})});
  add("LSTMCell", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(2, 2);
    const auto a = read_attributes<CellAttributes>(s.options);
    return LSTMCell(s.inputs[0], s.inputs[1], a.n_units, cell_options(a), s.name);
  }, {write_attributes(CellAttributes{})});
  add("GRUCell", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(2, 2);
    const auto a = read_attributes<CellAttributes>(s.options);
    return GRUCell(s.inputs[0], s.inputs[1], a.n_units, cell_options(a), s.name);
  }, {write_attributes(CellAttributes{})});
  add("RNN", [](const LayerSpec& s) -> Layer {
    const auto a = read_attributes<RNNAttributes>(s.options);
    const std::optional<CellKind> cell = cell_by_name(a.cell);
    if (!cell) s.options.fail("has unknown cell '" + a.cell + "' (valid: RNN, LSTM, GRU)");
    RNNOptions o;
    o.cell = *cell;
    o.return_sequences = a.return_sequences;
    o.reverse = a.reverse;
    o.bidirectional = a.bidirectional;
    o.stateful = a.stateful;
    o.cell_options = {.activation = a.activation, .bias = a.bias};
    return RNN(s.input(), a.n_units, o, s.name);
  }, {write_attributes(RNNAttributes{})});
}

}  // namespace loom::nn
