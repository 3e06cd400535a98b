// ONNX import, recurrent nodes (importer.h, import_patterns.h): LSTM, GRU and RNN (time-major,
// layout 0) as Loom's RNN layer over (batch, time, features), with the Transposes, Reshapes and
// Squeezes that Loom's exporter and torch.onnx write around them, and the zero initial states
// torch computes (ConstantOfShape and the shape arithmetic behind it), which are Loom's own.
#include "io/onnx/importer.h"

#include <functional>

#include "loom/core/error.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"

namespace loom::io::detail {

bool Importer::is_recurrent(const onnx::NodeProto& n) {
  return n.domain().empty() && (n.op_type() == "LSTM" || n.op_type() == "GRU" || n.op_type() == "RNN");
}

bool Importer::all_zero(const std::string& v) const {
  if (zeros_.count(v)) return true;
  auto it = consts_.find(v);
  return it != consts_.end() && it->second.numel() > 0 && max(abs(it->second.astype(DType::Float64))).item<double>() == 0;
}

// Values that are all zeros (torch.onnx writes an LSTM's initial states as ConstantOfShape(0),
// sliced per layer); recurrent nodes' zero initial states are Loom's RNN's own, so the nodes
// that exist only to compute them (Shape, Gather, Concat, ...) are not imported.
void Importer::find_zero_states() {
  for (const auto& n : g_.node()) {
    if (!n.domain().empty() || n.output_size() != 1) continue;
    bool zero = false;
    if (n.op_type() == "ConstantOfShape") {
      zero = true;
      for (const auto& a : n.attribute())
        zero = zero && a.name() == "value" && a.has_t() && a.t().data_type() == onnx::TensorProto::FLOAT &&
               ((a.t().float_data_size() == 1 && a.t().float_data(0) == 0.0f) ||
                (a.t().raw_data().size() == 4 && std::string(4, '\0') == a.t().raw_data()));
    } else if ((n.op_type() == "Slice" || n.op_type() == "Squeeze" || n.op_type() == "Unsqueeze" || n.op_type() == "Expand" ||
                n.op_type() == "Identity") &&
               n.input_size() >= 1) {
      zero = all_zero(n.input(0));
    }
    if (zero) zeros_.insert(n.output(0));
  }
  std::set<std::pair<int, int>> ignored;
  for (int k = 0; k < g_.node_size(); ++k) {
    const auto& n = g_.node(k);
    if (!is_recurrent(n)) continue;
    for (int i : {5, 6})
      if (i < n.input_size() && !n.input(i).empty() && all_zero(n.input(i))) ignored.insert({k, i});
  }
  if (ignored.empty()) return;
  const auto live = [&](bool ignore) {
    std::vector<bool> l(static_cast<size_t>(g_.node_size()), false);
    std::unordered_set<std::string> needed;
    for (const auto& o : g_.output()) needed.insert(o.name());
    for (int k = g_.node_size() - 1; k >= 0; --k) {
      const auto& n = g_.node(k);
      for (const auto& o : n.output()) l[static_cast<size_t>(k)] = l[static_cast<size_t>(k)] || (!o.empty() && needed.count(o));
      if (!l[static_cast<size_t>(k)]) continue;
      for (int i = 0; i < n.input_size(); ++i)
        if (!(ignore && ignored.count({k, i}))) needed.insert(n.input(i));
    }
    return l;
  };
  const std::vector<bool> with = live(false), without = live(true);
  for (int k = 0; k < g_.node_size(); ++k)
    if (with[static_cast<size_t>(k)] && !without[static_cast<size_t>(k)]) done_.insert(k);
}

// Every reader of `v` is a recurrent node reading it as its sequence X (and no graph output).
bool Importer::read_as_sequence_only(const std::string& v) const {
  if (!uses_.count(v)) return false;
  for (const auto& o : g_.output())
    if (o.name() == v) return false;
  auto it = readers_.find(v);
  if (it == readers_.end()) return false;
  for (const auto& [k, i] : it->second)
    if (i != 0 || !is_recurrent(g_.node(k))) return false;
  return true;
}

// LSTM, GRU, RNN (time-major, layout 0) -> Loom's RNN layer over (batch, time, features). X
// must be the Transpose (1, 0, 2) of a batch-first value or another recurrent node's time-major
// output; Y is read through the forms Loom's exporter and torch.onnx write (recurrent_readers), or Y_h.
void Importer::import_rnn(const std::string& op) {
  const RecurrentNode r = recurrent_node(op);
  const auto used = [&](int k) { return node_->output_size() > k && !node_->output(k).empty() && uses_.count(node_->output(k)) > 0; };
  if (used(2)) throw Unsupported("Y_c (the last cell state) is used; Loom's RNN layer gives the outputs Y or the last state Y_h");
  if (used(0) && used(1)) throw Unsupported("both Y and Y_h are used; Loom's RNN layer gives one of them");
  if (!used(0) && !used(1)) return;
  const RecurrentReaders readers = used(0) ? y_readers(r.dirs) : y_h_readers(r.dirs);
  nn::RNNOptions o{.cell = op == "LSTM" ? nn::CellKind::LSTM : op == "GRU" ? nn::CellKind::GRU : nn::CellKind::RNN,
                   .cell_options = {.activation = r.act, .bias = r.b.defined()},
                   .return_sequences = used(0),
                   .reverse = r.direction == "reverse",
                   .bidirectional = r.dirs == 2};
  nn::RNN l(r.x, r.n, o, unique(readers.batch_first.empty() ? readers.time_major : readers.batch_first));
  set_recurrent_params(l, r);
  for (int k : readers.chain) done_.insert(k);
  if (!readers.batch_first.empty()) set(readers.batch_first, l);
  else time_major_[readers.time_major] = l;
}

// The recurrent node being imported, checked: its attributes, its input, its weights and its
// activations (in this order: the first thing Loom cannot express is the reason given).
RecurrentNode Importer::recurrent_node(const std::string& op) {
  only_attrs({"hidden_size", "direction", "activations", "linear_before_reset", "layout", "clip", "input_forget", "activation_alpha", "activation_beta"});
  if (attr("clip")) throw Unsupported("clip (Loom's cells do not clip)");
  if (attr("activation_alpha") || attr("activation_beta")) throw Unsupported("activation_alpha / activation_beta (Loom's activations take none)");
  if (attr_int("layout", 0) != 0) throw Unsupported("layout " + std::to_string(attr_int("layout", 0)) + " (imported: layout 0, time-major)");
  if (attr_int("input_forget", 0) != 0) throw Unsupported("input_forget = 1 (Loom's LSTM has separate input and forget gates)");
  RecurrentNode r;
  r.op = op;
  r.direction = attr_string("direction", "forward");
  if (r.direction != "forward" && r.direction != "reverse" && r.direction != "bidirectional") throw Unsupported("direction '" + r.direction + "'");
  r.dirs = r.direction == "bidirectional" ? 2 : 1;
  r.gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  recurrent_weights(r);
  if (has_input(4)) throw Unsupported("sequence_lens (Loom's RNN runs every sequence to its end)");
  for (size_t i : {size_t{5}, size_t{6}})
    if (has_input(i) && (i == 5 || op == "LSTM") && !all_zero(node_->input(static_cast<int>(i))))
      throw Unsupported(std::string(i == 5 ? "initial_h" : "initial_c") + " is not zeros (Loom's RNN starts from zeros)");
  if (op == "LSTM" && has_input(7)) throw Unsupported("peepholes (P): Loom's LSTM has none");
  r.act = recurrent_activation(op, r.dirs);
  if (op != "GRU" && attr("linear_before_reset")) throw Unsupported("linear_before_reset on an " + op);
  return r;
}

// W, R and B of the node, their shapes checked against X's features and R's hidden size.
void Importer::recurrent_weights(RecurrentNode& r) {
  r.w = constant(1, "W");
  r.r = constant(2, "R");
  auto tm = time_major_.find(node_->input(0));
  if (tm == time_major_.end())
    throw Unsupported("its input X '" + node_->input(0) +
                      "' is not the Transpose (1, 0, 2) of a batch-first value nor another recurrent node's output (Loom's RNN reads (batch, time, features))");
  r.x = floating(tm->second);
  const Tensor &w = r.w, &rw = r.r;
  const int64_t dirs = r.dirs, gates = r.gates;
  if (rw.ndim() != 3 || rw.shape()[0] != dirs || rw.shape()[2] < 1 || rw.shape()[1] != gates * rw.shape()[2])
    throw Unsupported("R of the shape " + shape_str(rw.shape()) + " (valid: (" + std::to_string(dirs) + ", " + std::to_string(gates) + " n, n))");
  r.n = rw.shape()[2];
  if (attr("hidden_size") && attr_int("hidden_size", 0) != r.n)
    throw Unsupported("hidden_size " + std::to_string(attr_int("hidden_size", 0)) + " disagrees with R's " + std::to_string(r.n));
  r.features = r.x.shape()[2];
  if (w.ndim() != 3 || w.shape()[0] != dirs || w.shape()[1] != gates * r.n || w.shape()[2] != r.features)
    throw Unsupported("W of the shape " + shape_str(w.shape()) + " for an input of " + std::to_string(r.features) + " features (valid: (" +
                      std::to_string(dirs) + ", " + std::to_string(gates * r.n) + ", " + std::to_string(r.features) + "))");
  if (has_input(3)) {
    r.b = constant(3, "B");
    if (r.b.shape() != Shape{dirs, 2 * gates * r.n}) throw Unsupported("B of the shape " + shape_str(r.b.shape()));
  }
}

// The cell's activation: ONNX's defaults for LSTM and GRU (and PyTorch's GRU, linear_before_reset
// 1), or an RNN's tanh / relu / sigmoid, the same in both directions.
nn::ActivationFn Importer::recurrent_activation(const std::string& op, int64_t dirs) const {
  const std::vector<std::string> acts = attr("activations") ? std::vector<std::string>(attr("activations")->strings().begin(), attr("activations")->strings().end())
                                                            : std::vector<std::string>{};
  if (op == "LSTM" || op == "GRU") {
    std::vector<std::string> want = op == "LSTM" ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"} : std::vector<std::string>{"Sigmoid", "Tanh"};
    std::vector<std::string> all;
    for (int64_t d = 0; d < dirs; ++d) all.insert(all.end(), want.begin(), want.end());
    if (!acts.empty() && acts != all) throw Unsupported("activations other than " + op + "'s defaults (Loom's " + op + " cell has those)");
    if (op == "GRU" && attr_int("linear_before_reset", 0) != 1)
      throw Unsupported("linear_before_reset = 0 (Loom's GRU, as PyTorch's, applies the reset gate after the recurrent product: 1)");
    return nn::tanh;
  }
  if (attr("linear_before_reset")) throw Unsupported("linear_before_reset on an RNN");
  const std::string a = acts.empty() ? "Tanh" : acts[0];
  for (const std::string& s : acts)
    if (s != a) throw Unsupported("different activations per direction");
  if (acts.size() > static_cast<size_t>(dirs)) throw Unsupported(std::to_string(acts.size()) + " activations for " + std::to_string(dirs) + " directions");
  if (a == "Tanh") return nn::tanh;
  if (a == "Relu") return nn::relu;
  if (a == "Sigmoid") return nn::sigmoid;
  throw Unsupported("the activation '" + a + "' (imported: Tanh, Relu, Sigmoid)");
}

// What reads Y (time, dirs, batch, n) back batch-first (a value of Loom's layer) or time-major (for
// the next recurrent node): Loom's exporter's Transpose (2, 0, 1, 3) and Reshape (0, 0, -1), or
// torch.onnx's Squeeze of axis 1 (one direction) or Transpose (0, 2, 1, 3) and Reshape (0, 0, -1),
// then a Transpose (1, 0, 2) or recurrent nodes.
RecurrentReaders Importer::y_readers(int64_t dirs) const {
  const std::string& y = node_->output(0);
  RecurrentReaders out;
  std::vector<int> c;
  const onnx::NodeProto* t = follow(y, "Transpose", perm_is({2, 0, 1, 3}), c);  // Loom's exporter
  const onnx::NodeProto* r = t ? follow(t->output(0), "Reshape", reshape_to({0, 0, -1}), c) : nullptr;
  if (r) {
    out.batch_first = r->output(0);
    out.chain = c;
    return out;
  }
  c.clear();  // torch.onnx
  const onnx::NodeProto* s = dirs == 1 ? follow(y, "Squeeze", squeeze_axis(1), c) : nullptr;
  if (!s) {
    c.clear();
    const onnx::NodeProto* t2 = follow(y, "Transpose", perm_is({0, 2, 1, 3}), c);
    s = t2 ? follow(t2->output(0), "Reshape", reshape_to({0, 0, -1}), c) : nullptr;
  }
  if (!s) throw Unsupported("its output Y is read otherwise than as Loom's exporter or torch.onnx write it (Transpose (2, 0, 1, 3) and Reshape (0, 0, -1); Squeeze of axis 1; Transpose (0, 2, 1, 3) and Reshape (0, 0, -1))");
  out.chain = c;
  const onnx::NodeProto* back = follow(s->output(0), "Transpose", perm_is({1, 0, 2}), out.chain);
  if (back) out.batch_first = back->output(0);
  else if (read_as_sequence_only(s->output(0))) out.time_major = s->output(0);
  else throw Unsupported("its time-major output '" + s->output(0) + "' is read by other than a Transpose (1, 0, 2) or recurrent nodes");
  return out;
}

// What reads Y_h (dirs, batch, n) back batch-first: Transpose (1, 0, 2) and Reshape (0, -1), or
// Squeeze of axis 0 (one direction).
RecurrentReaders Importer::y_h_readers(int64_t dirs) const {
  const std::string& yh = node_->output(1);
  RecurrentReaders out;
  const onnx::NodeProto* t = follow(yh, "Transpose", perm_is({1, 0, 2}), out.chain);
  const onnx::NodeProto* r = t ? follow(t->output(0), "Reshape", reshape_to({0, -1}), out.chain) : nullptr;
  if (!r && dirs == 1) {
    out.chain.clear();
    r = follow(yh, "Squeeze", squeeze_axis(0), out.chain);
  }
  if (!r) throw Unsupported("its output Y_h is read otherwise than as (Transpose (1, 0, 2), Reshape (0, -1)) or Squeeze of axis 0 (one direction)");
  out.batch_first = r->output(0);
  return out;
}

// The layer's weights from W, R and B: ONNX's gate blocks reordered to Loom's (PyTorch's), per
// direction, transposed to (in, G n).
void Importer::set_recurrent_params(const nn::Layer& l, const RecurrentNode& r) {
  const int64_t n = r.n, gates = r.gates;
  // Loom's block j is ONNX's block order[j]
  const std::vector<int64_t> order = r.op == "LSTM" ? std::vector<int64_t>{0, 2, 3, 1} : r.op == "GRU" ? std::vector<int64_t>{1, 0, 2} : std::vector<int64_t>{0};
  const auto loom_blocks = [&](const Tensor& t) {  // (..., G n) in ONNX's order -> Loom's
    std::vector<Tensor> parts;
    for (int64_t g : order) parts.push_back(slice(t, -1, g * n, (g + 1) * n));
    return concatenate(parts, -1).contiguous();
  };
  for (int64_t d = 0; d < r.dirs; ++d) {
    const std::string prefix = r.dirs == 2 ? (d == 0 ? "forward/" : "backward/") : "";
    param(l, prefix + "w_ih", loom_blocks(transpose(slice(r.w, 0, d, d + 1).reshape({gates * n, r.features}))));
    param(l, prefix + "w_hh", loom_blocks(transpose(slice(r.r, 0, d, d + 1).reshape({gates * n, n}))));
    if (r.b.defined()) {
      const Tensor bd = slice(r.b, 0, d, d + 1).reshape({2 * gates * n});
      param(l, prefix + "b_ih", loom_blocks(slice(bd, 0, 0, gates * n)));
      param(l, prefix + "b_hh", loom_blocks(slice(bd, 0, gates * n, 2 * gates * n)));
    }
  }
}

std::vector<Converter> Importer::recurrent_converters() {
  const auto rnn = [](Importer& im) { im.import_rnn(im.node_->op_type()); };
  return {
      {"", "LSTM", kFirstOpset, kLastOpset, true, rnn},
      {"", "GRU", kFirstOpset, kLastOpset, true, rnn},
      {"", "RNN", kFirstOpset, kLastOpset, true, rnn},
  };
}

}  // namespace loom::io::detail
