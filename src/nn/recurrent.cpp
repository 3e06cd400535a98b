#include "loom/nn/recurrent.h"

#include "loom/nn/lambda.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/recurrent.h"
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

struct CellImpl final : LayerBase<CellImpl> {
  CellKind cell = CellKind::RNN;
  int64_t n_units = 0;
  ActivationFn act = tanh;
  const char* kind() const override {
    return cell == CellKind::LSTM ? "LSTMCell" : cell == CellKind::GRU ? "GRUCell" : "RNNCell";
  }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    return cell_step(cell, *state, act, input_projection(cell, *state, in[0]), in[1], n_units);
  }
  Options options() const override {
    return Options().set_int("n_units", n_units).set_string("activation", act.name).set_bool("bias", state->has_param("b_ih"));
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
  impl->cell = kind;
  impl->n_units = n;
  impl->act = o.activation;
  impl->inputs = {input, st};
  impl->shape = st.shape();
  impl->dtype = input.dtype();
  impl->name = unique_name(std::string(what) + "_cell", name);
  add_cell_params(*impl->state, kind, input.n_units(), n, o, input.dtype());
  return impl;
}

struct RNNData {
  Tensor kept;  // final state of the previous call (stateful)
};

struct RNNImpl final : LayerBase<RNNImpl> {
  RNNOptions opt;
  int64_t n_units = 0;
  std::shared_ptr<RNNData> data = std::make_shared<RNNData>();
  const char* kind() const override { return "RNN"; }

  // Runs one direction; returns the outputs per step (h) and leaves the final state in `last`.
  std::vector<Tensor> run(const State& s, const Tensor& x, bool backwards, Tensor init, Tensor& last) const {
    const int64_t B = x.dim(0), T = x.dim(1), n = n_units;
    // one GEMM for all steps; unbind: backward gathers the steps' gradients into one tensor
    const std::vector<Tensor> xw = unbind(input_projection(opt.cell, s, x), 1);
    Tensor st = init.defined() ? init : zeros({B, opt.cell == CellKind::LSTM ? 2 * n : n}, x.dtype(), x.device());
    std::vector<Tensor> outs(static_cast<size_t>(T));
    for (int64_t k = 0; k < T; ++k) {
      const int64_t t = backwards ? T - 1 - k : k;
      st = cell_step(opt.cell, s, opt.cell_options.activation, xw[t], st, n);
      outs[t] = opt.cell == CellKind::LSTM ? slice(st, -1, 0, n) : st;
    }
    last = st;
    return outs;
  }

  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    const Tensor& x = in[0];
    if (x.ndim() != 3)
      throw ShapeError("RNN '" + name + "': expects (batch, time, features), got " + shape_str(x.shape()));
    std::vector<const State*> dirs{opt.bidirectional ? state->children()[0].second.get() : state.get()};
    if (opt.bidirectional) dirs.push_back(state->children()[1].second.get());
    std::vector<Tensor> results, finals;
    for (size_t d = 0; d < dirs.size(); ++d) {
      Tensor init;
      if (opt.stateful && data->kept.defined()) init = split(data->kept, static_cast<int64_t>(dirs.size()), -1)[d];
      if (init.defined() && init.dim(0) != x.dim(0)) init = Tensor();  // batch size changed: start afresh
      Tensor last;
      std::vector<Tensor> outs = run(*dirs[d], x, opt.reverse != (d == 1), init, last);
      finals.push_back(last);
      results.push_back(opt.return_sequences ? stack(outs, 1) : outs[opt.reverse != (d == 1) ? 0 : outs.size() - 1]);
    }
    if (opt.stateful) data->kept = concatenate(finals, -1).detach();
    return results.size() == 1 ? results[0] : concatenate(results, -1);
  }
  Options options() const override {
    return Options()
        .set_string("cell", cell_name(opt.cell))
        .set_int("n_units", n_units)
        .set_bool("return_sequences", opt.return_sequences)
        .set_bool("reverse", opt.reverse)
        .set_bool("bidirectional", opt.bidirectional)
        .set_bool("stateful", opt.stateful)
        .set_string("activation", opt.cell_options.activation.name)
        .set_bool("bias", opt.cell_options.bias);
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
  impl->opt = o;
  impl->n_units = n;
  impl->inputs = {sequence};
  impl->dtype = sequence.dtype();
  impl->name = unique_name("rnn", name);
  const int64_t units = o.bidirectional ? 2 * n : n;
  impl->shape = o.return_sequences ? Shape{sequence.shape()[0], sequence.shape()[1], units} : Shape{sequence.shape()[0], units};
  if (o.bidirectional) {
    for (const char* d : {"forward", "backward"}) {
      auto child = std::make_shared<State>();
      add_cell_params(*child, o.cell, sequence.n_units(), n, o.cell_options, sequence.dtype());
      impl->state->add_child(d, child);
    }
  } else {
    add_cell_params(*impl->state, o.cell, sequence.n_units(), n, o.cell_options, sequence.dtype());
  }
  static_cast<Layer&>(*this) = Layer(impl);
}

void RNN::reset_state() const { static_cast<RNNImpl&>(*impl()).data->kept = Tensor(); }

namespace {
constexpr int64_t kMaxUnits = int64_t{1} << 40;  // units read from a file

CellOptions cell_options(const Options& o) {
  CellOptions c;
  c.activation = activation_by_name(o.get_string("activation"));
  c.bias = o.get_bool("bias");
  return c;
}
}  // namespace

void detail::register_recurrent_layers(AddKind add) {
  add("RNNCell", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(2, 2);
    return RNNCell(s.inputs[0], s.inputs[1], s.options.get_int("n_units", 1, kMaxUnits), cell_options(s.options), s.name);
  });
  add("LSTMCell", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(2, 2);
    return LSTMCell(s.inputs[0], s.inputs[1], s.options.get_int("n_units", 1, kMaxUnits), cell_options(s.options), s.name);
  });
  add("GRUCell", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(2, 2);
    return GRUCell(s.inputs[0], s.inputs[1], s.options.get_int("n_units", 1, kMaxUnits), cell_options(s.options), s.name);
  });
  add("RNN", [](const LayerSpec& s) -> Layer {
    RNNOptions o;
    const std::string cell = s.options.get_string("cell");
    if (cell == "RNN") o.cell = CellKind::RNN;
    else if (cell == "LSTM") o.cell = CellKind::LSTM;
    else if (cell == "GRU") o.cell = CellKind::GRU;
    else s.options.fail("has unknown cell '" + cell + "' (valid: RNN, LSTM, GRU)");
    o.return_sequences = s.options.get_bool("return_sequences");
    o.reverse = s.options.get_bool("reverse");
    o.bidirectional = s.options.get_bool("bidirectional");
    o.stateful = s.options.get_bool("stateful");
    o.cell_options = cell_options(s.options);
    return RNN(s.input(), s.options.get_int("n_units", 1, kMaxUnits), o, s.name);
  });
}

}  // namespace loom::nn
