// ONNX import (loom/io/onnx.h, docs/onnx.md): each node of the model's graph, in its order, as
// a Loom layer (node patterns as one layer: MatMul + Add -> Linear, GlobalAveragePool + Flatten ->
// GlobalPool, gelu's formula, the exporter's adaptive pooling, recurrent nodes with their
// transposes, attention blocks -> MultiHeadAttention / TransformerEncoderLayer); every node no
// layer expresses is collected, and the model is refused
// with all of them at once. The reading of untrusted bytes is onnx_read.cpp's.
#include <algorithm>
#include <array>
#include <charconv>
#include <functional>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "io/onnx_read.h"
#include "loom/core/error.h"
#include "loom/core/grad_mode.h"
#include "loom/io/model.h"
#include "loom/io/onnx.h"
#include "loom/nn/layers.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"

namespace loom::io {

namespace {

// What the importer claims (docs/onnx.md, "Import"); the conformance test runs every
// libonnx-testdata case made of these only.
const std::vector<std::string> kClaimed = {
    "Add",         "AveragePool", "BatchNormalization", "Concat",  "Constant",  "Conv",      "ConvTranspose", "Dropout",   "Elu",
    "Flatten",     "GRU",         "Gather",             "Gemm",    "GlobalAveragePool",  "GlobalMaxPool", "Identity", "LSTM", "LayerNormalization",
    "LeakyRelu",   "LogSoftmax",  "MatMul",             "MaxPool", "Mean",      "Mul",       "OneHot",    "RNN",     "Relu",
    "Reshape",     "Sigmoid",     "Slice",   "Softmax",            "Softplus", "Sub",      "Sum",       "Tanh",      "Transpose",
    "Clip",        "HardSigmoid", "HardSwish",          "Pad",     "ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum"};

// Sizes an attribute may give (pads, strides, dilations, kernel sizes): bounded, so that a hostile
// file cannot make a layer's output shape enormous.
constexpr int64_t kMaxAttr = int64_t{1} << 20;

// A node that cannot be imported: why (collected, reported with every other at once).
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The double a float attribute stands for: its shortest decimal form (1e-5f -> 1e-5), so that
// a value Loom wrote as float comes back as the double it was.
double float_attr(float f) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);
  double d = f;
  std::from_chars(buf, r.ptr, d);
  return d;
}

class Importer {
 public:
  Importer(const onnx::ModelProto& m, std::string folder, const OnnxImportOptions& options)
      : m_(m), g_(m.graph()), folder_(std::move(folder)) {
    if (options.max_tensor_bytes < 0)
      throw ValueError("import_onnx: OnnxImportOptions::max_tensor_bytes is " + std::to_string(options.max_tensor_bytes) +
                       " (valid: 0 for the machine's physical memory, or a number of bytes)");
    reads_.max_bytes = static_cast<uint64_t>(options.max_tensor_bytes);
  }

  Graph run() {
    check_versions();
    check_single_writers();
    opset_ = 0;
    for (const auto& o : m_.opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = o.version();
    if (opset_ == 0) opset_ = 1;
    if (opset_ > 17) failures_.push_back("the model's opset " + std::to_string(opset_) + " is past 17, the last one Loom reads");
    for (const auto& t : g_.initializer()) {
      if (t.name().empty()) throw IOError("import_onnx: an initializer has no name");
      consts_[t.name()] = detail::to_tensor(t, folder_, reads_);
    }
    if (g_.sparse_initializer_size() > 0) failures_.push_back("sparse initializers are not imported");
    std::vector<nn::Layer> inputs;
    for (const auto& v : g_.input()) {
      if (consts_.count(v.name())) {
        // an initializer listed as an input: from IR 4 on, a default the caller may override
        // (ONNX IR); before, every initializer was listed so, and is a constant
        if (m_.ir_version() >= 4) defaults_.insert(v.name());
        continue;
      }
      inputs.push_back(make_input(v));
    }
    for (const auto& n : g_.node())
      for (const auto& i : n.input()) ++uses_[i];
    for (const auto& o : g_.output()) ++uses_[o.name()];
    // Constant nodes first (they read nothing): patterns look ahead at constants defined later.
    // Identity nodes of constants too: torch.onnx writes a weight shared by several layers (or
    // equal in them: nn.TransformerEncoder's copies of its layer) once, read through Identity
    // nodes, and the patterns need the weights behind them.
    for (int k = 0; k < g_.node_size(); ++k) {
      const onnx::NodeProto& n = g_.node(k);
      if (n.op_type() == "Identity" && n.domain().empty() && n.input_size() == 1 && consts_.count(n.input(0)) && n.attribute_size() == 0 &&
          n.output_size() == 1 && !n.output(0).empty() && !is_graph_output(n.output(0))) {
        consts_[n.output(0)] = consts_.at(n.input(0));
        done_.insert(k);
        continue;
      }
      if (n.op_type() != "Constant" || !n.domain().empty()) continue;
      node_ = &n;
      index_ = k;
      try {
        import_constant();
        done_.insert(k);
      } catch (const Unsupported&) {  // reported by the loop below
      }
    }
    for (int k = 0; k < g_.node_size(); ++k) {
      for (const auto& o : g_.node(k).output())
        if (!o.empty()) producer_[o] = k;
      for (int i = 0; i < g_.node(k).input_size(); ++i) readers_[g_.node(k).input(i)].push_back({k, i});
    }
    find_zero_states();
    find_adaptive_pools();
    find_attention();
    find_shape_arithmetic();
    for (int k = 0; k < g_.node_size(); ++k) {
      if (done_.count(k)) continue;
      const onnx::NodeProto& n = g_.node(k);
      node_ = &n;
      index_ = k;
      bool poisoned = false;
      for (const auto& i : n.input())
        if (poisoned_.count(i)) poisoned = true;
      // a node of an operator no converter reads is listed by its operator, wherever it is (also
      // downstream of a refused node, which cannot be examined further)
      if (!has_converter(n)) {
        unsupported(n);
        poison(n);
        continue;
      }
      if (poisoned) {
        poison(n);
        continue;
      }
      try {
        import_node(n);
      } catch (const Unsupported& e) {
        failures_.push_back(n.op_type() + " (node '" + node_name(n) + "'): " + e.what());
        poison(n);
      } catch (const Error& e) {  // a layer refusing its configuration
        failures_.push_back(n.op_type() + " (node '" + node_name(n) + "'): " + e.what());
        poison(n);
      }
    }
    std::vector<nn::Layer> outputs;
    for (const auto& o : g_.output()) {
      if (poisoned_.count(o.name())) continue;
      auto it = values_.find(o.name());
      if (it == values_.end()) {
        if (consts_.count(o.name())) failures_.push_back("the output '" + o.name() + "' is a constant (not imported)");
        else failures_.push_back("the output '" + o.name() + "' is computed by no node");
        continue;
      }
      nn::Layer l = it->second;
      if (l.name() != sanitize(o.name()) || is_input(l)) l = nn::Activation(l, nn::identity, unique(o.name()));  // the output's name
      outputs.push_back(l);
    }
    if (!failures_.empty() || !unsupported_.empty()) {
      size_t count = failures_.size();
      std::string ops;
      for (const auto& [op, u] : unsupported_) {
        count += static_cast<size_t>(u.count);
        ops += (ops.empty() ? "" : ", ") + op + " (" + std::to_string(u.count) + (u.count == 1 ? " node: '" : " nodes, the first '") + u.first + "')";
      }
      std::string msg = "import_onnx: " + std::to_string(count) + " node" + (count == 1 ? "" : "s") + " cannot be imported:";
      if (!unsupported_.empty())
        msg += "\n  operators Loom has no layer for (" + std::to_string(unsupported_.size()) + "; docs/onnx.md lists the imported ones): " + ops;
      for (const std::string& f : failures_) msg += "\n  " + f;
      throw ValueError(msg);
    }
    if (outputs.empty()) throw ValueError("import_onnx: the model has no outputs");
    Graph graph = Graph::build(outputs, inputs);
    TensorMap state = graph_state(graph);
    NoGrad off;
    for (const auto& [key, t] : pending_) {
      auto it = state.find(key);
      if (it == state.end()) continue;  // a layer the graph does not reach
      Tensor dst = it->second;
      if (dst.shape() != t.shape())
        throw ValueError("import_onnx: '" + key + "' has the shape " + shape_str(t.shape()) + ", its layer's is " + shape_str(dst.shape()));
      dst.copy_(t.astype(dst.dtype()));
    }
    return graph;
  }

 private:
  const onnx::ModelProto& m_;
  const onnx::GraphProto& g_;
  std::string folder_;
  detail::ExternalReads reads_;
  int64_t opset_ = 0;
  std::map<std::string, Tensor> consts_;
  std::unordered_map<std::string, nn::Layer> values_;
  std::unordered_map<std::string, int> uses_;
  std::unordered_set<std::string> poisoned_, names_;
  std::set<int> done_;
  std::vector<std::pair<std::string, Tensor>> pending_;  // graph_state key -> value
  std::vector<std::string> failures_;
  std::unordered_set<const nn::LayerImpl*> inputs_;
  std::unordered_set<const nn::LayerImpl*> batchless_;  // layers computed from constants only (no batch axis)
  std::unordered_map<std::string, int> producer_;  // value -> the node computing it
  std::unordered_map<std::string, std::vector<std::pair<int, int>>> readers_;  // value -> (node, input index) reading it
  std::unordered_set<std::string> zeros_;           // values known to be all zeros (recurrent initial states)
  // (time, batch, features) values: the batch-first layer they transpose (read by recurrent nodes only)
  std::unordered_map<std::string, nn::Layer> time_major_;
  struct Adaptive {
    std::string x;
    int64_t oh, ow;
  };
  std::map<int, Adaptive> adaptive_;  // the exporter's adaptive pooling, by the index of its last node
  const onnx::NodeProto* node_ = nullptr;
  int index_ = 0;

  // operator -> how many nodes of it and the first one's name, in the order first met
  struct UnsupportedOp {
    int64_t count = 0;
    std::string first;
  };
  std::vector<std::pair<std::string, UnsupportedOp>> unsupported_;
  // a Pad's output folded into the AveragePool reading it: the padded layer and the pads (begins, ends)
  std::unordered_map<std::string, std::pair<nn::Layer, std::vector<int64_t>>> folded_pads_;
  // integer values computed from shapes (Shape, then Gather, Concat, ...), read only by other such
  // nodes and by Reshape's target shape, which evaluates them at import (find_shape_arithmetic)
  std::unordered_set<std::string> shape_values_;
  std::unordered_set<std::string> defaults_;  // initializers that are also graph inputs (IR >= 4)

  // The model's IR version is one libonnx reads (a newer one may change what fields mean).
  void check_versions() const {
    if (m_.ir_version() > onnx::IR_VERSION)
      throw ValueError("import_onnx: the model's IR version " + std::to_string(m_.ir_version()) + " is newer than " +
                       std::to_string(static_cast<int>(onnx::IR_VERSION)) + ", the last one Loom's ONNX library reads");
  }
  // Each value is defined once (ONNX graphs are in single static assignment form, which
  // onnx.checker and ONNX Runtime enforce): an initializer, a graph input, or one node's output.
  // Two definitions would leave which one a reader sees to the order of the file.
  void check_single_writers() const {
    std::unordered_map<std::string, std::string> defined;  // value -> what defines it, for the message
    for (const auto& t : g_.initializer())
      if (!t.name().empty() && !defined.emplace(t.name(), "an initializer").second)
        throw ValueError("import_onnx: two initializers are named '" + t.name() + "' (each value of an ONNX graph is defined once)");
    for (const auto& v : g_.input()) {
      auto [it, fresh] = defined.emplace(v.name(), "a graph input");
      if (!fresh && it->second != "an initializer")  // an initializer listed as an input is its default
        throw ValueError("import_onnx: two graph inputs are named '" + v.name() + "' (each value of an ONNX graph is defined once)");
    }
    for (const auto& n : g_.node())
      for (const auto& o : n.output()) {
        if (o.empty()) continue;
        const std::string here = "node '" + node_name(n) + "' (" + n.op_type() + ")";
        auto [it, fresh] = defined.emplace(o, here);
        if (!fresh)
          throw ValueError("import_onnx: the value '" + o + "' is written by " + here + " and also by " + it->second +
                           " (each value of an ONNX graph is defined once)");
      }
  }
  // Whether import_node has a converter for the node's operator (its conditions aside).
  static bool has_converter(const onnx::NodeProto& n) {
    static const std::unordered_set<std::string> ops = {
        "Add", "AveragePool", "BatchNormalization", "Concat", "Constant", "Conv", "ConvTranspose", "Div" /* in gelu's formula */, "Dropout", "Elu",
        "Flatten", "GRU", "Gather", "Gemm", "GlobalAveragePool", "GlobalMaxPool", "Identity", "LSTM", "LayerNormalization", "LeakyRelu",
        "LogSoftmax", "MatMul", "MaxPool", "Mean", "Mul", "OneHot", "RNN", "Relu", "Reshape", "Sigmoid", "Slice", "Softmax", "Softplus",
        "Sub", "Sum", "Tanh", "Transpose", "Clip", "HardSigmoid", "HardSwish", "Pad", "ReduceMax", "ReduceMean", "ReduceMin",
        "ReduceSum"};
    return (n.domain().empty() || n.domain() == "ai.onnx") && ops.count(n.op_type()) > 0;
  }
  void unsupported(const onnx::NodeProto& n) {
    const std::string op = n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type() : n.domain() + "." + n.op_type();
    auto it = std::find_if(unsupported_.begin(), unsupported_.end(), [&](const auto& u) { return u.first == op; });
    if (it == unsupported_.end()) {
      unsupported_.emplace_back(op, UnsupportedOp{0, node_name(n)});
      it = std::prev(unsupported_.end());
    }
    ++it->second.count;
  }

  bool is_input(const nn::Layer& l) const { return inputs_.count(l.impl().get()) > 0; }
  static std::string node_name(const onnx::NodeProto& n) {
    if (!n.name().empty()) return n.name();
    for (const auto& o : n.output())
      if (!o.empty()) return o;  // the first output that has a name (an LSTM's Y may be omitted)
    return "?";
  }
  void poison(const onnx::NodeProto& n) {
    for (const auto& o : n.output()) poisoned_.insert(o);
  }
  static std::string sanitize(const std::string& s) { return s.empty() ? std::string("value") : s; }
  std::string unique(const std::string& want) {
    std::string base = sanitize(want), name = base;
    for (int k = 1; names_.count(name); ++k) name = base + "_" + std::to_string(k);
    names_.insert(name);
    return name;
  }

  nn::Layer make_input(const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type()) throw ValueError("import_onnx: the input '" + v.name() + "' is not a tensor");
    const auto& tt = v.type().tensor_type();
    const auto dt = detail::loom_dtype(tt.elem_type());
    if (!dt) throw ValueError("import_onnx: the input '" + v.name() + "' has the element type " + std::to_string(tt.elem_type()) + ", which Loom has no dtype for");
    Shape shape;
    if (!tt.has_shape()) throw ValueError("import_onnx: the input '" + v.name() + "' has no shape (its rank is needed)");
    if (tt.shape().dim_size() > 16) throw IOError("import_onnx: the input '" + v.name() + "' has more than 16 dimensions");
    for (const auto& d : tt.shape().dim()) {
      if (d.has_dim_value() && (d.dim_value() < 0 || d.dim_value() > (int64_t{1} << 40)))
        throw IOError("import_onnx: the input '" + v.name() + "' has the dimension " + std::to_string(d.dim_value()));
      shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
    }
    nn::Input in(shape, *dt, unique(v.name()));
    values_[v.name()] = in;
    inputs_.insert(in.impl().get());
    return in;
  }

  // ------------------------------------------------------------------ node helpers
  const onnx::AttributeProto* attr(const std::string& name) const {
    for (const auto& a : node_->attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  int64_t attr_int(const std::string& name, int64_t dflt) const {
    const auto* a = attr(name);
    return a ? a->i() : dflt;
  }
  float attr_float(const std::string& name, float dflt) const {
    const auto* a = attr(name);
    return a ? a->f() : dflt;
  }
  std::string attr_string(const std::string& name, const std::string& dflt) const {
    const auto* a = attr(name);
    return a ? a->s() : dflt;
  }
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> dflt = {}) const {
    const auto* a = attr(name);
    if (!a) return dflt;
    return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  }
  // Attributes the importer does not read must be absent.
  void only_attrs(std::initializer_list<const char*> known) const {
    for (const auto& a : node_->attribute()) {
      bool ok = false;
      for (const char* k : known) ok = ok || a.name() == k;
      if (!ok) throw Unsupported("the attribute '" + a.name() + "' is not imported");
    }
  }
  size_t n_inputs() const {  // without trailing empty (omitted) inputs
    size_t n = static_cast<size_t>(node_->input_size());
    while (n > 0 && node_->input(static_cast<int>(n) - 1).empty()) --n;
    return n;
  }
  bool has_input(size_t i) const { return i < n_inputs() && !node_->input(static_cast<int>(i)).empty(); }
  bool is_const(size_t i) const { return has_input(i) && consts_.count(node_->input(static_cast<int>(i))); }
  const Tensor& constant(size_t i, const char* what) const {
    if (!has_input(i)) throw Unsupported(std::string("its ") + what + " is missing");
    auto it = consts_.find(node_->input(static_cast<int>(i)));
    if (it == consts_.end()) throw Unsupported(std::string("its ") + what + " '" + node_->input(static_cast<int>(i)) + "' must be a constant (an initializer)");
    return it->second;
  }
  nn::Layer value(size_t i) {
    if (!has_input(i)) throw Unsupported("input " + std::to_string(i) + " is missing");
    const std::string& name = node_->input(static_cast<int>(i));
    if (auto it = values_.find(name); it != values_.end()) return it->second;
    if (time_major_.count(name))
      throw Unsupported("its input '" + name + "' is time-major (time, batch, ...): Loom's layers keep the batch axis first");
    if (shape_values_.count(name))
      throw Unsupported("its input '" + name + "' is computed from shapes (Loom evaluates those only as a Reshape's target shape)");
    if (auto it = consts_.find(name); it != consts_.end() && defaults_.count(name)) {
      // an input with a default, read as a value: an Input holding the initializer, not among
      // the graph's inputs (a run reads its value), overridable by nn::Input::set_value
      nn::Input in(it->second.shape(), it->second.dtype(), unique(name));
      in.set_default(it->second);
      values_[name] = in;
      batchless_.insert(in.impl().get());
      return in;
    }
    if (auto it = consts_.find(name); it != consts_.end()) {  // a constant operand as a Constant layer
      nn::Layer c = nn::Constant(it->second, unique(name));
      values_[name] = c;
      batchless_.insert(c.impl().get());
      return c;
    }
    throw Unsupported("its input '" + name + "' is computed by no earlier node (nodes must be in topological order)");
  }
  // Only the first output may be used.
  void single_output() const {
    for (int k = 1; k < node_->output_size(); ++k)
      if (!node_->output(k).empty() && uses_.count(node_->output(k)))
        throw Unsupported("its output " + std::to_string(k) + " ('" + node_->output(k) + "') is used; Loom's layer has one output");
  }
  const std::string& out() const {
    if (node_->output_size() < 1 || node_->output(0).empty()) throw Unsupported("it has no output");
    return node_->output(0);
  }
  void set(const std::string& value_name, const nn::Layer& l) { values_[value_name] = l; }
  void param(const nn::Layer& l, const std::string& path, const Tensor& t) { pending_.emplace_back(l.name() + "/" + path, t); }
  static std::vector<int64_t> ints_of(const Tensor& t) {
    const Tensor c = t.astype(DType::Int64).contiguous();
    const auto* p = static_cast<const int64_t*>(c.data_ptr());
    return std::vector<int64_t>(p, p + c.numel());
  }
  static double scalar_of(const Tensor& t) { return t.astype(DType::Float64).contiguous().item<double>(); }
  // The single node reading `value` (and no graph output); -1 when there is not exactly one.
  int sole_reader(const std::string& v) const {
    if (uses_.count(v) == 0 || uses_.at(v) != 1) return -1;
    for (const auto& o : g_.output())
      if (o.name() == v) return -1;
    // from the readers' index, not a scan of the nodes after this one: a scan per node is
    // quadratic in a long chain
    if (auto it = readers_.find(v); it != readers_.end())
      for (const auto& [k, i] : it->second)
        if (k > index_) return k;
    return -1;
  }
  // Loom's layers that compute (convolutions, pooling, normalization, activations) take
  // floating-point inputs.
  static const nn::Layer& floating(const nn::Layer& x) {
    if (!is_floating(x.dtype())) throw Unsupported(std::string("its input has the dtype ") + dtype_name(x.dtype()) + " (the layer computes in floating point)");
    return x;
  }
  static int64_t rank_of(const nn::Layer& l) { return static_cast<int64_t>(l.shape().size()); }
  int64_t norm_axis(int64_t axis, int64_t rank) const {
    if (axis < -rank || axis >= rank) throw Unsupported("the axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    return axis < 0 ? axis + rank : axis;
  }

  // ------------------------------------------------------------------ operators
  void import_node(const onnx::NodeProto& n) {
    if (!n.domain().empty() && n.domain() != "ai.onnx") throw Unsupported("the domain '" + n.domain() + "' is not imported (only ONNX's default one)");
    const std::string& op = n.op_type();
    if (auto it = adaptive_.find(index_); it != adaptive_.end()) return import_adaptive_pool(it->second);
    if (auto it = attention_.find(index_); it != attention_.end()) return import_attention(it->second);
    if (auto it = encoders_.find(index_); it != encoders_.end()) return import_encoder(it->second);
    if (op == "Constant") return import_constant();
    if (op == "Identity" && n.input_size() == 1 && is_const(0) && n.attribute_size() == 0 && n.output_size() == 1 && !is_graph_output(n.output(0))) {
      consts_[out()] = constant(0, "input");  // Loom's exporter writes Constant layers so
      return;
    }
    if (op == "Gather") return import_gather();
    if (op == "OneHot") return import_one_hot();
    if (op == "LSTM" || op == "GRU" || op == "RNN") return import_rnn(op);
    if (op == "Gemm") return import_gemm();
    if (op == "MatMul") return import_matmul();
    if (op == "Conv") return import_conv();
    if (op == "ConvTranspose") return import_conv_transpose();
    if (op == "LayerNormalization") return import_layer_norm();
    if ((op == "Mul" || op == "Div") && import_gelu()) return;
    if (op == "BatchNormalization") return import_batch_norm();
    if (op == "MaxPool" || op == "AveragePool") return import_pool(op == "MaxPool");
    if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return import_global_pool(op == "GlobalMaxPool");
    if (op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "Softplus" || op == "Identity" || op == "Elu" || op == "LeakyRelu" ||
        op == "Softmax" || op == "LogSoftmax" || op == "HardSigmoid" || op == "HardSwish")
      return import_activation(op);
    if (op == "Clip") return import_clip();
    if (op == "Pad") return import_pad();
    if (op == "ReduceMean" || op == "ReduceMax" || op == "ReduceSum" || op == "ReduceMin") return import_reduce(op);
    if (op == "Dropout") return import_dropout();
    if (op == "Flatten") return import_flatten();
    if (op == "Reshape") return import_reshape();
    if (op == "Transpose") return import_transpose();
    if (op == "Slice") return import_slice();
    if (op == "Concat") return import_concat();
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Sum" || op == "Mean") return import_merge(op);
    throw Unsupported("no Loom layer for this operator");
  }

  void import_constant() {
    single_output();
    const auto* v = attr("value");
    if (!v || node_->attribute_size() != 1) throw Unsupported("only the 'value' attribute (a tensor) is imported");
    Tensor t = detail::to_tensor(v->t(), folder_, reads_);
    consts_[out()] = t;
  }

  // y = x W (+ b): a Linear named `name`, W (in, out)
  void linear(const nn::Layer& x, const Tensor& w, const Tensor* bias, const std::string& value_name) {
    if (w.ndim() != 2) throw Unsupported("the weight matrix has rank " + std::to_string(w.ndim()) + " (a Linear's is 2)");
    if (rank_of(x) < 1) throw Unsupported("its input is a scalar");
    const int64_t in = w.shape()[0], units = w.shape()[1];
    const int64_t xin = x.shape().back();
    if (xin != in) throw Unsupported("the input has " + std::to_string(xin) + " features, the weights " + std::to_string(in));
    Tensor b;
    if (bias) {
      if (bias->numel() == units) b = bias->reshape({units});
      else if (bias->numel() == 1) b = full({units}, scalar_of(*bias), bias->dtype());
      else throw Unsupported("the bias has the shape " + shape_str(bias->shape()) + ", not (" + std::to_string(units) + ")");
      for (size_t k = 0; k + 1 < bias->shape().size(); ++k)
        if (bias->shape()[k] != 1) throw Unsupported("the bias has the shape " + shape_str(bias->shape()) + ", not (" + std::to_string(units) + ")");
    }
    nn::LinearOptions lo;
    lo.bias = bias != nullptr;
    nn::Linear l(x, units, lo, unique(value_name));
    param(l, "weights", w.contiguous());
    if (bias) param(l, "bias", b.contiguous());
    set(value_name, l);
  }

  void import_gemm() {
    only_attrs({"alpha", "beta", "transA", "transB"});
    single_output();
    if (attr_int("transA", 0) != 0) throw Unsupported("transA = 1 (Loom's Linear reads (batch, features))");
    if (attr_float("alpha", 1.0f) != 1.0f) throw Unsupported("alpha != 1");
    const bool has_c = has_input(2);
    if (has_c && attr_float("beta", 1.0f) != 1.0f) throw Unsupported("beta != 1");
    const nn::Layer x = floating(value(0));
    if (rank_of(x) != 2) throw Unsupported("A has rank " + std::to_string(rank_of(x)) + ", not 2");
    Tensor w = constant(1, "B (the weights)");
    if (w.ndim() != 2) throw Unsupported("B has rank " + std::to_string(w.ndim()));
    if (attr_int("transB", 0) != 0) w = transpose(w).contiguous();
    Tensor c;
    if (has_c) c = constant(2, "C (the bias)");
    linear(x, w, has_c ? &c : nullptr, out());
  }

  void import_matmul() {
    single_output();
    const nn::Layer x = floating(value(0));
    const Tensor& w = constant(1, "right operand (the weights)");
    if (rank_of(x) < 2) throw Unsupported("the left operand has rank " + std::to_string(rank_of(x)) + " (a Linear's input has a batch axis)");
    // MatMul + Add of a constant bias read by nothing else: one Linear with a bias
    const int k = sole_reader(out());
    if (k >= 0 && w.ndim() == 2) {
      const onnx::NodeProto& a = g_.node(k);
      if (a.op_type() == "Add" && a.domain().empty() && a.input_size() == 2 && a.output_size() == 1) {
        const std::string other = a.input(0) == out() ? a.input(1) : a.input(0);
        auto it = consts_.find(other);
        if (it != consts_.end() && it->second.numel() == w.shape()[1] && it->second.ndim() <= rank_of(x)) {
          bool ones = true;
          for (size_t d = 0; d + 1 < it->second.shape().size(); ++d) ones = ones && it->second.shape()[d] == 1;
          if (ones) {
            linear(x, w, &it->second, a.output(0));
            done_.insert(k);
            return;
          }
        }
      }
    }
    linear(x, w, nullptr, out());
  }

  // ONNX pads (begins..., ends...) of `n` axes, checked.
  std::vector<std::pair<int64_t, int64_t>> pads_of(size_t n) const {
    const std::vector<int64_t> p = attr_ints("pads", std::vector<int64_t>(2 * n, 0));
    if (p.size() != 2 * n) throw Unsupported("pads has " + std::to_string(p.size()) + " values for " + std::to_string(n) + " spatial axes");
    std::vector<std::pair<int64_t, int64_t>> out;
    for (size_t i = 0; i < n; ++i) {
      if (p[i] < 0 || p[i + n] < 0) throw Unsupported("negative pads");
      if (p[i] > kMaxAttr || p[i + n] > kMaxAttr) throw Unsupported("pads past 2^20");
      out.push_back({p[i], p[i + n]});
    }
    return out;
  }
  std::vector<int64_t> per_axis(const char* name, size_t n) const {
    std::vector<int64_t> v = attr_ints(name, std::vector<int64_t>(n, 1));
    if (v.size() != n) throw Unsupported(std::string(name) + " has " + std::to_string(v.size()) + " values for " + std::to_string(n) + " spatial axes");
    for (int64_t x : v)
      if (x < 1 || x > kMaxAttr) throw Unsupported(std::string(name) + " holds " + std::to_string(x));
    return v;
  }

  void import_conv() {
    only_attrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
    single_output();
    const nn::Layer x = floating(value(0));
    const Tensor& w = constant(1, "W (the weights)");
    if (w.ndim() != 3 && w.ndim() != 4) throw Unsupported("a " + std::to_string(w.ndim() - 2) + "-d convolution (Loom has Conv1D and Conv2D)");
    const size_t n = static_cast<size_t>(w.ndim() - 2);
    if (rank_of(x) != w.ndim()) throw Unsupported("the input's rank " + std::to_string(rank_of(x)) + " does not match the weights'");
    std::vector<int64_t> k(w.shape().begin() + 2, w.shape().end());
    if (attr("kernel_shape") && attr_ints("kernel_shape") != k) throw Unsupported("kernel_shape differs from the weights' shape");
    const auto strides = per_axis("strides", n), dil = per_axis("dilations", n);
    const int64_t group = attr_int("group", 1);
    if (group < 1) throw Unsupported("group " + std::to_string(group));
    const std::string auto_pad = attr_string("auto_pad", "NOTSET");
    nn::ConvOptions o{.stride = IntList(strides), .dilation = IntList(dil), .groups = group, .bias = has_input(2)};
    if (auto_pad == "VALID") {
      o.padding = "valid";
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      bool ok = true;
      for (size_t i = 0; i < n; ++i) ok = ok && strides[i] == 1 && (auto_pad == "SAME_UPPER" || dil[i] * (k[i] - 1) % 2 == 0);
      if (!ok) throw Unsupported("auto_pad " + auto_pad + " with strides > 1 (or odd total padding for SAME_LOWER) depends on the input size");
      o.padding = "same";
    } else if (auto_pad == "NOTSET") {
      std::vector<int64_t> pairs;
      for (const auto& [b, e] : pads_of(n)) pairs.insert(pairs.end(), {b, e});
      o.padding = ConvPadding(pairs);
    } else {
      throw Unsupported("auto_pad '" + auto_pad + "'");
    }
    const int64_t cin = x.shape()[1];
    if (cin < 0 || cin != w.shape()[1] * group)
      throw Unsupported("the input has " + std::to_string(cin) + " channels; the weights and group say " + std::to_string(w.shape()[1] * group));
    Tensor b;
    if (has_input(2)) b = constant(2, "B (the bias)");
    const std::string name = unique(out());
    nn::Layer l = n == 1 ? nn::Layer(nn::Conv1D(x, w.shape()[0], k[0], o, name)) : nn::Layer(nn::Conv2D(x, w.shape()[0], IntList(k), o, name));
    param(l, "weights", w);
    if (has_input(2)) param(l, "bias", b);
    set(out(), l);
  }

  void import_conv_transpose() {
    only_attrs({"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "pads", "strides"});
    single_output();
    const nn::Layer x = floating(value(0));
    const Tensor& w = constant(1, "W (the weights)");
    if (w.ndim() != 4 || rank_of(x) != 4) throw Unsupported("a " + std::to_string(w.ndim() - 2) + "-d transposed convolution (Loom has Conv2DTranspose)");
    std::vector<int64_t> k(w.shape().begin() + 2, w.shape().end());
    if (attr("kernel_shape") && attr_ints("kernel_shape") != k) throw Unsupported("kernel_shape differs from the weights' shape");
    if (attr_string("auto_pad", "NOTSET") != "NOTSET") throw Unsupported("auto_pad '" + attr_string("auto_pad", "") + "'");
    const int64_t group = attr_int("group", 1);
    if (group < 1) throw Unsupported("group " + std::to_string(group));
    std::vector<int64_t> pad;
    for (const auto& [b, e] : pads_of(2)) {
      if (b != e) throw Unsupported("asymmetric pads (Loom's Conv2DTranspose pads both sides alike)");
      pad.push_back(b);
    }
    std::vector<int64_t> op = attr_ints("output_padding", {0, 0});
    if (op.size() != 2) throw Unsupported("output_padding has " + std::to_string(op.size()) + " values");
    for (int64_t v : op)
      if (v < 0 || v > kMaxAttr) throw Unsupported("output_padding holds " + std::to_string(v));
    nn::ConvTransposeOptions o{.stride = IntList(per_axis("strides", 2)), .padding = IntList(pad), .output_padding = IntList(op),
                               .dilation = IntList(per_axis("dilations", 2)), .groups = group, .bias = has_input(2)};
    if (x.shape()[1] != w.shape()[0])
      throw Unsupported("the input has " + std::to_string(x.shape()[1]) + " channels; the weights say " + std::to_string(w.shape()[0]));
    if (w.shape()[0] % group != 0) throw Unsupported("the input channels do not divide into the groups");
    Tensor b;
    if (has_input(2)) b = constant(2, "B (the bias)");
    nn::Layer l = nn::Conv2DTranspose(x, w.shape()[1] * group, IntList(k), o, unique(out()));
    param(l, "weights", w);
    if (has_input(2)) param(l, "bias", b);
    set(out(), l);
  }

  void import_layer_norm() {
    only_attrs({"axis", "epsilon", "stash_type"});
    single_output();
    const nn::Layer x = floating(value(0));
    const int64_t r = rank_of(x);
    if (norm_axis(attr_int("axis", -1), r) != r - 1) throw Unsupported("axis " + std::to_string(attr_int("axis", -1)) + " of rank " + std::to_string(r) + " (Loom's LayerNorm is over the last axis)");
    const Tensor& scale = constant(1, "Scale");
    const int64_t n = x.shape().back();
    if (scale.ndim() != 1 || scale.shape()[0] != n) throw Unsupported("Scale of the shape " + shape_str(scale.shape()));
    Tensor bias = has_input(2) ? constant(2, "B") : zeros(scale.shape(), scale.dtype());
    if (bias.shape() != scale.shape()) throw Unsupported("B of the shape " + shape_str(bias.shape()));
    nn::Layer l = nn::LayerNorm(x, float_attr(attr_float("epsilon", 1e-5f)), unique(out()));
    param(l, "weight", scale);
    param(l, "bias", bias);
    set(out(), l);
  }

  // The node reading `v` and nothing else reading it; nullptr otherwise. *at: its index.
  const onnx::NodeProto* next(const std::string& v, const char* op, int* at) const {
    const int k = sole_reader(v);
    if (k < 0 || g_.node(k).op_type() != op || !g_.node(k).domain().empty() || g_.node(k).output_size() != 1) return nullptr;
    *at = k;
    return &g_.node(k);
  }
  bool const_near(const std::string& name, double want) const {
    auto it = consts_.find(name);
    return it != consts_.end() && it->second.numel() == 1 && std::abs(scalar_of(it->second) - want) <= 1e-6 * std::abs(want);
  }
  // The node reading `v` and nothing else (no graph output) when it is `op` with one output.
  const onnx::NodeProto* next_reader(const std::string& v, const char* op, int* at) const {
    const int k = only_reader(v);
    if (k < 0 || g_.node(k).op_type() != op || !g_.node(k).domain().empty() || g_.node(k).output_size() != 1) return nullptr;
    *at = k;
    return &g_.node(k);
  }
  // gelu written out with Erf, starting at the node k that reads x:
  //   Loom's exporter: t = x * (1/sqrt 2); e = Erf(t); p = e + 1; h = x * 0.5; y = h * p
  //   torch.onnx:      t = x / sqrt 2;     e = Erf(t); p = e + 1; m = x * p;   y = m * 0.5
  // y and the other nodes of the formula (`ks`) when it is one.
  bool gelu_at(int k0, const std::string& x, std::string& y, std::vector<int>& ks) const {
    const onnx::NodeProto& n = g_.node(k0);
    if ((n.op_type() != "Mul" && n.op_type() != "Div") || !n.domain().empty() || n.input_size() != 2 || n.output_size() != 1 || n.input(0) != x)
      return false;
    const bool div = n.op_type() == "Div";
    if (!const_near(n.input(1), div ? std::sqrt(2.0) : 1.0 / std::sqrt(2.0))) return false;
    int ke = 0, ka = 0, km = 0, kl = 0, kh = -1;
    const onnx::NodeProto* e = next_reader(n.output(0), "Erf", &ke);
    if (!e) return false;
    const onnx::NodeProto* a = next_reader(e->output(0), "Add", &ka);
    if (!a || a->input_size() != 2) return false;
    if (!const_near(a->input(0) == e->output(0) ? a->input(1) : a->input(0), 1.0)) return false;
    const onnx::NodeProto* m = next_reader(a->output(0), "Mul", &km);
    if (!m || m->input_size() != 2) return false;
    const std::string other = m->input(0) == a->output(0) ? m->input(1) : m->input(0);
    if (other == x) {  // torch: (x * p) * 0.5
      const onnx::NodeProto* l = next_reader(m->output(0), "Mul", &kl);
      if (!l || l->input_size() != 2 || !const_near(l->input(0) == m->output(0) ? l->input(1) : l->input(0), 0.5)) return false;
      y = l->output(0);
    } else {  // Loom: (x * 0.5) * p, where x * 0.5 is a node of its own read only here
      for (int k = 0; k < g_.node_size(); ++k) {
        const auto& h = g_.node(k);
        if (h.output_size() == 1 && h.output(0) == other && h.op_type() == "Mul" && h.input_size() == 2 && h.domain().empty() &&
            ((h.input(0) == x && const_near(h.input(1), 0.5)) || (h.input(1) == x && const_near(h.input(0), 0.5))) &&
            uses_.count(other) && uses_.at(other) == 1)
          kh = k;
      }
      if (kh < 0) return false;
      y = m->output(0);
      kl = km;
    }
    ks.clear();
    for (int k : {ke, ka, km, kl, kh})
      if (k >= 0) ks.push_back(k);
    return true;
  }
  // gelu's formula from the node being imported, as a single Activation(gelu)
  bool import_gelu() {
    const onnx::NodeProto& n = *node_;
    std::string y;
    std::vector<int> ks;
    if (n.input_size() != 2 || !values_.count(n.input(0)) || !gelu_at(index_, n.input(0), y, ks)) return false;
    if (!is_floating(values_.at(n.input(0)).dtype())) return false;
    set(y, nn::Activation(values_.at(n.input(0)), nn::gelu, unique(y)));
    done_.insert(ks.begin(), ks.end());
    return true;
  }

  void import_batch_norm() {
    only_attrs({"epsilon", "momentum", "training_mode", "spatial", "is_test", "consumed_inputs"});
    single_output();
    if (attr_int("training_mode", 0) != 0) throw Unsupported("training_mode = 1 (the file computes batch statistics: an exported training graph)");
    if (attr_int("spatial", 1) != 1) throw Unsupported("spatial = 0");
    const nn::Layer x = floating(value(0));
    if (rank_of(x) < 2) throw Unsupported("the input has rank < 2");
    const Tensor &scale = constant(1, "scale"), &bias = constant(2, "B"), &mean = constant(3, "mean"), &var = constant(4, "var");
    for (const Tensor* t : {&scale, &bias, &mean, &var})
      if (t->ndim() != 1) throw Unsupported("a statistic or scale of rank " + std::to_string(t->ndim()) + " (they are per channel)");
    for (const Tensor* t : {&scale, &bias, &mean, &var})
      if (t->shape()[0] != x.shape()[1])
        throw Unsupported("the input has " + std::to_string(x.shape()[1]) + " channels, a statistic or scale " + std::to_string(t->shape()[0]));
    const double momentum = float_attr(attr_float("momentum", 0.9f)), eps = float_attr(attr_float("epsilon", 1e-5f));
    nn::BatchNorm l(x, {.momentum = float_attr(static_cast<float>(1.0 - momentum)), .eps = eps}, unique(out()));
    param(l, "weight", scale);
    param(l, "bias", bias);
    param(l, "running_mean", mean);
    param(l, "running_var", var);
    set(out(), l);
  }

  void import_pool(bool max) {
    only_attrs({"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides", "storage_order"});
    single_output();
    // a zero Pad before it (torch's nn.AvgPool2d with padding and count_include_pad): its widths
    // are the pooling's padding, counted in the averages as Loom's average pooling counts them
    std::vector<int64_t> padded;
    const auto folded = node_->input_size() > 0 ? folded_pads_.find(node_->input(0)) : folded_pads_.end();
    if (folded != folded_pads_.end()) padded = folded->second.second;
    const nn::Layer x = floating(folded != folded_pads_.end() ? folded->second.first : value(0));
    const std::vector<int64_t> k = attr_ints("kernel_shape");
    for (int64_t v : k)
      if (v < 1 || v > kMaxAttr) throw Unsupported("kernel_shape holds " + std::to_string(v));
    if (k.size() != 2 || rank_of(x) != 4) throw Unsupported(std::to_string(k.size()) + "-d pooling (Loom pools (N, C, H, W))");
    const std::string auto_pad = attr_string("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "VALID") throw Unsupported("auto_pad '" + auto_pad + "'");
    for (int64_t d : per_axis("dilations", 2))
      if (d != 1) throw Unsupported("dilations (Loom's pooling has none)");
    const auto strides = per_axis("strides", 2);
    std::vector<int64_t> pad;
    bool any_pad = false;
    if (auto_pad == "VALID" && !padded.empty()) throw Unsupported("auto_pad 'VALID' after a Pad");
    size_t axis = 0;
    for (auto [b, e] : pads_of(2)) {
      any_pad = any_pad || b != 0 || e != 0;  // the node's own padding (the Pad's zeros are data: always counted)
      if (!padded.empty()) b += padded[axis], e += padded[axis + 2];
      ++axis;
      if (b != e) throw Unsupported("asymmetric pads (Loom pads both sides alike)");
      pad.push_back(b);
    }
    if (auto_pad == "VALID") pad = {0, 0}, any_pad = false;
    const bool ceil = attr_int("ceil_mode", 0) != 0;
    if (!max && attr_int("count_include_pad", 0) == 0 && (any_pad || ceil))
      throw Unsupported("count_include_pad = 0 with padding or ceil_mode (Loom's average pooling counts the padding)");
    for (size_t i = 0; i < 2; ++i)
      if (2 * pad[i] > k[i]) throw Unsupported("pads larger than half the kernel");
    nn::PoolOptions o{.stride = IntList(strides), .padding = IntList(pad), .ceil_mode = ceil};
    const std::string name = unique(out());
    nn::Layer l = max ? nn::Layer(nn::MaxPool2D(x, IntList(k), o, name)) : nn::Layer(nn::AvgPool2D(x, IntList(k), o, name));
    set(out(), l);
  }

  void import_global_pool(bool max) {
    only_attrs({});
    single_output();
    const nn::Layer x = floating(value(0));
    if (rank_of(x) < 3) throw Unsupported("the input has rank < 3");
    // followed by Flatten(axis 1) read by nothing else: one GlobalPool (N, C)
    const int k = sole_reader(out());
    if (k >= 0) {
      const onnx::NodeProto& f = g_.node(k);
      int64_t axis = 1;
      for (const auto& a : f.attribute())
        if (a.name() == "axis") axis = a.i();
      if (f.op_type() == "Flatten" && f.domain().empty() && axis == 1 && f.output_size() == 1 && f.attribute_size() <= 1) {
        set(f.output(0), nn::GlobalPool(x, max ? nn::GlobalPool::Mode::Max : nn::GlobalPool::Mode::Avg, unique(f.output(0))));
        done_.insert(k);
        return;
      }
    }
    if (!max && rank_of(x) == 4) return set(out(), nn::AdaptiveAvgPool2D(x, {1, 1}, unique(out())));
    const nn::Layer p = nn::GlobalPool(x, max ? nn::GlobalPool::Mode::Max : nn::GlobalPool::Mode::Avg, unique(out() + "/pooled"));
    Shape target{-1};
    for (int64_t d = 2; d < rank_of(x); ++d) target.push_back(1);
    set(out(), nn::Reshape(p, target, unique(out())));
  }

  void import_activation(const std::string& op) {
    single_output();
    const nn::Layer x = floating(value(0));
    const nn::ActivationFn* fn = nullptr;
    if (op == "Relu") fn = &nn::relu;
    else if (op == "Sigmoid") fn = &nn::sigmoid;
    else if (op == "Tanh") fn = &nn::tanh;
    else if (op == "Softplus") fn = &nn::softplus;
    else if (op == "Identity") fn = &nn::identity;
    else if (op == "HardSwish") fn = &nn::hard_swish;
    else if (op == "HardSigmoid") {  // torch's Hardsigmoid: alpha 1/6, beta 1/2 (ONNX's defaults are Keras' 0.2 and 0.5)
      only_attrs({"alpha", "beta"});
      if (attr_float("alpha", 0.2f) != 1.0f / 6.0f || attr_float("beta", 0.5f) != 0.5f)
        throw Unsupported("alpha " + std::to_string(attr_float("alpha", 0.2f)) + ", beta " + std::to_string(attr_float("beta", 0.5f)) +
                          " (Loom's hard_sigmoid is torch's: alpha 1/6, beta 0.5)");
      fn = &nn::hard_sigmoid;
    } else if (op == "Elu") {
      only_attrs({"alpha"});
      if (attr_float("alpha", 1.0f) != 1.0f) throw Unsupported("alpha " + std::to_string(attr_float("alpha", 1.0f)) + " (Loom's elu has alpha 1)");
      fn = &nn::elu;
    } else if (op == "LeakyRelu") {
      only_attrs({"alpha"});
      if (attr_float("alpha", 0.01f) != 0.01f)
        throw Unsupported("alpha " + std::to_string(attr_float("alpha", 0.01f)) + " (Loom's leaky_relu has alpha 0.01)");
      fn = &nn::leaky_relu;
    } else {  // Softmax, LogSoftmax: over the last axis (before opset 13, over the axes from `axis` on)
      only_attrs({"axis"});
      const int64_t r = rank_of(x);
      const int64_t axis = norm_axis(attr_int("axis", opset_ >= 13 ? -1 : 1), r);
      if (axis != r - 1) throw Unsupported("axis " + std::to_string(attr_int("axis", 0)) + " of rank " + std::to_string(r) + " (Loom's softmax is over the last axis)");
      fn = op == "Softmax" ? &nn::softmax : &nn::log_softmax;
    }
    if (op != "Elu" && op != "LeakyRelu" && op != "Softmax" && op != "LogSoftmax" && op != "HardSigmoid") only_attrs({});
    set(out(), nn::Activation(x, *fn, unique(out())));
  }

  // ------------------------------------------------------------------ torch's MobileNets, DenseNet, MNASNet
  // Clip(x, 0, 6): torch's ReLU6 (mobilenet_v2), as relu6; Clip(x, 0) as relu. The bounds are
  // inputs from opset 11 on, attributes before.
  void import_clip() {
    single_output();
    const nn::Layer x = floating(value(0));
    std::optional<double> lo, hi;
    const auto bound = [&](size_t i, const char* what) -> std::optional<double> {
      if (!has_input(i)) return std::nullopt;
      const Tensor& t = constant(i, what);
      if (t.numel() != 1) throw Unsupported(std::string("its ") + what + " has " + std::to_string(t.numel()) + " values (a scalar is valid)");
      return scalar_of(t);
    };
    if (opset_ < 11) {
      only_attrs({"min", "max"});
      if (attr("min") && attr_float("min", 0) > std::numeric_limits<float>::lowest()) lo = float_attr(attr_float("min", 0));
      if (attr("max") && attr_float("max", 0) < std::numeric_limits<float>::max()) hi = float_attr(attr_float("max", 0));
    } else {
      only_attrs({});
      lo = bound(1, "min");
      hi = bound(2, "max");
    }
    const auto str = [](const std::optional<double>& v, const char* none) { return v ? std::to_string(*v) : std::string(none); };
    if (lo == 0.0 && hi == 6.0) return set(out(), nn::Activation(x, nn::relu6, unique(out())));
    if (lo == 0.0 && !hi) return set(out(), nn::Activation(x, nn::relu, unique(out())));
    throw Unsupported("the bounds [" + str(lo, "-inf") + ", " + str(hi, "inf") + "] (Loom's activations clip to [0, 6] (relu6) or [0, inf) (relu))");
  }

  // Pad with zeros: none at all (torch writes one before every nn.AvgPool2d) is no layer; widths
  // on the spatial axes before an AveragePool that reads nothing else are that pooling's padding.
  void import_pad() {
    single_output();
    only_attrs({"mode", "pads", "value"});
    const std::string mode = attr_string("mode", "constant");
    if (mode != "constant") throw Unsupported("mode '" + mode + "' (Loom folds zero constant padding only)");
    std::vector<int64_t> pads;
    double fill = 0;
    if (opset_ < 11) {
      pads = attr_ints("pads");
      fill = attr_float("value", 0.0f);
    } else {
      pads = ints_of(constant(1, "pads"));
      if (has_input(2)) fill = scalar_of(constant(2, "constant_value"));
      if (has_input(3)) throw Unsupported("its axes input");
    }
    const nn::Layer x = value(0);
    const int64_t r = rank_of(x);
    if (static_cast<int64_t>(pads.size()) != 2 * r) throw Unsupported("pads has " + std::to_string(pads.size()) + " values for rank " + std::to_string(r));
    bool zero = true;
    for (int64_t p : pads) {
      if (p < 0 || p > kMaxAttr) throw Unsupported("the pad width " + std::to_string(p) + " (valid: 0 to 2^20)");
      zero = zero && p == 0;
    }
    if (zero) return set(out(), x);  // nothing added: the value itself
    if (fill != 0) throw Unsupported("the value " + std::to_string(fill) + " (Loom folds zero padding into an average pooling)");
    const int k = sole_reader(out());
    const bool pool = k >= 0 && g_.node(k).op_type() == "AveragePool" && g_.node(k).domain().empty() && g_.node(k).input(0) == out();
    if (!pool || r != 4 || pads[0] || pads[1] || pads[4] || pads[5])
      throw Unsupported("zero padding other than of the spatial axes before an AveragePool reading nothing else (which Loom folds into the pooling)");
    folded_pads_[out()] = {x, {pads[2], pads[3], pads[6], pads[7]}};
  }

  // ReduceMean / ReduceMax / ReduceSum / ReduceMin over axes after the batch (x.mean([2, 3]) in
  // mnasnet): the kept axes moved first and joined, the reduced ones joined after them, a
  // GlobalPool over those, and the kept axes (with ones for the reduced, keepdims) restored.
  // The axes are an attribute before opset 18 (ReduceSum: before 13), an input from then on.
  void import_reduce(const std::string& op) {
    single_output();
    only_attrs({"axes", "keepdims", "noop_with_empty_axes"});
    const bool axes_input = opset_ >= 18 || (op == "ReduceSum" && opset_ >= 13);
    if (axes_input && attr("axes")) throw Unsupported("axes as an attribute at opset " + std::to_string(opset_) + " (an input there)");
    const nn::Layer x = floating(value(0));
    const int64_t r = rank_of(x);
    std::vector<int64_t> axes = axes_input ? (has_input(1) ? ints_of(constant(1, "axes")) : std::vector<int64_t>{}) : attr_ints("axes");
    if (axes.empty()) {
      if (attr_int("noop_with_empty_axes", 0) != 0) return set(out(), nn::Activation(x, nn::identity, unique(out())));
      for (int64_t a = 0; a < r; ++a) axes.push_back(a);
    }
    std::vector<bool> reduced(static_cast<size_t>(r), false);
    for (int64_t a : axes) {
      const int64_t n = norm_axis(a, r);
      if (reduced[static_cast<size_t>(n)]) throw Unsupported("the axis " + std::to_string(a) + " is given twice");
      reduced[static_cast<size_t>(n)] = true;
    }
    if (reduced[0]) throw Unsupported("it reduces the batch axis 0 (Loom's layers keep the batch)");
    const bool keepdims = attr_int("keepdims", 1) != 0;
    const Shape& in = x.shape();
    Axes perm;
    Shape kept_dims;
    int64_t kept = 1, red = 1;
    for (int64_t a = 1; a < r; ++a)
      if (!reduced[static_cast<size_t>(a)]) perm.push_back(a - 1), kept_dims.push_back(in[static_cast<size_t>(a)]);
    for (int64_t a = 1; a < r; ++a) {
      if (in[static_cast<size_t>(a)] < 0) throw Unsupported("the axis " + std::to_string(a) + " is sized at run time (the reduction is reshaped at import)");
      if (reduced[static_cast<size_t>(a)]) perm.push_back(a - 1), red *= in[static_cast<size_t>(a)];
      else kept *= in[static_cast<size_t>(a)];
    }
    if (red == 0 || kept == 0) throw Unsupported("an empty axis");
    const bool max = op == "ReduceMax" || op == "ReduceMin";
    const std::string name = unique(out());
    nn::Layer h = x;
    if (op == "ReduceMin") h = negated(h, name + "/negated");
    bool identity_perm = true;
    for (size_t i = 0; i < perm.size(); ++i) identity_perm = identity_perm && perm[i] == static_cast<int64_t>(i);
    if (!identity_perm) h = nn::Transpose(h, perm, unique(name + "/kept_first"));
    // (N, C, spatial...) is what GlobalPool pools: one kept axis and the reduced ones after it as they are
    if (kept_dims.size() != 1 || r < 3) h = nn::Reshape(h, {kept, red}, unique(name + "/joined"));
    h = nn::GlobalPool(h, max ? nn::GlobalPool::Mode::Max : nn::GlobalPool::Mode::Avg, unique(name + "/pooled"));
    if (op == "ReduceSum") h = scaled(h, static_cast<double>(red), name + "/sum");
    if (op == "ReduceMin") h = negated(h, name + "/min");
    Shape target;
    for (int64_t a = 1; a < r; ++a)
      if (!reduced[static_cast<size_t>(a)]) target.push_back(in[static_cast<size_t>(a)]);
      else if (keepdims) target.push_back(1);
    if (target.empty()) throw Unsupported("it reduces every axis after the batch without keepdims (a layer's output keeps an axis after the batch)");
    if (target != Shape{kept}) h = nn::Reshape(h, target, name);
    else h = nn::Activation(h, nn::identity, name);  // the value's name on its layer
    set(out(), h);
  }
  // h * factor (a constant without a batch axis) and -h
  nn::Layer scaled(const nn::Layer& h, double factor, const std::string& name) {
    const nn::Layer c = nn::Constant(full({1}, factor, h.dtype()), unique(name + "/factor"));
    batchless_.insert(c.impl().get());
    return nn::Multiply({h, c}, unique(name));
  }
  nn::Layer negated(const nn::Layer& h, const std::string& name) { return scaled(h, -1.0, name); }

  // ------------------------------------------------------------------ shapes computed at import
  // torch.onnx writes x.view(n, groups, c / groups, h, w) (shufflenet's channel shuffle) as a
  // Reshape to Concat(Unsqueeze(Gather(Shape(x), 0)), ...): values computed from shapes, which
  // Loom's static shapes give at import. Nodes that compute integers from Shape and constants
  // only, and whose values are read only by such nodes, as a Reshape's target shape or as the
  // bounds of a Slice (torch's x.chunk(2, dim=1): shufflenet's split), are not layers: the Reshape
  // or Slice evaluates them (evaluated_target, evaluated_bounds).
  void find_shape_arithmetic() {
    static const std::unordered_set<std::string> arithmetic = {"Gather", "Unsqueeze", "Squeeze", "Concat", "Cast", "Add", "Sub",
                                                              "Mul", "Div", "Slice", "Identity"};
    std::vector<int> candidates;
    std::unordered_set<std::string> derived;
    for (int k = 0; k < g_.node_size(); ++k) {
      const onnx::NodeProto& n = g_.node(k);
      if (done_.count(k) || !n.domain().empty() || n.output_size() != 1 || n.output(0).empty()) continue;
      bool ok = n.op_type() == "Shape";
      if (!ok && arithmetic.count(n.op_type())) {
        bool any = false;
        ok = true;
        for (const auto& i : n.input()) {
          if (derived.count(i)) any = true;
          else if (auto c = consts_.find(i); !(c != consts_.end() && is_integral(c->second.dtype()) && c->second.numel() <= 16)) ok = false;
        }
        ok = ok && any;
      }
      if (!ok) continue;
      derived.insert(n.output(0));
      candidates.push_back(k);
    }
    // readers come after writers: from the last, keep a node whose readers are all kept, Reshapes'
    // shapes or Slices' bounds
    const std::unordered_set<int> candidate(candidates.begin(), candidates.end());
    std::unordered_set<int> kept;
    for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
      const std::string& v = g_.node(*it).output(0);
      if (is_graph_output(v)) continue;
      bool ok = readers_.count(v) > 0;
      if (ok)
        for (const auto& [k, i] : readers_.at(v)) {
          const onnx::NodeProto& rn = g_.node(k);
          // a Reshape's target shape, or the bounds of a Slice of data (x.chunk: its own arithmetic)
          ok = ok && ((rn.op_type() == "Reshape" && rn.domain().empty() && i == 1) ||
                      (rn.op_type() == "Slice" && rn.domain().empty() && i >= 1 && !candidate.count(k)) || kept.count(k));
        }
      if (ok) kept.insert(*it);
    }
    for (int k : kept) {
      done_.insert(k);
      shape_values_.insert(g_.node(k).output(0));
    }
  }
  // The target shape `v` of the Reshape being imported, evaluated with the layers' shapes at two
  // batch sizes: a value equal at both is a constant; the batch size itself, first, is 0 (keep
  // the batch). Unsupported when a shape read is sized at run time beyond the batch, or the
  // batch is computed with.
  std::vector<int64_t> evaluated_target(const std::string& v) {
    const auto results = at_two_batch_sizes(v, "its target shape");
    std::vector<int64_t> target = results[0];
    if (results[1].size() != target.size()) throw Unsupported("its target shape's length depends on the batch size");
    for (size_t i = 0; i < target.size(); ++i) {
      if (results[1][i] == target[i]) continue;
      if (i == 0 && target[0] == 7 && results[1][0] == 11) {
        target[0] = 0;  // the batch, copied
        continue;
      }
      throw Unsupported("its target shape computes with the batch size (axis " + std::to_string(i) + ")");
    }
    return target;
  }
  // The integers `v` (a Slice's bounds) computed from shapes, which must not depend on the batch.
  std::vector<int64_t> evaluated_bounds(const std::string& v, const std::string& what) {
    const auto results = at_two_batch_sizes(v, what);
    if (results[0] != results[1]) throw Unsupported(what + " '" + v + "' depend on the batch size");
    return results[0];
  }
  // The integers `v` evaluated from the layers' shapes with the batch at 7 and at 11. Unsupported
  // when a shape read is sized at run time beyond the batch.
  std::array<std::vector<int64_t>, 2> at_two_batch_sizes(const std::string& v, const std::string& what) {
    // the values whose shapes are read (Shape nodes' inputs), found back from v
    std::vector<std::string> read;
    std::vector<std::string> stack{v};
    std::unordered_set<std::string> seen{v};
    while (!stack.empty()) {
      const std::string w = stack.back();
      stack.pop_back();
      const onnx::NodeProto* n = producer_of(w);
      if (!n || !shape_values_.count(w)) continue;
      if (n->op_type() == "Shape") {
        read.push_back(n->input(0));
        continue;
      }
      for (const auto& i : n->input())
        if (seen.insert(i).second) stack.push_back(i);
    }
    std::array<std::vector<int64_t>, 2> results;
    for (const int64_t batch : {7, 11}) {
      std::map<std::string, std::vector<int64_t>> shapes;
      for (const std::string& w : read) {
        auto it = values_.find(w);
        if (it == values_.end()) continue;  // an initializer's shape: eval_ints reads it
        std::vector<int64_t> dims(it->second.shape().begin(), it->second.shape().end());
        for (size_t d = 0; d < dims.size(); ++d) {
          if (dims[d] >= 0) continue;
          if (d != 0) throw Unsupported(what + " reads the shape of '" + w + "', whose axis " + std::to_string(d) + " is sized at run time");
          dims[d] = batch;
        }
        shapes[w] = dims;
      }
      ints_memo_.clear();
      std::set<int> nodes;
      auto r = eval_ints(v, shapes, nodes);
      ints_memo_.clear();
      if (!r) throw Unsupported(what + " '" + v + "' is computed in a way Loom does not evaluate at import");
      results[batch == 7 ? 0 : 1] = *r;
    }
    return results;
  }

  // Slice of data: each axis after the batch becomes an AxisSlice layer (step >= 1) or, reversed whole
  // (step -1, as Loom's exporter writes Flip), a Flip. Bounds are constants or computed from
  // shapes (torch's x.chunk), and are resolved against the input's sizes here.
  void import_slice() {
    only_attrs({});
    single_output();
    nn::Layer x = value(0);
    const int64_t rank = rank_of(x);
    const auto ints = [&](int i, const std::string& what) -> std::vector<int64_t> {
      if (has_input(i) && shape_values_.count(node_->input(i))) return evaluated_bounds(node_->input(i), "its " + what);
      return ints_of(constant(i, what.c_str()));
    };
    const std::vector<int64_t> starts = ints(1, "starts"), ends = ints(2, "ends");
    std::vector<int64_t> axes, steps;
    if (has_input(3)) axes = ints(3, "axes");
    else for (int64_t a = 0; a < static_cast<int64_t>(starts.size()); ++a) axes.push_back(a);
    if (has_input(4)) steps = ints(4, "steps");
    else steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      throw Unsupported("its starts, ends, axes and steps have different lengths");
    std::set<int64_t> seen;
    for (size_t k = 0; k < starts.size(); ++k) {
      const int64_t axis = norm_axis(axes[k], rank);
      if (!seen.insert(axis).second) throw Unsupported("the axis " + std::to_string(axes[k]) + " is given twice");
      if (axis == 0) throw Unsupported("it slices the batch axis 0 (Loom's layers keep every sample)");
      const int64_t n = x.shape()[axis];
      if (n < 0) throw Unsupported("the axis " + std::to_string(axis) + " is sized at run time");
      const int64_t step = steps[k];
      if (step == 0) throw Unsupported("a step of 0");
      // ONNX's bounds: negative from the end, then clamped ([0, n] going forward, [-1, n-1] back)
      const auto bound = [n](int64_t i, int64_t lo, int64_t hi) {
        if (i < 0) i = i < -n ? -n - 1 : i + n;  // (the min: beyond the start)
        return std::clamp(i, lo, hi);
      };
      const std::string name = unique(starts.size() == 1 ? out() : out() + "/axis" + std::to_string(axis));
      if (step < 0) {
        if (step != -1 || bound(starts[k], -1, n - 1) != n - 1 || bound(ends[k], -1, n - 1) != -1)
          throw Unsupported("a negative step other than -1 over the whole axis (a Flip)");
        x = nn::Flip(x, {axis - 1}, name);
        continue;
      }
      const int64_t b = bound(starts[k], 0, n), e = bound(ends[k], 0, n);
      if (b == 0 && e == n && step == 1) continue;  // the whole axis
      x = nn::AxisSlice(x, axis - 1, b, std::max(b, e), step, name);
    }
    set(out(), x);
  }

  void import_dropout() {
    only_attrs({"ratio", "seed", "is_test"});
    if (node_->output_size() > 1 && !node_->output(1).empty() && uses_.count(node_->output(1)))
      throw Unsupported("its mask output is used");
    if (has_input(2) && scalar_of(constant(2, "training_mode")) != 0) throw Unsupported("training_mode is true");
    double ratio = float_attr(attr_float("ratio", 0.5f));
    if (has_input(1)) ratio = float_attr(static_cast<float>(scalar_of(constant(1, "ratio"))));
    if (!(ratio >= 0 && ratio < 1)) throw Unsupported("ratio " + std::to_string(ratio));
    const nn::Layer x = value(0);
    set(out(), nn::Dropout(x, ratio, static_cast<uint64_t>(attr_int("seed", 0)), unique(out())));
  }

  void import_flatten() {
    only_attrs({"axis"});
    single_output();
    const nn::Layer x = value(0);
    const int64_t r = rank_of(x);
    if (r < 1) throw Unsupported("a scalar input");
    const int64_t axis = attr_int("axis", 1) < 0 ? attr_int("axis", 1) + r : attr_int("axis", 1);
    if (axis != 1) throw Unsupported("axis " + std::to_string(attr_int("axis", 1)) + " (Loom's Flatten keeps the batch axis: axis 1)");
    set(out(), nn::Flatten(x, unique(out())));
  }

  void import_reshape() {
    only_attrs({"allowzero", "shape"});
    single_output();
    if (attr("shape")) throw Unsupported("the shape as an attribute (opset < 5)");
    const nn::Layer x = value(0);
    const bool computed = has_input(1) && shape_values_.count(node_->input(1));
    std::vector<int64_t> s = computed ? evaluated_target(node_->input(1)) : ints_of(constant(1, "shape"));
    const bool allowzero = attr_int("allowzero", 0) != 0;
    if (computed && allowzero) throw Unsupported("allowzero with a computed target shape");
    const Shape& in = x.shape();
    if (s.empty() || in.empty()) throw Unsupported("a reshape from or to a scalar");
    // the batch axis must stay: 0 (copied), or the same fixed size
    const bool keep = (!allowzero && s[0] == 0) || (in[0] >= 0 && s[0] == in[0]);
    bool ok = keep;
    if (!ok && s[0] == -1) {  // (-1, ...) keeps the batch when the rest holds the per-sample size
      int64_t per = 1, rest = 1;
      for (size_t i = 1; i < in.size(); ++i) per = in[i] < 0 ? -1 : (per < 0 ? -1 : per * in[i]);
      for (size_t i = 1; i < s.size(); ++i) rest = (s[i] <= 0 || rest < 0) ? -1 : rest * s[i];
      ok = per > 0 && rest == per;
    }
    if (!ok) throw Unsupported("the target shape " + shape_str(Shape(s.begin(), s.end())) + " does not keep the batch axis (Loom's Reshape reshapes each sample)");
    Shape target;
    for (size_t i = 1; i < s.size(); ++i) {
      int64_t d = s[i];
      if (d == 0 && !allowzero) {
        if (i >= in.size() || in[i] < 0) throw Unsupported("a 0 (copy) in the target shape for a dimension only known at run time");
        d = in[i];
      }
      if (d < -1 || d == 0) throw Unsupported("the target dimension " + std::to_string(d));
      target.push_back(d);
    }
    set(out(), nn::Reshape(x, target, unique(out())));
  }

  void import_transpose() {
    only_attrs({"perm"});
    single_output();
    if (auto it = node_->input_size() > 0 ? time_major_.find(node_->input(0)) : time_major_.end(); it != time_major_.end() && attr_ints("perm") == std::vector<int64_t>{1, 0, 2})
      return set(out(), it->second);  // back to batch-first
    const nn::Layer x = value(0);
    const int64_t r = rank_of(x);
    std::vector<int64_t> perm = attr_ints("perm");
    if (perm.empty())
      for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
    if (static_cast<int64_t>(perm.size()) != r) throw Unsupported("perm has " + std::to_string(perm.size()) + " axes for rank " + std::to_string(r));
    if (r == 3 && perm == std::vector<int64_t>{1, 0, 2}) {
      // (batch, time, features) -> (time, batch, features) for recurrent nodes (time-major)
      if (read_as_sequence_only(out())) {
        time_major_[out()] = x;
        return;
      }
    }
    if (perm[0] != 0) throw Unsupported("perm moves the batch axis (Loom's Transpose permutes the axes after it)");
    std::vector<bool> seen(static_cast<size_t>(r), false);
    Axes p;
    for (size_t i = 1; i < perm.size(); ++i) {
      if (perm[i] < 1 || perm[i] >= r || seen[static_cast<size_t>(perm[i])]) throw Unsupported("perm is not a permutation");
      seen[static_cast<size_t>(perm[i])] = true;
      p.push_back(perm[i] - 1);
    }
    set(out(), nn::Transpose(x, p, unique(out())));
  }

  void import_concat() {
    only_attrs({"axis"});
    single_output();
    if (!attr("axis")) throw Unsupported("no axis");
    std::vector<nn::Layer> ins;
    for (size_t i = 0; i < n_inputs(); ++i) ins.push_back(value(i));
    if (ins.empty()) throw Unsupported("no inputs");
    const int64_t axis = norm_axis(attr_int("axis", 0), rank_of(ins[0]));
    if (axis == 0) throw Unsupported("axis 0 (Loom's Concat joins samples, not batches)");
    set(out(), nn::Concat(ins, axis, unique(out())));
  }

  // ------------------------------------------------------------------ embeddings, one-hot
  // Gather of rows of a float32 table (an initializer) by integer ids: a Lookup (embedding).
  void import_gather() {
    only_attrs({"axis"});
    single_output();
    if (!is_const(0)) throw Unsupported("its data is computed (Loom's Lookup gathers from a table of weights: an initializer)");
    const Tensor& table = constant(0, "data");
    if (attr_int("axis", 0) != 0) throw Unsupported("axis " + std::to_string(attr_int("axis", 0)) + " (an embedding lookup gathers rows: axis 0)");
    if (table.ndim() != 2) throw Unsupported("data of rank " + std::to_string(table.ndim()) + " (Loom's Lookup reads a (vocabulary, units) table)");
    if (table.dtype() != DType::Float32) throw Unsupported(std::string("a table of dtype ") + dtype_name(table.dtype()) + " (Loom's Lookup is float32)");
    if (table.shape()[0] < 1 || table.shape()[1] < 1) throw Unsupported("an empty table");
    const nn::Layer ids = value(1);
    if (ids.dtype() != DType::Int64 && ids.dtype() != DType::Int32)
      throw Unsupported(std::string("indices of dtype ") + dtype_name(ids.dtype()) + " (valid: int64, int32)");
    if (rank_of(ids) < 1) throw Unsupported("scalar indices (a Lookup's ids have a batch axis)");
    nn::Lookup l(ids, table.shape()[0], table.shape()[1], {}, unique(out()));
    if (batchless_.count(ids.impl().get())) batchless_.insert(l.impl().get());  // a table of positions
    param(l, "weights", table);
    set(out(), l);
  }

  // OneHot with values (0, 1) on the last axis: a OneHot layer of the values' dtype.
  void import_one_hot() {
    only_attrs({"axis"});
    single_output();
    const nn::Layer ids = value(0);
    const int64_t r = rank_of(ids) + 1;
    if (norm_axis(attr_int("axis", -1), r) != r - 1)
      throw Unsupported("axis " + std::to_string(attr_int("axis", -1)) + " (Loom's OneHot adds the classes as the last axis)");
    if (!is_integral(ids.dtype())) throw Unsupported(std::string("indices of dtype ") + dtype_name(ids.dtype()) + " (Loom's OneHot reads integer ids)");
    const Tensor& depth = constant(1, "depth");
    if (depth.numel() != 1) throw Unsupported("depth has " + std::to_string(depth.numel()) + " values (one is valid)");
    const double d = scalar_of(depth);
    if (!(d >= 1 && d <= kMaxAttr) || d != std::floor(d)) throw Unsupported("depth " + std::to_string(d) + " (valid: an integer from 1 to 2^20)");
    const Tensor& values = constant(2, "values");
    if (values.numel() != 2) throw Unsupported("values has " + std::to_string(values.numel()) + " elements (off and on: 2)");
    const Tensor v = values.astype(DType::Float64).contiguous();
    const double off = static_cast<const double*>(v.data_ptr())[0], on = static_cast<const double*>(v.data_ptr())[1];
    if (off != 0 || on != 1) throw Unsupported("values (" + std::to_string(off) + ", " + std::to_string(on) + ") (Loom's OneHot writes 0 and 1)");
    set(out(), nn::OneHot(ids, static_cast<int64_t>(d), values.dtype(), unique(out())));
  }

  // ------------------------------------------------------------------ adaptive average pooling
  // The node of the given operator computing `v` (added to `nodes`); nullptr otherwise.
  const onnx::NodeProto* made_by(const std::string& v, const char* op, std::set<int>& nodes) const {
    auto it = producer_.find(v);
    if (it == producer_.end()) return nullptr;
    const onnx::NodeProto& n = g_.node(it->second);
    if (n.op_type() != op || !n.domain().empty()) return nullptr;
    nodes.insert(it->second);
    return &n;
  }
  bool const_is(const std::string& name, const std::vector<int64_t>& want, const Shape& shape) const {
    auto it = consts_.find(name);
    return it != consts_.end() && is_integral(it->second.dtype()) && it->second.shape() == shape && ints_of(it->second) == want;
  }
  static int64_t int_attr_of(const onnx::NodeProto& n, const char* name, int64_t dflt) {
    for (const auto& a : n.attribute())
      if (a.name() == name) return a.i();
    return dflt;
  }
  // o when `p` is the (o, L) averaging matrix onnx_export.cpp's adaptive_matrix builds from the axis
  // `axis` of x (Shape, Squeeze, Range, Mul, Div, Add, GreaterOrEqual, Less, And, Cast, Sub); 0 otherwise.
  int64_t adaptive_matrix_size(const std::string& p, const std::string& x, int64_t axis, std::set<int>& nodes) const {
    const auto two = [](const onnx::NodeProto* n) { return n && n->input_size() == 2 && n->output_size() == 1; };
    const onnx::NodeProto* div = made_by(p, "Div", nodes);
    if (!two(div)) return 0;
    const onnx::NodeProto *inf = made_by(div->input(0), "Cast", nodes), *cntf = made_by(div->input(1), "Cast", nodes);
    if (!inf || !cntf || int_attr_of(*inf, "to", 0) != onnx::TensorProto::FLOAT || int_attr_of(*cntf, "to", 0) != onnx::TensorProto::FLOAT) return 0;
    const onnx::NodeProto *in = made_by(inf->input(0), "And", nodes), *cnt = made_by(cntf->input(0), "Sub", nodes);
    if (!two(in) || !two(cnt)) return 0;
    const std::string &end = cnt->input(0), &start = cnt->input(1);
    const onnx::NodeProto *ge = made_by(in->input(0), "GreaterOrEqual", nodes), *lt = made_by(in->input(1), "Less", nodes);
    if (!two(ge) || !two(lt) || ge->input(1) != start || lt->input(1) != end || ge->input(0) != lt->input(0)) return 0;
    const onnx::NodeProto* range = made_by(ge->input(0), "Range", nodes);
    if (!range || range->input_size() != 3 || !const_is(range->input(0), {0}, {}) || !const_is(range->input(2), {1}, {})) return 0;
    const onnx::NodeProto* sq = made_by(range->input(1), "Squeeze", nodes);
    if (!two(sq) || !const_is(sq->input(1), {0}, {1})) return 0;
    const std::string& len = sq->input(0);
    const onnx::NodeProto* shape = made_by(len, "Shape", nodes);
    if (!shape || shape->input_size() != 1 || shape->input(0) != x || shape->attribute_size() != 2 || int_attr_of(*shape, "start", -1) != axis ||
        int_attr_of(*shape, "end", -1) != axis + 1)
      return 0;
    const onnx::NodeProto *sdiv = made_by(start, "Div", nodes), *ediv = made_by(end, "Div", nodes);
    if (!two(sdiv) || !two(ediv) || sdiv->input(1) != ediv->input(1)) return 0;
    const auto oc = consts_.find(sdiv->input(1));
    if (oc == consts_.end() || oc->second.numel() != 1 || !is_integral(oc->second.dtype())) return 0;
    const int64_t o = ints_of(oc->second)[0];
    if (o < 1 || o > kMaxAttr || !const_is(sdiv->input(1), {o}, {1})) return 0;
    const onnx::NodeProto *il = made_by(sdiv->input(0), "Mul", nodes), *add = made_by(ediv->input(0), "Add", nodes);
    if (!two(il) || !two(add) || il->input(1) != len || !const_is(add->input(1), {o - 1}, {1})) return 0;
    const onnx::NodeProto* i1l = made_by(add->input(0), "Mul", nodes);
    if (!two(i1l) || i1l->input(1) != len) return 0;
    std::vector<int64_t> i(static_cast<size_t>(o)), i1(static_cast<size_t>(o));
    for (int64_t k = 0; k < o; ++k) i[static_cast<size_t>(k)] = k, i1[static_cast<size_t>(k)] = k + 1;
    if (!const_is(il->input(0), i, {o, 1}) || !const_is(i1l->input(0), i1, {o, 1})) return 0;
    return o;
  }
  // The exporter's AdaptiveAvgPool2D: y = MatMul(MatMul(rows, x), Transpose(cols)) with the
  // averaging matrices above, their nodes read by nothing else: one AdaptiveAvgPool2D.
  void find_adaptive_pools() {
    for (int k = 0; k < g_.node_size(); ++k) {
      const onnx::NodeProto& n = g_.node(k);
      if (n.op_type() != "MatMul" || !n.domain().empty() || n.input_size() != 2 || consts_.count(n.input(1))) continue;
      std::set<int> nodes;
      const onnx::NodeProto *first = made_by(n.input(0), "MatMul", nodes), *t = made_by(n.input(1), "Transpose", nodes);
      if (!first || !t || first->input_size() != 2 || t->input_size() != 1) continue;
      bool perm_ok = false;
      for (const auto& a : t->attribute()) perm_ok = a.name() == "perm" && a.ints_size() == 2 && a.ints(0) == 1 && a.ints(1) == 0;
      if (!perm_ok || t->attribute_size() != 1) continue;
      const std::string& x = first->input(1);
      const int64_t oh = adaptive_matrix_size(first->input(0), x, 2, nodes), ow = adaptive_matrix_size(t->input(0), x, 3, nodes);
      if (oh == 0 || ow == 0) continue;
      // closed: the pattern's values are read by its own nodes only (and by no graph output)
      bool closed = true;
      for (int m : nodes)
        for (const auto& o : g_.node(m).output()) {
          int inside = 0;
          if (auto it = readers_.find(o); it != readers_.end())
            for (const auto& [r, i] : it->second) inside += r == k || nodes.count(r) ? 1 : 0;
          closed = closed && (o.empty() || !uses_.count(o) || uses_.at(o) == inside);
        }
      if (!closed) continue;
      adaptive_[k] = {x, oh, ow};
      done_.insert(nodes.begin(), nodes.end());
    }
  }
  void import_adaptive_pool(const Adaptive& a) {
    if (poisoned_.count(a.x)) return poison(*node_);
    const nn::Layer x = floating(value_named(a.x));
    if (rank_of(x) != 4) throw Unsupported("adaptive pooling of an input of rank " + std::to_string(rank_of(x)) + " (Loom's pools (N, C, H, W))");
    set(out(), nn::AdaptiveAvgPool2D(x, {a.oh, a.ow}, unique(out())));
  }
  nn::Layer value_named(const std::string& name) {
    if (auto it = values_.find(name); it != values_.end()) return it->second;
    throw Unsupported("its input '" + name + "' is computed by no earlier node");
  }

  // ------------------------------------------------------------------ attention
  // A multi-head attention block back as one MultiHeadAttention (and, around a self-attention,
  // a whole TransformerEncoderLayer), from the two forms that write it:
  //   Loom's exporter (batch first): per projection MatMul (+ Add), Reshape (0, 0, H, d) and
  //     Transpose (0, 2, 1, 3); k Transposed (0, 1, 3, 2); scores = q k^T scaled by a constant,
  //     its causal and padding masks as Where(-inf); Softmax; MatMul with v; Transpose (0, 2, 1, 3),
  //     Reshape (0, 0, E); the out projection MatMul (+ Add);
  //   torch.onnx (nn.MultiheadAttention, batch_first, self-attention): Transpose (1, 0, 2) to
  //     (L, N, E), the packed in-projection MatMul (+ Add) of (E, 3E) sliced into q, k, v, each
  //     Reshaped to (L, N H, d) (heads folded into the batch) and Transposed to (N H, L, d) (k to
  //     (N H, d, L)); q divided by √d; Softmax; MatMul with v; Transpose (1, 0, 2), Reshape
  //     (L N, E); the out projection Gemm (or MatMul + Add); Reshape (L, N, E), Transpose (1, 0, 2).
  // The shape arithmetic torch writes (Shape, Gather, Div, Concat, ...) is evaluated at two probe
  // sizes: each Reshape must give the shapes above and each Slice the same columns at both.
  // Anything else (masks added to the scores, cross-attention, other head splits) is refused
  // by the Softmax node, with the reason.
  struct AttentionBlock {
    std::string q, k, v, keep;  // the batch-first inputs (N, L, E), (N, S, E), the padding mask (N, S)
    bool causal = false;
    int64_t heads = 0;
    Tensor wq, wk, wv, wo, bq, bk, bv, bo;  // Loom's layout: (in, out) matrices; biases undefined without
    std::string out;                        // the block's (N, L, E) value
    std::set<int> nodes;
  };
  struct EncoderBlock {
    AttentionBlock att;
    std::string x, out;
    bool norm_first = false;
    double eps = 1e-5;
    nn::ActivationFn act = nn::relu;
    Tensor n1w, n1b, n2w, n2b, w1, b1, w2, b2;
    std::set<int> nodes;
  };
  std::map<int, AttentionBlock> attention_;  // by the index of the block's last node
  std::map<int, EncoderBlock> encoders_;

  const onnx::NodeProto* producer_of(const std::string& v, int* at = nullptr) const {
    auto it = producer_.find(v);
    if (it == producer_.end()) return nullptr;
    if (at) *at = it->second;
    return &g_.node(it->second);
  }
  // The node computing `v` when it is `op` of the default domain with one output; throws `why` otherwise.
  const onnx::NodeProto& need(const std::string& v, const char* op, std::set<int>& nodes, const std::string& why) const {
    int k = 0;
    const onnx::NodeProto* n = producer_of(v, &k);
    if (!n || n->op_type() != op || !n->domain().empty() || n->output_size() != 1)
      throw Unsupported(why + ": '" + v + "' is computed by " + (n ? n->op_type() + " (node '" + node_name(*n) + "')" : std::string("no node")) +
                        ", not " + op);
    nodes.insert(k);
    return *n;
  }
  void need_perm(const onnx::NodeProto& t, const std::vector<int64_t>& p, const std::string& what) const {
    if (t.input_size() != 1 || t.output_size() != 1 || t.attribute_size() != 1 || perm_of(t) != p) {
      std::string want;
      for (int64_t i : p) want += (want.empty() ? "" : ", ") + std::to_string(i);
      throw Unsupported(what + ": the Transpose (node '" + node_name(t) + "') is not perm (" + want + ")");
    }
  }
  // Mul or Div of `v` by a scalar constant: peeled off, its factor multiplied into `scale`.
  std::string peel_scale(const std::string& v, double& scale, std::set<int>& nodes) const {
    int k = 0;
    const onnx::NodeProto* n = producer_of(v, &k);
    if (!n || !n->domain().empty() || (n->op_type() != "Mul" && n->op_type() != "Div") || n->input_size() != 2) return v;
    const bool div = n->op_type() == "Div";
    const int ci = consts_.count(n->input(1)) ? 1 : (!div && consts_.count(n->input(0)) ? 0 : -1);
    if (ci < 0) return v;
    const Tensor& c = consts_.at(n->input(ci));
    if (c.numel() != 1 || !is_floating(c.dtype())) return v;
    const double f = scalar_of(c);
    if (!(f != 0 && std::isfinite(f))) return v;
    scale *= div ? 1.0 / f : f;
    nodes.insert(k);
    return n->input(1 - ci);
  }
  // The readers of `v`: node indices (a graph output counts as a reader outside every block).
  std::vector<int> readers_of(const std::string& v) const {
    std::vector<int> r;
    if (auto it = readers_.find(v); it != readers_.end())
      for (const auto& [k, i] : it->second) r.push_back(k);
    return r;
  }
  bool is_graph_output(const std::string& v) const {
    for (const auto& o : g_.output())
      if (o.name() == v) return true;
    return false;
  }
  // The one node of `op` reading `v` as its first input when the others reading it are Shape nodes
  // (torch.onnx's shape arithmetic, evaluated by the caller), -1 otherwise.
  int reader_besides_shapes(const std::string& v, const char* op) const {
    int found = -1;
    if (is_graph_output(v)) return -1;
    if (auto it = readers_.find(v); it != readers_.end())
      for (const auto& [k, i] : it->second) {
        const auto& n = g_.node(k);
        if (n.op_type() == "Shape" && n.domain().empty()) continue;
        if (found >= 0 || n.op_type() != op || !n.domain().empty() || i != 0 || n.output_size() != 1) return -1;
        found = k;
      }
    return found;
  }
  // The one node reading `v` (nothing else, no graph output), with one output; -1 otherwise.
  int only_reader(const std::string& v) const {
    const std::vector<int> r = readers_of(v);
    return r.size() == 1 && !is_graph_output(v) && g_.node(r[0]).output_size() == 1 ? r[0] : -1;
  }

  // Integer values computed from shapes, evaluated with `shapes` (the shapes of the block's
  // values at a probe size); nullopt when a value is not computable that way. Vectors are flat
  // (a scalar is one value).
  std::optional<std::vector<int64_t>> eval_ints(const std::string& v, const std::map<std::string, std::vector<int64_t>>& shapes, std::set<int>& nodes,
                                                int depth = 0) const {
    if (depth > 64) return std::nullopt;
    if (auto it = ints_memo_.find(v); it != ints_memo_.end()) return it->second;
    auto r = eval_ints_of(v, shapes, nodes, depth);
    if (r && r->size() > 16) r = std::nullopt;  // shapes have at most 16 dimensions
    if (r) ints_memo_[v] = *r;  // successes only: a value not computable yet may be once more shapes are known
    return r;
  }
  // (cleared for each probe size: the values depend on it)
  mutable std::unordered_map<std::string, std::vector<int64_t>> ints_memo_;
  std::optional<std::vector<int64_t>> eval_ints_of(const std::string& v, const std::map<std::string, std::vector<int64_t>>& shapes, std::set<int>& nodes,
                                                   int depth) const {
    if (auto it = consts_.find(v); it != consts_.end()) {
      if (!is_integral(it->second.dtype()) || it->second.numel() > 16) return std::nullopt;
      return ints_of(it->second);
    }
    int k = 0;
    const onnx::NodeProto* n = producer_of(v, &k);
    if (!n || !n->domain().empty() || n->output_size() != 1) return std::nullopt;
    const std::string& op = n->op_type();
    if (op == "Shape") {
      std::vector<int64_t> dims;
      if (auto s = shapes.find(n->input(0)); s != shapes.end()) dims = s->second;
      else if (consts_.count(n->input(0))) dims.assign(consts_.at(n->input(0)).shape().begin(), consts_.at(n->input(0)).shape().end());  // an initializer's
      else return std::nullopt;
      const int64_t r = static_cast<int64_t>(dims.size());
      int64_t b = int_attr_of(*n, "start", 0), e = int_attr_of(*n, "end", r);
      b = std::clamp(b < 0 ? b + r : b, int64_t{0}, r);
      e = std::clamp(e < 0 ? e + r : e, int64_t{0}, r);
      nodes.insert(k);
      return e > b ? std::vector<int64_t>(dims.begin() + b, dims.begin() + e) : std::vector<int64_t>{};
    }
    std::vector<std::vector<int64_t>> in;
    for (const auto& i : n->input()) {
      if (i.empty()) return std::nullopt;
      auto r = eval_ints(i, shapes, nodes, depth + 1);
      if (!r) return std::nullopt;
      in.push_back(std::move(*r));
    }
    nodes.insert(k);
    if (in.empty()) return std::nullopt;
    if (op == "Unsqueeze" || op == "Squeeze" || op == "Identity") return in[0];
    if (op == "Cast") {
      const int64_t to = int_attr_of(*n, "to", 0);
      if (to != onnx::TensorProto::INT64 && to != onnx::TensorProto::INT32) return std::nullopt;
      return in[0];
    }
    if (op == "Concat") {
      std::vector<int64_t> r;
      for (const auto& x : in) r.insert(r.end(), x.begin(), x.end());
      return r;
    }
    if (op == "Gather" && in.size() == 2 && int_attr_of(*n, "axis", 0) == 0) {
      std::vector<int64_t> r;
      const int64_t size = static_cast<int64_t>(in[0].size());
      for (int64_t i : in[1]) {
        if (i < -size || i >= size) return std::nullopt;
        r.push_back(in[0][static_cast<size_t>(i < 0 ? i + size : i)]);
      }
      return r;
    }
    if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div") && in.size() == 2) {
      const size_t size = std::max(in[0].size(), in[1].size());
      if ((in[0].size() != size && in[0].size() != 1) || (in[1].size() != size && in[1].size() != 1)) return std::nullopt;
      std::vector<int64_t> r;
      for (size_t i = 0; i < size; ++i) {
        const int64_t a = in[0][in[0].size() == 1 ? 0 : i], b = in[1][in[1].size() == 1 ? 0 : i];
        constexpr int64_t lim = int64_t{1} << 31;  // products stay within int64
        if (a < -lim || a > lim || b < -lim || b > lim) return std::nullopt;
        if (op == "Div" && b == 0) return std::nullopt;
        r.push_back(op == "Add" ? a + b : op == "Sub" ? a - b : op == "Mul" ? a * b : a / b);
      }
      return r;
    }
    if (op == "Slice" && in.size() >= 3 && in[1].size() == 1 && in[2].size() == 1) {
      if (in.size() > 3 && in[3] != std::vector<int64_t>{0} && in[3] != std::vector<int64_t>{-1}) return std::nullopt;
      if (in.size() > 4 && in[4] != std::vector<int64_t>{1}) return std::nullopt;
      const int64_t size = static_cast<int64_t>(in[0].size());
      int64_t b = in[1][0], e = in[2][0];
      b = std::clamp(b < 0 ? b + size : b, int64_t{0}, size);
      e = std::clamp(e < 0 ? e + size : e, int64_t{0}, size);
      return e > b ? std::vector<int64_t>(in[0].begin() + b, in[0].begin() + e) : std::vector<int64_t>{};
    }
    return std::nullopt;
  }
  // The shape a Reshape of `in` to the evaluated `target` gives (0 copies, -1 infers; allowzero 0).
  static std::optional<std::vector<int64_t>> reshaped(const std::vector<int64_t>& in, std::vector<int64_t> target) {
    int64_t total = 1, known = 1, infer = -1;
    for (int64_t d : target)
      if (d > kMaxAttr) return std::nullopt;  // the probes' shapes are small: no product overflows
    for (int64_t d : in) total *= d;
    for (size_t i = 0; i < target.size(); ++i) {
      if (target[i] == 0) {
        if (i >= in.size()) return std::nullopt;
        target[i] = in[i];
      }
      if (target[i] == -1) {
        if (infer >= 0) return std::nullopt;
        infer = static_cast<int64_t>(i);
      } else if (target[i] < 0) {
        return std::nullopt;
      } else {
        known *= target[i];
        if (known > (int64_t{1} << 40)) return std::nullopt;
      }
    }
    if (infer >= 0) {
      if (known == 0 || total % known != 0) return std::nullopt;
      target[static_cast<size_t>(infer)] = total / known;
    } else if (known != total) {
      return std::nullopt;
    }
    return target;
  }
  static std::string ints_str(const std::vector<int64_t>& v) {
    std::string s = "(";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + ")";
  }

  // y = x W (+ b) as Loom's exporter or torch.onnx write a projection: MatMul by a constant (E_in,
  // E_out) matrix, then an Add of a constant bias (either operand order), or Gemm (transB). Returns x.
  std::string projection(const std::string& y, Tensor& w, Tensor& b, std::set<int>& nodes, const std::string& what) const {
    int k = 0;
    const onnx::NodeProto* n = producer_of(y, &k);
    std::string mm = y;
    if (n && n->op_type() == "Add" && n->domain().empty() && n->input_size() == 2) {
      const int ci = consts_.count(n->input(1)) ? 1 : consts_.count(n->input(0)) ? 0 : -1;
      if (ci >= 0) {
        b = consts_.at(n->input(ci));
        nodes.insert(k);
        mm = n->input(1 - ci);
        n = producer_of(mm, &k);
      }
    }
    if (n && n->op_type() == "Gemm" && n->domain().empty() && !b.defined()) {
      for (const auto& a : n->attribute())
        if (!((a.name() == "alpha" || a.name() == "beta") && a.f() == 1.0f) && !(a.name() == "transB") && !(a.name() == "transA" && a.i() == 0))
          throw Unsupported(what + ": the Gemm (node '" + node_name(*n) + "') has the attribute " + a.name() + " set otherwise than a projection");
      if (n->input_size() < 2 || !consts_.count(n->input(1))) throw Unsupported(what + ": the Gemm's B is not an initializer");
      w = consts_.at(n->input(1));
      if (w.ndim() != 2) throw Unsupported(what + ": the weights of the shape " + shape_str(w.shape()));
      if (int_attr_of(*n, "transB", 0) != 0) w = transpose(w).contiguous();
      if (n->input_size() > 2 && !n->input(2).empty()) {
        if (!consts_.count(n->input(2))) throw Unsupported(what + ": the Gemm's C is not an initializer");
        b = consts_.at(n->input(2));
      }
      nodes.insert(k);
      return n->input(0);
    }
    if (!n || n->op_type() != "MatMul" || !n->domain().empty() || n->input_size() != 2 || !consts_.count(n->input(1)))
      throw Unsupported(what + ": '" + mm + "' is not a MatMul by an initializer (a projection)");
    w = consts_.at(n->input(1));
    if (w.ndim() != 2) throw Unsupported(what + ": the weights of the shape " + shape_str(w.shape()) + " (a projection's are (in, out))");
    nodes.insert(k);
    return n->input(0);
  }
  // A bias of `units` values (any shape of ones but the last), as (units); undefined stays undefined.
  static Tensor bias_vector(const Tensor& b, int64_t units, const std::string& what) {
    if (!b.defined()) return b;
    for (size_t i = 0; i + 1 < b.shape().size(); ++i)
      if (b.shape()[i] != 1) throw Unsupported(what + ": the bias of the shape " + shape_str(b.shape()) + ", not (" + std::to_string(units) + ")");
    if (b.numel() != units) throw Unsupported(what + ": the bias of the shape " + shape_str(b.shape()) + ", not (" + std::to_string(units) + ")");
    return b.reshape({units}).contiguous();
  }

  // Loom's exporter's heads of one projection: Transpose (0, 2, 1, 3) of Reshape (0, 0, H, d) of
  // x W (+ b). Returns x; sets heads and d.
  std::string loom_heads(const std::string& t, Tensor& w, Tensor& b, int64_t& heads, int64_t& d, std::set<int>& nodes, const std::string& what) const {
    const auto& tr = need(t, "Transpose", nodes, what);
    need_perm(tr, {0, 2, 1, 3}, what);
    const auto& r = need(tr.input(0), "Reshape", nodes, what);
    if (r.input_size() != 2 || !consts_.count(r.input(1))) throw Unsupported(what + ": the Reshape (node '" + node_name(r) + "') has no constant shape");
    for (const auto& a : r.attribute())
      if (a.name() != "allowzero" || a.i() != 0) throw Unsupported(what + ": the Reshape's attribute " + a.name());
    const std::vector<int64_t> s = ints_of(consts_.at(r.input(1)));
    if (s.size() != 4 || s[0] != 0 || s[1] != 0 || s[2] < 1 || s[3] < 1)
      throw Unsupported(what + ": the Reshape (node '" + node_name(r) + "') to " + ints_str(s) + " (the heads' split is (0, 0, heads, head size))");
    heads = s[2];
    d = s[3];
    return projection(r.input(0), w, b, nodes, what);
  }

  // Loom's exporter's masks on the scores, Where(mask, -inf, scores): the causal one (Greater of
  // the key and query positions, Range over Shape of the query and key inputs) and the padding
  // one (Not of the keep mask Cast to bool and Unsqueezed (1, 2)). Returns the scores under them.
  std::string loom_masks(std::string s, AttentionBlock& a, std::set<int>& nodes) const {
    const auto minus_inf = [&](const std::string& c) {
      auto it = consts_.find(c);
      if (it == consts_.end() || it->second.numel() != 1 || !is_floating(it->second.dtype())) return false;
      const double v = scalar_of(it->second);
      return std::isinf(v) && v < 0;
    };
    const auto positions = [&](const std::string& r, std::string& of) {  // Range(0, Squeeze(Shape(of)[1:2], 0), 1)
      const auto& range = need(r, "Range", nodes, "the causal mask");
      if (range.input_size() != 3 || !const_is(range.input(0), {0}, {}) || !const_is(range.input(2), {1}, {}))
        throw Unsupported("the causal mask: the Range (node '" + node_name(range) + "') is not from 0 by 1");
      const auto& sq = need(range.input(1), "Squeeze", nodes, "the causal mask");
      if (!squeeze_axis(0)(sq)) throw Unsupported("the causal mask: the Squeeze (node '" + node_name(sq) + "') is not of axis 0");
      const auto& sh = need(sq.input(0), "Shape", nodes, "the causal mask");
      if (sh.input_size() != 1 || sh.attribute_size() != 2 || int_attr_of(sh, "start", -1) != 1 || int_attr_of(sh, "end", -1) != 2)
        throw Unsupported("the causal mask: the Shape (node '" + node_name(sh) + "') is not the length (start 1, end 2)");
      of = sh.input(0);
    };
    for (int k = 0, steps = 0;; ++steps) {
      const onnx::NodeProto* w = producer_of(s, &k);
      if (!w || w->op_type() != "Where" || !w->domain().empty()) return s;
      if (steps == 2) throw Unsupported("more than two masks (Where) on the scores");  // Loom writes at most two (and a cyclic file stops here)
      if (w->input_size() != 3 || !minus_inf(w->input(1)))
        throw Unsupported("a Where (node '" + node_name(*w) + "') on the scores that is not a mask to -inf");
      nodes.insert(k);
      int kc = 0;
      const onnx::NodeProto* c = producer_of(w->input(0), &kc);
      if (c && c->op_type() == "Greater" && c->input_size() == 2 && !a.causal) {
        nodes.insert(kc);
        const auto& un = need(c->input(1), "Unsqueeze", nodes, "the causal mask");
        if (!(un.input_size() == 2 && const_is(un.input(1), {1}, {1})))
          throw Unsupported("the causal mask: the Unsqueeze (node '" + node_name(un) + "') is not of axis 1");
        std::string lq, lk;
        positions(un.input(0), lq);
        positions(c->input(0), lk);
        a.causal = true;
        a.q = lq;  // checked against the projections' inputs by the caller
        a.k = lk;
      } else if (c && c->op_type() == "Not" && c->input_size() == 1 && a.keep.empty()) {
        nodes.insert(kc);
        const auto& un = need(c->input(0), "Unsqueeze", nodes, "the padding mask");
        if (!(un.input_size() == 2 && const_is(un.input(1), {1, 2}, {2})))
          throw Unsupported("the padding mask: the Unsqueeze (node '" + node_name(un) + "') is not of axes (1, 2)");
        const auto& cast = need(un.input(0), "Cast", nodes, "the padding mask");
        if (cast.input_size() != 1 || int_attr_of(cast, "to", 0) != onnx::TensorProto::BOOL)
          throw Unsupported("the padding mask: the Cast (node '" + node_name(cast) + "') is not to bool");
        a.keep = cast.input(0);
      } else {
        throw Unsupported("a mask on the scores (Where, node '" + node_name(*w) + "') that is neither Loom's causal nor its padding mask");
      }
      s = w->input(2);
    }
  }

  // The block around the Softmax node `k` (see above); throws Unsupported with the reason.
  AttentionBlock match_attention(int k) const {
    const onnx::NodeProto& sm = g_.node(k);
    AttentionBlock a;
    std::set<int>& nodes = a.nodes;
    nodes.insert(k);
    for (const auto& at : sm.attribute())
      if (at.name() != "axis" || at.i() != -1) throw Unsupported("the Softmax is not over the last axis (axis -1)");
    if (opset_ < 13) throw Unsupported("the model's opset " + std::to_string(opset_) + " (attention is imported from opset 13 on)");
    // the weighted sum: Softmax read by one MatMul as its left operand
    const int km = only_reader(sm.output(0));
    if (km < 0 || g_.node(km).op_type() != "MatMul" || g_.node(km).input(0) != sm.output(0) || g_.node(km).input_size() != 2)
      throw Unsupported("the attention weights are read by other than one MatMul with the values (they are an output, or averaged, or dropped out)");
    nodes.insert(km);
    const onnx::NodeProto& pv = g_.node(km);
    double scale = 1;
    std::string causal_q, causal_k;
    std::string scores = peel_scale(loom_masks(peel_scale(sm.input(0), scale, nodes), a, nodes), scale, nodes);
    if (a.causal) causal_q = a.q, causal_k = a.k;
    int kqk = 0;
    const onnx::NodeProto* qk = producer_of(scores, &kqk);
    if (!qk || qk->op_type() != "MatMul" || !qk->domain().empty() || qk->input_size() != 2) {
      if (qk && (qk->op_type() == "Add" || qk->op_type() == "Where"))
        throw Unsupported("a mask on the scores (" + qk->op_type() + ", node '" + node_name(*qk) + "': attn_mask or key_padding_mask) is not imported");
      throw Unsupported("the scores '" + scores + "' are not a MatMul of the queries and keys");
    }
    nodes.insert(kqk);
    const std::string qs = peel_scale(qk->input(0), scale, nodes), ks = peel_scale(qk->input(1), scale, nodes);
    int kt = 0;
    const onnx::NodeProto* qt = producer_of(qs, &kt);
    if (!qt || qt->op_type() != "Transpose") throw Unsupported("the queries '" + qs + "' are not a Transpose of heads");
    int64_t d = 0;
    const std::vector<int64_t> qperm = perm_of(*qt);
    if (qperm == std::vector<int64_t>{0, 2, 1, 3}) {  // Loom's exporter
      int64_t hq = 0, hk = 0, hv = 0, dq = 0, dk = 0, dv = 0;
      a.q = loom_heads(qs, a.wq, a.bq, hq, dq, nodes, "the query projection");
      const auto& kt2 = need(ks, "Transpose", nodes, "the keys");
      need_perm(kt2, {0, 1, 3, 2}, "the keys");
      a.k = loom_heads(kt2.input(0), a.wk, a.bk, hk, dk, nodes, "the key projection");
      a.v = loom_heads(pv.input(1), a.wv, a.bv, hv, dv, nodes, "the value projection");
      if (hq != hk || hq != hv || dq != dk || dq != dv)
        throw Unsupported("the queries, keys and values are split into different heads " + ints_str({hq, dq}) + ", " + ints_str({hk, dk}) + ", " +
                          ints_str({hv, dv}));
      a.heads = hq;
      d = dq;
      const int kot = only_reader(pv.output(0));
      if (kot < 0 || g_.node(kot).op_type() != "Transpose") throw Unsupported("the attended values are not Transposed (0, 2, 1, 3) (the heads back)");
      need_perm(g_.node(kot), {0, 2, 1, 3}, "the attended values");
      nodes.insert(kot);
      const int kr = only_reader(g_.node(kot).output(0));
      if (kr < 0 || g_.node(kr).op_type() != "Reshape" || g_.node(kr).input_size() != 2 || !const_is(g_.node(kr).input(1), {0, 0, hq * dq}, {3}))
        throw Unsupported("the attended values are not Reshaped to (0, 0, " + std::to_string(hq * dq) + ") (the heads concatenated)");
      nodes.insert(kr);
      a.out = out_projection(g_.node(kr).output(0), a, nodes);
      if (a.causal && (causal_q != a.q || causal_k != a.k)) throw Unsupported("the causal mask is computed from other values than the queries and keys");
    } else {  // torch.onnx
      if (a.causal || !a.keep.empty()) throw Unsupported("a mask on the scores (Where) in torch.onnx's form is not imported");
      torch_heads(a, pv, qs, ks, d, nodes);
    }
    const int64_t e = a.wq.defined() ? a.wq.shape()[0] : 0;
    for (const Tensor* w : {&a.wq, &a.wk, &a.wv, &a.wo})
      if (w->shape() != Shape{e, e}) throw Unsupported("a projection's weights of the shape " + shape_str(w->shape()) + " (valid: (E, E), E the units)");
    if (a.heads < 1 || d < 1 || a.heads * d != e) throw Unsupported(std::to_string(a.heads) + " heads of " + std::to_string(d) + " do not make " + std::to_string(e) + " units");
    const bool bias = a.bq.defined();
    if (a.bk.defined() != bias || a.bv.defined() != bias || a.bo.defined() != bias)
      throw Unsupported("some projections have a bias and others none (Loom's MultiHeadAttention has all four or none)");
    a.bq = bias_vector(a.bq, e, "the query projection");
    a.bk = bias_vector(a.bk, e, "the key projection");
    a.bv = bias_vector(a.bv, e, "the value projection");
    a.bo = bias_vector(a.bo, e, "the out projection");
    if (std::abs(scale * std::sqrt(static_cast<double>(d)) - 1) > 1e-6)
      throw Unsupported("the scores are scaled by " + std::to_string(scale) + ", not 1/sqrt(" + std::to_string(d) + ") (the head size)");
    // closed: the block's values are read by its own nodes only, but its output
    for (int m : nodes)
      for (const auto& o : g_.node(m).output()) {
        if (o.empty() || o == a.out) continue;
        if (is_graph_output(o)) throw Unsupported("the block's value '" + o + "' is a graph output");
        for (int r : readers_of(o))
          if (!nodes.count(r)) throw Unsupported("the block's value '" + o + "' is read by the node '" + node_name(g_.node(r)) + "' outside it");
      }
    int last = 0;
    if (!producer_of(a.out, &last) || *nodes.rbegin() != last) throw Unsupported("the block's nodes are not in topological order");
    return a;
  }
  // The out projection reading the concatenated heads `c`: MatMul (+ Add) or Gemm; returns its value.
  std::string out_projection(const std::string& c, AttentionBlock& a, std::set<int>& nodes) const {
    const int kp = only_reader(c);
    if (kp < 0) throw Unsupported("the concatenated heads '" + c + "' are read by more than the out projection");
    std::string y = g_.node(kp).output(0);
    if (const int ka = only_reader(y); ka >= 0 && g_.node(ka).op_type() == "Add" && g_.node(kp).op_type() == "MatMul" && g_.node(ka).input_size() == 2 &&
                                       (consts_.count(g_.node(ka).input(0)) || consts_.count(g_.node(ka).input(1))))
      y = g_.node(ka).output(0);
    if (projection(y, a.wo, a.bo, nodes, "the out projection") != c) throw Unsupported("the out projection does not read the concatenated heads");
    return y;
  }

  // torch.onnx's form (see above), from its queries `qs` (N H, L, d) and keys `ks` (N H, d, S). Each
  // of q, k and v is Reshape(Slice(projection)) (a slice of a packed projection: q, k and v of
  // self-attention from one (E, 3E) matrix, k and v of cross-attention from one (E, 2E)) or
  // Reshape(projection); a projection is MatMul (+ Add) of the Transpose (1, 0, 2) of a batch-first
  // input by an initializer, or by the Transpose (1, 0) of a Slice of one (the rows of torch's
  // in_proj_weight), its bias an initializer or a Slice of one.
  struct TorchHead {
    std::string reshape, slice, proj, mm, xt, x;  // slice empty when the projection is the head's own
    Tensor w, b;                                  // the projection's (in, out) weights and bias, when initializers
    std::string w_slice, b_slice;                 // otherwise Slices of initializers (rows of (out, in) weights)
  };
  // Slice of an initializer along axis 0 with bounds evaluated at a probe: [start, end).
  std::pair<int64_t, int64_t> initializer_rows(const std::string& v, const std::map<std::string, std::vector<int64_t>>& shapes, std::set<int>& nodes) const {
    const onnx::NodeProto& s = *producer_of(v);
    const Tensor& t = consts_.at(s.input(0));
    std::vector<std::optional<std::vector<int64_t>>> b;
    for (int j = 1; j < s.input_size(); ++j) b.push_back(eval_ints(s.input(j), shapes, nodes));
    for (const auto& x : b)
      if (!x || x->size() != 1) throw Unsupported("the Slice (node '" + node_name(s) + "') has bounds the importer cannot evaluate");
    if (b.size() < 2 || (b.size() > 2 && (*b[2])[0] != 0) || (b.size() > 3 && (*b[3])[0] != 1))
      throw Unsupported("the Slice (node '" + node_name(s) + "') of the weights is not of rows (axis 0, step 1)");
    const int64_t rows = t.shape().empty() ? 0 : t.shape()[0];
    const int64_t lo = std::clamp((*b[0])[0] < 0 ? (*b[0])[0] + rows : (*b[0])[0], int64_t{0}, rows),
                  hi = std::clamp((*b[1])[0] < 0 ? (*b[1])[0] + rows : (*b[1])[0], int64_t{0}, rows);
    if (hi <= lo) throw Unsupported("the Slice (node '" + node_name(s) + "') of the weights is empty");
    return {lo, hi};
  }
  bool slice_of_initializer(const std::string& v) const {
    const onnx::NodeProto* s = producer_of(v);
    return s && s->op_type() == "Slice" && s->domain().empty() && s->input_size() >= 3 && consts_.count(s->input(0)) && s->output_size() == 1;
  }
  TorchHead torch_head(const std::string& t, const std::vector<int64_t>& perm, const std::string& what, std::set<int>& nodes) const {
    TorchHead h;
    const auto& tr = need(t, "Transpose", nodes, what);
    need_perm(tr, perm, what);
    const auto& r = need(tr.input(0), "Reshape", nodes, what);
    for (const auto& at : r.attribute())
      if (at.name() != "allowzero" || at.i() != 0) throw Unsupported(what + ": the Reshape's attribute " + at.name());
    if (r.input_size() != 2) throw Unsupported(what + ": the Reshape has no shape");
    h.reshape = tr.input(0);
    h.proj = r.input(0);
    int k = 0;
    if (const onnx::NodeProto* s = producer_of(h.proj, &k); s && s->op_type() == "Slice" && s->input_size() >= 1 && !consts_.count(s->input(0))) {
      if (s->input_size() < 3 || s->input_size() > 5) throw Unsupported(what + ": the Slice (node '" + node_name(*s) + "') has " + std::to_string(s->input_size()) + " inputs");
      nodes.insert(k);
      h.slice = h.proj;
      h.proj = s->input(0);
    }
    // the projection: MatMul (+ Add of the bias)
    h.mm = h.proj;
    if (const onnx::NodeProto* a = producer_of(h.proj, &k); a && a->op_type() == "Add" && a->domain().empty() && a->input_size() == 2) {
      const int bi = (consts_.count(a->input(0)) || slice_of_initializer(a->input(0))) ? 0 : (consts_.count(a->input(1)) || slice_of_initializer(a->input(1))) ? 1 : -1;
      if (bi < 0) throw Unsupported(what + ": the Add (node '" + node_name(*a) + "') after the projection adds no constant bias");
      nodes.insert(k);
      if (consts_.count(a->input(bi))) h.b = consts_.at(a->input(bi));
      else h.b_slice = a->input(bi), nodes.insert(producer_.at(a->input(bi)));
      h.mm = a->input(1 - bi);
    }
    const auto& mm = need(h.mm, "MatMul", nodes, what + " (the projection)");
    if (mm.input_size() != 2) throw Unsupported(what + ": the MatMul has " + std::to_string(mm.input_size()) + " inputs");
    if (consts_.count(mm.input(1))) {
      h.w = consts_.at(mm.input(1));
      if (h.w.ndim() != 2) throw Unsupported(what + ": the projection's weights of the shape " + shape_str(h.w.shape()));
    } else {
      const auto& wt = need(mm.input(1), "Transpose", nodes, what + " (the projection's weights)");
      need_perm(wt, {1, 0}, what + " (the projection's weights)");
      if (!slice_of_initializer(wt.input(0))) throw Unsupported(what + ": the projection's weights are not an initializer nor a Slice of one");
      nodes.insert(producer_.at(wt.input(0)));
      h.w_slice = wt.input(0);
      if (consts_.at(producer_of(h.w_slice)->input(0)).ndim() != 2) throw Unsupported(what + ": the sliced weights are not a matrix");
    }
    h.xt = mm.input(0);
    const auto& t0 = need(h.xt, "Transpose", nodes, what + "'s input");
    need_perm(t0, {1, 0, 2}, what + "'s input (batch first to (length, N, E))");
    h.x = t0.input(0);
    return h;
  }

  void torch_heads(AttentionBlock& a, const onnx::NodeProto& pv, const std::string& qs, const std::string& ks, int64_t& d, std::set<int>& nodes) const {
    TorchHead hs[3] = {torch_head(qs, {1, 0, 2}, "the queries", nodes), torch_head(ks, {1, 2, 0}, "the keys", nodes),
                       torch_head(pv.input(1), {1, 0, 2}, "the values", nodes)};
    a.q = hs[0].x;
    a.k = hs[1].x;
    a.v = hs[2].x;
    // the output: MatMul -> Transpose (1, 0, 2) -> Reshape (L N, E) -> projection -> Reshape (L, N, E) -> Transpose (1, 0, 2)
    const int kt1 = only_reader(pv.output(0));
    if (kt1 < 0 || g_.node(kt1).op_type() != "Transpose") throw Unsupported("the attended values are not Transposed (1, 0, 2)");
    need_perm(g_.node(kt1), {1, 0, 2}, "the attended values");
    nodes.insert(kt1);
    const int kr1 = only_reader(g_.node(kt1).output(0));
    if (kr1 < 0 || g_.node(kr1).op_type() != "Reshape" || g_.node(kr1).input_size() != 2) throw Unsupported("the attended values are not Reshaped to (L N, E)");
    nodes.insert(kr1);
    const std::string y = out_projection(g_.node(kr1).output(0), a, nodes);
    const int kr2 = reader_besides_shapes(y, "Reshape");
    if (kr2 < 0 || g_.node(kr2).input_size() != 2) throw Unsupported("the out projection is not Reshaped to (L, N, E)");
    nodes.insert(kr2);
    const int kt2 = only_reader(g_.node(kr2).output(0));
    if (kt2 < 0 || g_.node(kt2).op_type() != "Transpose") throw Unsupported("the result is not Transposed back to batch first");
    need_perm(g_.node(kt2), {1, 0, 2}, "the result");
    nodes.insert(kt2);
    a.out = g_.node(kt2).output(0);
    const int64_t e = a.wo.defined() && a.wo.ndim() == 2 ? a.wo.shape()[0] : 0;
    if (e < 1) throw Unsupported("the out projection's weights of the shape " + shape_str(a.wo.shape()));
    // the shape arithmetic at two probe sizes (N, L, S): the columns (and rows) each head takes, its split
    std::vector<int64_t> cols[3], rows[3], brows[3];
    int64_t heads = 0;
    for (const auto& probe : {std::array<int64_t, 3>{2, 3, 4}, std::array<int64_t, 3>{3, 7, 5}}) {
      const int64_t n = probe[0], l = probe[1], s_len = a.k == a.q ? l : probe[2];
      ints_memo_.clear();
      std::map<std::string, std::vector<int64_t>> shapes;
      const auto len_of = [&](const std::string& x) { return x == a.q ? l : s_len; };
      for (const TorchHead& h : hs) {  // the inputs first: torch's weight Slices read their shapes
        shapes[h.x] = {n, len_of(h.x), e};
        shapes[h.xt] = {len_of(h.x), n, e};
      }
      for (int i = 0; i < 3; ++i) {
        TorchHead& h = hs[i];
        const std::string hn = i == 0 ? "the queries" : i == 1 ? "the keys" : "the values";
        const int64_t len = len_of(h.x);
        // the projection's weights (in, cols), at this probe
        if (!h.w_slice.empty()) {
          const auto r = initializer_rows(h.w_slice, shapes, nodes);
          if (!rows[i].empty() && rows[i] != std::vector<int64_t>{r.first, r.second}) throw Unsupported(hn + ": the weights' Slice takes other rows at another size");
          rows[i] = {r.first, r.second};
          h.w = transpose(slice(consts_.at(producer_of(h.w_slice)->input(0)), 0, r.first, r.second)).contiguous();
        }
        if (!h.b_slice.empty()) {
          const auto r = initializer_rows(h.b_slice, shapes, nodes);
          if (!brows[i].empty() && brows[i] != std::vector<int64_t>{r.first, r.second}) throw Unsupported(hn + ": the bias' Slice takes other values at another size");
          brows[i] = {r.first, r.second};
          h.b = slice(consts_.at(producer_of(h.b_slice)->input(0)), 0, r.first, r.second).contiguous();
        }
        const int64_t in = h.w.shape()[0], c = h.w.shape()[1];
        if (in != e) throw Unsupported(hn + ": the projection's weights of the shape " + shape_str(h.w.shape()) + " take " + std::to_string(in) + " features, not " + std::to_string(e));
        shapes[h.x] = {n, len, e};
        shapes[h.xt] = {len, n, e};
        shapes[h.mm] = {len, n, c};
        shapes[h.proj] = {len, n, c};
        if (!h.slice.empty()) {
          const auto& sl = *producer_of(h.slice);
          std::vector<std::optional<std::vector<int64_t>>> v;
          for (int j = 1; j < sl.input_size(); ++j) v.push_back(eval_ints(sl.input(j), shapes, nodes));
          for (const auto& x : v)
            if (!x || x->size() != 1) throw Unsupported("the Slice (node '" + node_name(sl) + "') has bounds the importer cannot evaluate");
          const int64_t axis = v.size() > 2 ? (*v[2])[0] : 0;
          if (axis != 2 && axis != -1) throw Unsupported("the Slice (node '" + node_name(sl) + "') is not on the last axis");
          if (v.size() > 3 && (*v[3])[0] != 1) throw Unsupported("the Slice (node '" + node_name(sl) + "') has a step");
          const int64_t b = std::clamp((*v[0])[0] < 0 ? (*v[0])[0] + c : (*v[0])[0], int64_t{0}, c),
                        en = std::clamp((*v[1])[0] < 0 ? (*v[1])[0] + c : (*v[1])[0], int64_t{0}, c);
          if (en - b != e)
            throw Unsupported("the Slice (node '" + node_name(sl) + "') takes " + std::to_string(en - b) + " of the packed projection's columns, not " + std::to_string(e));
          if (!cols[i].empty() && cols[i] != std::vector<int64_t>{b, en}) throw Unsupported("the Slice (node '" + node_name(sl) + "') takes other columns at another size");
          cols[i] = {b, en};
          shapes[h.slice] = {len, n, e};
        } else {
          if (c != e) throw Unsupported(hn + ": the projection gives " + std::to_string(c) + " units, not " + std::to_string(e));
          cols[i] = {0, e};
        }
        const onnx::NodeProto& rn = *producer_of(h.reshape);
        const auto target = eval_ints(rn.input(1), shapes, nodes);
        if (!target) throw Unsupported("the Reshape (node '" + node_name(rn) + "') has a shape the importer cannot evaluate");
        const auto got = reshaped({len, n, e}, *target);
        if (!got) throw Unsupported("the Reshape (node '" + node_name(rn) + "') to " + ints_str(*target) + " does not fit " + ints_str({len, n, e}));
        const std::vector<int64_t>& t = *got;
        if (t.size() != 3 || t[0] != len || t[1] % n != 0 || t[1] / n < 1 || t[1] / n * t[2] != e || (heads && t[1] / n != heads))
          throw Unsupported("the Reshape (node '" + node_name(rn) + "') gives " + ints_str(t) + " at (N, L) = " + ints_str({n, len}) +
                            ", not (L, N heads, E / heads) with the same heads for q, k and v");
        heads = t[1] / n;
        shapes[h.reshape] = t;
      }
      const auto check = [&](int kr, const std::vector<int64_t>& in, const std::vector<int64_t>& want) {
        const auto target = eval_ints(g_.node(kr).input(1), shapes, nodes);
        const auto got = target ? reshaped(in, *target) : std::nullopt;
        if (!got || *got != want)
          throw Unsupported("the Reshape (node '" + node_name(g_.node(kr)) + "') gives " + (got ? ints_str(*got) : std::string("a shape the importer cannot evaluate")) +
                            " at (N, L) = " + ints_str({n, l}) + ", not " + ints_str(want));
        shapes[g_.node(kr).output(0)] = want;
      };
      shapes[pv.output(0)] = {n * heads, l, e / heads};
      shapes[g_.node(kt1).output(0)] = {l, n * heads, e / heads};
      check(kr1, {l, n * heads, e / heads}, {l * n, e});
      shapes[y] = {l * n, e};
      for (int m : nodes)
        if (g_.node(m).output_size() == 1 && g_.node(m).output(0) != y && (g_.node(m).op_type() == "Gemm" || g_.node(m).op_type() == "MatMul") &&
            g_.node(m).input(0) == g_.node(kr1).output(0))
          shapes[g_.node(m).output(0)] = {l * n, e};
      check(kr2, {l * n, e}, {l, n, e});
    }
    a.heads = heads;
    d = e / heads;
    Tensor* ws[3] = {&a.wq, &a.wk, &a.wv};
    Tensor* bs[3] = {&a.bq, &a.bk, &a.bv};
    for (int i = 0; i < 3; ++i) {
      *ws[i] = slice(hs[i].w, 1, cols[i][0], cols[i][1]).contiguous();
      if (hs[i].b.defined()) {
        const Tensor b = bias_vector(hs[i].b, hs[i].w.shape()[1], i == 0 ? "the query projection" : i == 1 ? "the key projection" : "the value projection");
        *bs[i] = slice(b, 0, cols[i][0], cols[i][1]).contiguous();
      }
    }
  }

  // A feed-forward activation reading `h`: Relu, or gelu's Erf formula (Loom's or torch's).
  // Returns its value; sets act and adds its nodes.
  std::optional<std::string> activation_after(const std::string& h, nn::ActivationFn& act, std::set<int>& nodes) const {
    const std::vector<int> r = readers_of(h);
    if (r.size() == 1 && g_.node(r[0]).op_type() == "Relu" && g_.node(r[0]).domain().empty() && g_.node(r[0]).attribute_size() == 0 && g_.node(r[0]).output_size() == 1) {
      nodes.insert(r[0]);
      act = nn::relu;
      return g_.node(r[0]).output(0);
    }
    for (int k : r) {
      std::vector<int> ks;
      std::string y;
      if (gelu_at(k, h, y, ks)) {
        std::set<int> all(ks.begin(), ks.end());
        all.insert(k);
        // h read by the gelu's nodes only
        for (int m : r)
          if (!all.count(m)) return std::nullopt;
        nodes.insert(all.begin(), all.end());
        act = nn::gelu;
        return y;
      }
    }
    return std::nullopt;
  }

  // A TransformerEncoderLayer around the self-attention block `a` (post-norm or norm_first):
  // the residual Adds, the two LayerNormalizations (one epsilon) and the feed-forward
  // (MatMul + Add, Relu or gelu, MatMul + Add), each value read inside the block only.
  std::optional<EncoderBlock> match_encoder(const AttentionBlock& a) const {
    if (a.q != a.k || a.q != a.v) return std::nullopt;
    EncoderBlock e;
    e.att = a;
    std::set<int>& nodes = e.nodes;
    nodes = a.nodes;
    const auto add_of = [&](const std::string& v, const std::string& other, int& k) -> const onnx::NodeProto* {
      const std::vector<int> r = readers_of(v);
      for (int m : r) {
        const auto& n = g_.node(m);
        if (n.op_type() == "Add" && n.domain().empty() && n.input_size() == 2 && n.output_size() == 1 &&
            ((n.input(0) == v && n.input(1) == other) || (n.input(1) == v && n.input(0) == other))) {
          k = m;
          return &n;
        }
      }
      return nullptr;
    };
    const auto layer_norm = [&](const onnx::NodeProto& n, Tensor& w, Tensor& b, double& eps) {
      if (n.op_type() != "LayerNormalization" || !n.domain().empty() || n.input_size() != 3 || n.output_size() < 1 || !consts_.count(n.input(1)) || !consts_.count(n.input(2)))
        return false;
      for (int i = 1; i < n.output_size(); ++i)
        if (!n.output(i).empty() && uses_.count(n.output(i))) return false;
      for (const auto& at : n.attribute())
        if (!(at.name() == "axis" && at.i() == -1) && at.name() != "epsilon" && !(at.name() == "stash_type" && at.i() == 1)) return false;
      w = consts_.at(n.input(1));
      b = consts_.at(n.input(2));
      const int64_t units = a.wq.shape()[0];
      if (w.shape() != Shape{units} || b.shape() != Shape{units}) return false;
      float f = 1e-5f;
      for (const auto& at : n.attribute())
        if (at.name() == "epsilon") f = at.f();
      eps = float_attr(f);
      return true;
    };
    const auto feed_forward = [&](const std::string& h, std::string& f) {
      const std::vector<int> r = readers_of(h);
      int km = -1;
      for (int m : r)
        if (g_.node(m).op_type() == "MatMul" && g_.node(m).input(0) == h && g_.node(m).output_size() == 1) km = m;
      if (km < 0) return false;
      Tensor w1, b1, w2, b2;
      std::set<int> ff;
      ff.insert(km);
      const int ka = only_reader(g_.node(km).output(0));
      if (ka < 0) return false;
      try {
        if (projection(g_.node(ka).output(0), w1, b1, ff, "ff") != h) return false;
        auto act = activation_after(g_.node(ka).output(0), e.act, ff);
        if (!act) return false;
        const int k2 = only_reader(*act);
        if (k2 < 0 || g_.node(k2).op_type() != "MatMul") return false;
        const int k3 = only_reader(g_.node(k2).output(0));
        if (k3 < 0) return false;
        if (projection(g_.node(k3).output(0), w2, b2, ff, "ff") != *act) return false;
        f = g_.node(k3).output(0);
      } catch (const Unsupported&) {
        return false;
      }
      const int64_t units = a.wq.shape()[0];
      if (!b1.defined() || !b2.defined() || w1.shape()[0] != units || w2.shape() != Shape{w1.shape()[1], units}) return false;
      try {
        e.b1 = bias_vector(b1, w1.shape()[1], "ff");
        e.b2 = bias_vector(b2, units, "ff");
      } catch (const Unsupported&) {
        return false;
      }
      e.w1 = w1;
      e.w2 = w2;
      nodes.insert(ff.begin(), ff.end());
      return true;
    };
    int k1 = 0, k2 = 0, kl1 = 0, kl2 = 0;
    double eps1 = 0, eps2 = 0;
    const onnx::NodeProto* ln_in = producer_of(a.q, &kl1);
    if (ln_in && layer_norm(*ln_in, e.n1w, e.n1b, eps1) && readers_of(a.q).size() >= 1) {  // norm_first: x -> LN -> attention
      bool inside = !is_graph_output(a.q);
      for (int r : readers_of(a.q)) inside = inside && a.nodes.count(r);
      if (inside) {
        e.norm_first = true;
        e.x = ln_in->input(0);
        nodes.insert(kl1);
        const onnx::NodeProto* r1 = add_of(a.out, e.x, k1);
        if (!r1 || only_reader(a.out) != k1) return std::nullopt;
        nodes.insert(k1);
        const std::vector<int> rr = readers_of(r1->output(0));
        if (rr.size() != 2 || is_graph_output(r1->output(0))) return std::nullopt;
        const int m = g_.node(rr[0]).op_type() == "LayerNormalization" ? rr[0] : rr[1];
        if (!layer_norm(g_.node(m), e.n2w, e.n2b, eps2) || only_reader(g_.node(m).output(0)) < 0) return std::nullopt;
        kl2 = m;
        nodes.insert(kl2);
        std::string f;
        if (!feed_forward(g_.node(kl2).output(0), f)) return std::nullopt;
        const onnx::NodeProto* r2 = add_of(f, r1->output(0), k2);
        if (!r2 || only_reader(f) != k2) return std::nullopt;
        nodes.insert(k2);
        e.out = r2->output(0);
      }
    }
    if (!e.norm_first) {  // post-norm: attention -> Add x -> LN -> feed-forward -> Add -> LN
      e.x = a.q;
      const onnx::NodeProto* r1 = add_of(a.out, e.x, k1);
      if (!r1 || only_reader(a.out) != k1) return std::nullopt;
      nodes.insert(k1);
      kl1 = only_reader(r1->output(0));
      if (kl1 < 0 || !layer_norm(g_.node(kl1), e.n1w, e.n1b, eps1)) return std::nullopt;
      nodes.insert(kl1);
      const std::string x1 = g_.node(kl1).output(0);
      if (readers_of(x1).size() != 2 || is_graph_output(x1)) return std::nullopt;
      std::string f;
      if (!feed_forward(x1, f)) return std::nullopt;
      const onnx::NodeProto* r2 = add_of(f, x1, k2);
      if (!r2 || only_reader(f) != k2) return std::nullopt;
      nodes.insert(k2);
      kl2 = only_reader(r2->output(0));
      if (kl2 < 0 || !layer_norm(g_.node(kl2), e.n2w, e.n2b, eps2)) return std::nullopt;
      nodes.insert(kl2);
      e.out = g_.node(kl2).output(0);
    }
    if (eps1 != eps2) return std::nullopt;  // Loom's layer has one epsilon
    e.eps = eps1;
    // closed, as the attention block
    for (int m : nodes)
      for (const auto& o : g_.node(m).output()) {
        if (o.empty() || o == e.out) continue;
        if (is_graph_output(o)) return std::nullopt;
        for (int r : readers_of(o))
          if (!nodes.count(r)) return std::nullopt;
      }
    int last = 0;
    if (!producer_of(e.out, &last) || *nodes.rbegin() != last) return std::nullopt;
    return e;
  }

  // Every Softmax that weighs values by scores of two computed values: matched as a block
  // (above), or refused by name with the reason.
  void find_attention() {
    const auto computed_matmul = [&](const std::string& v) {
      auto it = producer_.find(v);
      if (it == producer_.end()) return false;
      const auto& m = g_.node(it->second);
      return m.op_type() == "MatMul" && m.domain().empty() && m.input_size() == 2 && !consts_.count(m.input(0)) && !consts_.count(m.input(1));
    };
    for (int k = 0; k < g_.node_size(); ++k) {
      const auto& n = g_.node(k);
      if (n.op_type() != "Softmax" || !n.domain().empty() || n.input_size() != 1 || n.output_size() != 1 || done_.count(k)) continue;
      // through the masks' Where and Add (torch's baddbmm: Add of the scaled product and the scaled
      // mask), if any, and scales by constants
      const auto unscaled = [&](std::string v) {
        for (int i = 0; i < 3; ++i) {
          auto it = producer_.find(v);
          if (it == producer_.end()) break;
          const auto& s = g_.node(it->second);
          if ((s.op_type() != "Mul" && s.op_type() != "Div") || s.input_size() != 2 || !consts_.count(s.input(1))) break;
          v = s.input(0);
        }
        return v;
      };
      std::string scores = unscaled(n.input(0));
      int steps = 0;  // bounded: a hostile file's values may form a cycle
      for (auto it = producer_.find(scores); it != producer_.end() && (g_.node(it->second).op_type() == "Where" || g_.node(it->second).op_type() == "Add") &&
                                              g_.node(it->second).input_size() >= 3 - (g_.node(it->second).op_type() == "Add") && ++steps < 8;
           it = producer_.find(scores))
        scores = unscaled(g_.node(it->second).op_type() == "Where"                  ? g_.node(it->second).input(2)
                          : computed_matmul(unscaled(g_.node(it->second).input(0))) ? g_.node(it->second).input(0)
                                                                                    : g_.node(it->second).input(1));
      if (!computed_matmul(scores)) continue;
      // read by a MatMul with a computed value (through a Dropout: a training-mode export)
      bool weighs = false;
      const auto weighing = [&](const std::string& v) {
        if (auto it = readers_.find(v); it != readers_.end())
          for (const auto& ri : it->second) {
            const auto& m = g_.node(ri.first);
            weighs = weighs || (m.op_type() == "MatMul" && ri.second == 0 && m.input_size() == 2 && !consts_.count(m.input(1)));
          }
      };
      weighing(n.output(0));
      if (auto it = readers_.find(n.output(0)); it != readers_.end())
        for (const auto& ri : it->second)
          if (g_.node(ri.first).op_type() == "Dropout" && g_.node(ri.first).output_size() >= 1) weighing(g_.node(ri.first).output(0));
      if (!weighs) continue;
      try {
        AttentionBlock a = match_attention(k);
        for (int m : a.nodes)
          if (done_.count(m)) throw Unsupported("its nodes overlap another block's");
        if (std::optional<EncoderBlock> e = match_encoder(a)) {
          done_.insert(e->nodes.begin(), e->nodes.end());
          const int last = *e->nodes.rbegin();
          done_.erase(last);
          encoders_[last] = std::move(*e);
        } else {
          done_.insert(a.nodes.begin(), a.nodes.end());
          const int last = *a.nodes.rbegin();
          done_.erase(last);
          attention_[last] = std::move(a);
        }
      } catch (const Unsupported& e) {
        failures_.push_back("Softmax (node '" + node_name(n) + "'): the weights of a scaled dot-product attention whose block is not imported: " + e.what());
        done_.insert(k);
        poison(n);
      }
    }
  }

  void set_attention_params(const nn::Layer& l, const std::string& prefix, const AttentionBlock& a) {
    param(l, prefix + "q_weight", a.wq);
    param(l, prefix + "k_weight", a.wk);
    param(l, prefix + "v_weight", a.wv);
    param(l, prefix + "out_weight", a.wo);
    if (a.bq.defined()) {
      param(l, prefix + "q_bias", a.bq);
      param(l, prefix + "k_bias", a.bk);
      param(l, prefix + "v_bias", a.bv);
      param(l, prefix + "out_bias", a.bo);
    }
  }
  bool poisoned_any(std::initializer_list<std::string> vs) {
    for (const std::string& v : vs)
      if (!v.empty() && poisoned_.count(v)) {
        poison(*node_);
        return true;
      }
    return false;
  }
  void import_attention(const AttentionBlock& a) {
    if (poisoned_any({a.q, a.k, a.v, a.keep})) return;
    const nn::Layer q = floating(value_named(a.q)), k = floating(value_named(a.k)), v = floating(value_named(a.v));
    for (const nn::Layer* x : {&q, &k, &v})
      if (rank_of(*x) != 3 || x->shape()[2] != a.wq.shape()[0])
        throw Unsupported("an input of the shape " + shape_str(x->shape()) + " (the attention reads (batch, length, " + std::to_string(a.wq.shape()[0]) + "))");
    std::optional<nn::Layer> keep;
    if (!a.keep.empty()) keep = value_named(a.keep);
    nn::MultiHeadAttention l(q, k, v, a.heads, {.causal = a.causal, .bias = a.bq.defined()}, keep, unique(a.out));
    set_attention_params(l, "", a);
    set(a.out, l);
  }
  void import_encoder(const EncoderBlock& e) {
    if (poisoned_any({e.x, e.att.keep})) return;
    const nn::Layer x = floating(value_named(e.x));
    const int64_t units = e.att.wq.shape()[0];
    if (rank_of(x) != 3 || x.shape()[2] != units)
      throw Unsupported("an input of the shape " + shape_str(x.shape()) + " (the encoder layer reads (batch, length, " + std::to_string(units) + "))");
    nn::TransformerOptions o;
    o.ff_units = e.w1.shape()[1];
    o.dropout = 0;  // the file holds inference semantics
    o.activation = e.act;
    o.norm_first = e.norm_first;
    o.eps = e.eps;
    o.causal = e.att.causal;
    std::optional<nn::Layer> keep;
    if (!e.att.keep.empty()) keep = value_named(e.att.keep);
    nn::TransformerEncoderLayer l(x, e.att.heads, o, keep, unique(e.out));
    set_attention_params(l, "self_attention/", e.att);
    param(l, "ff/w1", e.w1);
    param(l, "ff/b1", e.b1);
    param(l, "ff/w2", e.w2);
    param(l, "ff/b2", e.b2);
    param(l, "norm1/weight", e.n1w);
    param(l, "norm1/bias", e.n1b);
    param(l, "norm2/weight", e.n2w);
    param(l, "norm2/bias", e.n2b);
    set(e.out, l);
  }

  // ------------------------------------------------------------------ recurrent layers
  static bool is_recurrent(const onnx::NodeProto& n) {
    return n.domain().empty() && (n.op_type() == "LSTM" || n.op_type() == "GRU" || n.op_type() == "RNN");
  }
  bool all_zero(const std::string& v) const {
    if (zeros_.count(v)) return true;
    auto it = consts_.find(v);
    return it != consts_.end() && it->second.numel() > 0 && max(abs(it->second.astype(DType::Float64))).item<double>() == 0;
  }
  // Values that are all zeros (torch.onnx writes an LSTM's initial states as ConstantOfShape(0),
  // sliced per layer); recurrent nodes' zero initial states are Loom's RNN's own, so the nodes
  // that exist only to compute them (Shape, Gather, Concat, ...) are not imported.
  void find_zero_states() {
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
  bool read_as_sequence_only(const std::string& v) const {
    if (!uses_.count(v)) return false;
    for (const auto& o : g_.output())
      if (o.name() == v) return false;
    auto it = readers_.find(v);
    if (it == readers_.end()) return false;
    for (const auto& [k, i] : it->second)
      if (i != 0 || !is_recurrent(g_.node(k))) return false;
    return true;
  }
  std::vector<int64_t> perm_of(const onnx::NodeProto& n) const {
    for (const auto& a : n.attribute())
      if (a.name() == "perm") return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    return {};
  }
  // The node after `v` when it is `op` (sole reader) and satisfies `ok`; nullptr otherwise.
  const onnx::NodeProto* follow(const std::string& v, const char* op, const std::function<bool(const onnx::NodeProto&)>& ok, std::vector<int>& chain) const {
    int k = 0;
    const onnx::NodeProto* n = next(v, op, &k);
    if (!n || !ok(*n)) return nullptr;
    chain.push_back(k);
    return n;
  }
  std::function<bool(const onnx::NodeProto&)> perm_is(std::vector<int64_t> p) const {
    return [this, p](const onnx::NodeProto& n) { return n.input_size() == 1 && n.attribute_size() == 1 && perm_of(n) == p; };
  }
  std::function<bool(const onnx::NodeProto&)> reshape_to(std::vector<int64_t> s) const {
    return [this, s](const onnx::NodeProto& n) {
      for (const auto& a : n.attribute())
        if (a.name() != "allowzero" || a.i() != 0) return false;
      return n.input_size() == 2 && const_is(n.input(1), s, {static_cast<int64_t>(s.size())});
    };
  }
  std::function<bool(const onnx::NodeProto&)> squeeze_axis(int64_t axis) const {
    return [this, axis](const onnx::NodeProto& n) {
      if (n.input_size() == 2) return n.attribute_size() == 0 && const_is(n.input(1), {axis}, {1});
      return n.input_size() == 1 && n.attribute_size() == 1 && n.attribute(0).name() == "axes" && n.attribute(0).ints_size() == 1 &&
             n.attribute(0).ints(0) == axis;
    };
  }

  // LSTM, GRU, RNN (time-major, layout 0) -> Loom's RNN layer over (batch, time, features). X
  // must be the Transpose (1, 0, 2) of a batch-first value or another recurrent node's time-major
  // output; Y is read through the forms Loom's exporter and torch.onnx write (below), or Y_h.
  void import_rnn(const std::string& op) {
    only_attrs({"hidden_size", "direction", "activations", "linear_before_reset", "layout", "clip", "input_forget", "activation_alpha", "activation_beta"});
    if (attr("clip")) throw Unsupported("clip (Loom's cells do not clip)");
    if (attr("activation_alpha") || attr("activation_beta")) throw Unsupported("activation_alpha / activation_beta (Loom's activations take none)");
    if (attr_int("layout", 0) != 0) throw Unsupported("layout " + std::to_string(attr_int("layout", 0)) + " (imported: layout 0, time-major)");
    if (attr_int("input_forget", 0) != 0) throw Unsupported("input_forget = 1 (Loom's LSTM has separate input and forget gates)");
    const std::string dir = attr_string("direction", "forward");
    if (dir != "forward" && dir != "reverse" && dir != "bidirectional") throw Unsupported("direction '" + dir + "'");
    const int64_t dirs = dir == "bidirectional" ? 2 : 1, gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
    const Tensor &w = constant(1, "W"), &rw = constant(2, "R");
    auto tm = time_major_.find(node_->input(0));
    if (tm == time_major_.end())
      throw Unsupported("its input X '" + node_->input(0) +
                        "' is not the Transpose (1, 0, 2) of a batch-first value nor another recurrent node's output (Loom's RNN reads (batch, time, features))");
    const nn::Layer x = floating(tm->second);
    if (rw.ndim() != 3 || rw.shape()[0] != dirs || rw.shape()[2] < 1 || rw.shape()[1] != gates * rw.shape()[2])
      throw Unsupported("R of the shape " + shape_str(rw.shape()) + " (valid: (" + std::to_string(dirs) + ", " + std::to_string(gates) + " n, n))");
    const int64_t n = rw.shape()[2];
    if (attr("hidden_size") && attr_int("hidden_size", 0) != n)
      throw Unsupported("hidden_size " + std::to_string(attr_int("hidden_size", 0)) + " disagrees with R's " + std::to_string(n));
    const int64_t features = x.shape()[2];
    if (w.ndim() != 3 || w.shape()[0] != dirs || w.shape()[1] != gates * n || w.shape()[2] != features)
      throw Unsupported("W of the shape " + shape_str(w.shape()) + " for an input of " + std::to_string(features) + " features (valid: (" +
                        std::to_string(dirs) + ", " + std::to_string(gates * n) + ", " + std::to_string(features) + "))");
    const bool bias = has_input(3);
    Tensor b;
    if (bias) {
      b = constant(3, "B");
      if (b.shape() != Shape{dirs, 2 * gates * n}) throw Unsupported("B of the shape " + shape_str(b.shape()));
    }
    if (has_input(4)) throw Unsupported("sequence_lens (Loom's RNN runs every sequence to its end)");
    for (size_t i : {size_t{5}, size_t{6}})
      if (has_input(i) && (i == 5 || op == "LSTM") && !all_zero(node_->input(static_cast<int>(i))))
        throw Unsupported(std::string(i == 5 ? "initial_h" : "initial_c") + " is not zeros (Loom's RNN starts from zeros)");
    if (op == "LSTM" && has_input(7)) throw Unsupported("peepholes (P): Loom's LSTM has none");
    // activations: ONNX's defaults, or an RNN's tanh / relu / sigmoid
    const std::vector<std::string> acts = attr("activations") ? std::vector<std::string>(attr("activations")->strings().begin(), attr("activations")->strings().end())
                                                              : std::vector<std::string>{};
    nn::ActivationFn act = nn::tanh;
    if (op == "LSTM" || op == "GRU") {
      std::vector<std::string> want = op == "LSTM" ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"} : std::vector<std::string>{"Sigmoid", "Tanh"};
      std::vector<std::string> all;
      for (int64_t d = 0; d < dirs; ++d) all.insert(all.end(), want.begin(), want.end());
      if (!acts.empty() && acts != all) throw Unsupported("activations other than " + op + "'s defaults (Loom's " + op + " cell has those)");
      if (op == "GRU" && attr_int("linear_before_reset", 0) != 1)
        throw Unsupported("linear_before_reset = 0 (Loom's GRU, as PyTorch's, applies the reset gate after the recurrent product: 1)");
    } else {
      if (attr("linear_before_reset")) throw Unsupported("linear_before_reset on an RNN");
      const std::string a = acts.empty() ? "Tanh" : acts[0];
      for (const std::string& s : acts)
        if (s != a) throw Unsupported("different activations per direction");
      if (acts.size() > static_cast<size_t>(dirs)) throw Unsupported(std::to_string(acts.size()) + " activations for " + std::to_string(dirs) + " directions");
      if (a == "Tanh") act = nn::tanh;
      else if (a == "Relu") act = nn::relu;
      else if (a == "Sigmoid") act = nn::sigmoid;
      else throw Unsupported("the activation '" + a + "' (imported: Tanh, Relu, Sigmoid)");
    }
    if (op != "GRU" && attr("linear_before_reset")) throw Unsupported("linear_before_reset on an " + op);
    const auto used = [&](int k) { return node_->output_size() > k && !node_->output(k).empty() && uses_.count(node_->output(k)) > 0; };
    if (used(2)) throw Unsupported("Y_c (the last cell state) is used; Loom's RNN layer gives the outputs Y or the last state Y_h");
    if (used(0) && used(1)) throw Unsupported("both Y and Y_h are used; Loom's RNN layer gives one of them");
    if (!used(0) && !used(1)) return;
    // what reads the result, batch-first (a value of Loom's layer) or time-major (for the next recurrent node)
    std::vector<int> chain;
    std::string batch_first, time_major;
    if (used(0)) {
      const std::string& y = node_->output(0);  // (time, dirs, batch, n)
      std::vector<int> c;
      const onnx::NodeProto* t = follow(y, "Transpose", perm_is({2, 0, 1, 3}), c);  // Loom's exporter
      const onnx::NodeProto* r = t ? follow(t->output(0), "Reshape", reshape_to({0, 0, -1}), c) : nullptr;
      if (r) {
        batch_first = r->output(0);
        chain = c;
      } else {  // torch.onnx: Squeeze(axis 1) (one direction), or Transpose (0, 2, 1, 3) and Reshape (0, 0, -1)
        c.clear();
        const onnx::NodeProto* s = dirs == 1 ? follow(y, "Squeeze", squeeze_axis(1), c) : nullptr;
        if (!s) {
          c.clear();
          const onnx::NodeProto* t2 = follow(y, "Transpose", perm_is({0, 2, 1, 3}), c);
          s = t2 ? follow(t2->output(0), "Reshape", reshape_to({0, 0, -1}), c) : nullptr;
        }
        if (!s) throw Unsupported("its output Y is read otherwise than as Loom's exporter or torch.onnx write it (Transpose (2, 0, 1, 3) and Reshape (0, 0, -1); Squeeze of axis 1; Transpose (0, 2, 1, 3) and Reshape (0, 0, -1))");
        chain = c;
        const onnx::NodeProto* back = follow(s->output(0), "Transpose", perm_is({1, 0, 2}), chain);
        if (back) batch_first = back->output(0);
        else if (read_as_sequence_only(s->output(0))) time_major = s->output(0);
        else throw Unsupported("its time-major output '" + s->output(0) + "' is read by other than a Transpose (1, 0, 2) or recurrent nodes");
      }
    } else {
      const std::string& yh = node_->output(1);  // (dirs, batch, n)
      const onnx::NodeProto* t = follow(yh, "Transpose", perm_is({1, 0, 2}), chain);
      const onnx::NodeProto* r = t ? follow(t->output(0), "Reshape", reshape_to({0, -1}), chain) : nullptr;
      if (!r && dirs == 1) {
        chain.clear();
        r = follow(yh, "Squeeze", squeeze_axis(0), chain);
      }
      if (!r) throw Unsupported("its output Y_h is read otherwise than as (Transpose (1, 0, 2), Reshape (0, -1)) or Squeeze of axis 0 (one direction)");
      batch_first = r->output(0);
    }
    nn::RNNOptions o{.cell = op == "LSTM" ? nn::CellKind::LSTM : op == "GRU" ? nn::CellKind::GRU : nn::CellKind::RNN,
                     .cell_options = {.activation = act, .bias = bias},
                     .return_sequences = used(0),
                     .reverse = dir == "reverse",
                     .bidirectional = dirs == 2};
    nn::RNN l(x, n, o, unique(batch_first.empty() ? time_major : batch_first));
    // ONNX's gate blocks to Loom's (PyTorch's): Loom's block j is ONNX's block order[j]
    const std::vector<int64_t> order = op == "LSTM" ? std::vector<int64_t>{0, 2, 3, 1} : op == "GRU" ? std::vector<int64_t>{1, 0, 2} : std::vector<int64_t>{0};
    const auto loom_blocks = [&](const Tensor& t) {  // (..., G n) in ONNX's order -> Loom's
      std::vector<Tensor> parts;
      for (int64_t g : order) parts.push_back(slice(t, -1, g * n, (g + 1) * n));
      return concatenate(parts, -1).contiguous();
    };
    for (int64_t d = 0; d < dirs; ++d) {
      const std::string prefix = dirs == 2 ? (d == 0 ? "forward/" : "backward/") : "";
      param(l, prefix + "w_ih", loom_blocks(transpose(slice(w, 0, d, d + 1).reshape({gates * n, features}))));
      param(l, prefix + "w_hh", loom_blocks(transpose(slice(rw, 0, d, d + 1).reshape({gates * n, n}))));
      if (bias) {
        const Tensor bd = slice(b, 0, d, d + 1).reshape({2 * gates * n});
        param(l, prefix + "b_ih", loom_blocks(slice(bd, 0, 0, gates * n)));
        param(l, prefix + "b_hh", loom_blocks(slice(bd, 0, gates * n, 2 * gates * n)));
      }
    }
    for (int k : chain) done_.insert(k);
    if (!batch_first.empty()) set(batch_first, l);
    else time_major_[time_major] = l;
  }

  void import_merge(const std::string& op) {
    only_attrs({});
    single_output();
    std::vector<nn::Layer> ins;
    for (size_t i = 0; i < n_inputs(); ++i) ins.push_back(value(i));
    if (ins.empty()) throw Unsupported("no inputs");
    const std::string name = unique(out());
    if (ins.size() == 1) return set(out(), nn::Activation(ins[0], nn::identity, name));
    // Loom's merges broadcast samples of one rank; the batch axes must agree
    int64_t rank = 0;
    for (const nn::Layer& l : ins) rank = std::max(rank, rank_of(l));
    for (const nn::Layer& l : ins)  // but for constants without a batch axis, broadcast from the right
      if (rank_of(l) != rank && !(batchless_.count(l.impl().get()) && rank_of(l) < rank)) throw Unsupported("operands of ranks " + std::to_string(rank_of(ins[0])) + " and " + std::to_string(rank_of(l)) + " (Loom's merges take one rank)");
    if (op == "Add" || op == "Sum") return set(out(), nn::Add(ins, name));
    if (op == "Mean") return set(out(), nn::Mean(ins, name));
    if (op == "Mul") return set(out(), nn::Multiply(ins, name));
    if (ins.size() != 2) throw Unsupported("Sub of " + std::to_string(ins.size()) + " operands");
    set(out(), nn::Subtract(ins[0], ins[1], name));
  }
};

Graph import_model(const onnx::ModelProto& m, const std::string& folder, const OnnxImportOptions& options) {
  return Importer(m, folder, options).run();
}

}  // namespace

std::vector<std::string> onnx_importable_operators() { return kClaimed; }

Graph import_onnx(const std::string& path, const OnnxImportOptions& options) {
  const onnx::ModelProto m = detail::read_model_file(path);
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return import_model(m, parent.empty() ? std::filesystem::path(".").string() : parent.string(), options);
}

Graph decode_onnx(const std::string& bytes, const OnnxImportOptions& options) { return import_model(detail::parse_model(bytes), "", options); }

}  // namespace loom::io
