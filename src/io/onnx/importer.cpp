// ONNX import (loom/io/onnx.h, docs/onnx.md): the importer's run (importer.h), its registry of
// converters, and the helpers every converter reads its node with. The converters themselves
// are in the families' files (import_*.cpp).
#include "io/onnx/importer.h"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "io/onnx/registry.h"
#include "loom/core/error.h"
#include "loom/core/grad_mode.h"
#include "loom/io/model_file.h"
#include "loom/ops/creation.h"

namespace loom::io::detail {

double float_attr(float f) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);
  double d = f;
  std::from_chars(buf, r.ptr, d);
  return d;
}

// ------------------------------------------------------------------ the registry
namespace {

bool default_domain(std::string_view domain) { return domain.empty() || domain == "ai.onnx"; }

// The registry by operator, checked: the entries of one operator and domain cover disjoint opsets.
std::unordered_multimap<std::string_view, const Converter*> index_registry(const std::vector<Converter>& all) {
  std::unordered_multimap<std::string_view, const Converter*> by_op;
  for (const Converter& c : all) {
    if (c.since < kFirstOpset || c.until < c.since || !c.convert)
      throw std::logic_error("the ONNX importer's registry: the entry of " + std::string(c.op) + " is malformed");
    const auto [b, e] = by_op.equal_range(c.op);
    for (auto it = b; it != e; ++it)
      if (it->second->domain == c.domain && it->second->since <= c.until && c.since <= it->second->until)
        throw std::logic_error("the ONNX importer's registry: two entries of " + std::string(c.op) + " overlap in their opsets");
    by_op.emplace(c.op, &c);
  }
  return by_op;
}

}  // namespace

const std::vector<Converter>& Importer::registry() {
  static const std::vector<Converter> all = [] {
    std::vector<Converter> r;
    for (auto part : {elementwise_converters, dense_converters, conv_converters, shape_converters, recurrent_converters})
      for (Converter& c : part()) r.push_back(c);
    return r;
  }();
  return all;
}

const Converter* Importer::find_converter(std::string_view domain, std::string_view op, int64_t opset) {
  static const std::unordered_multimap<std::string_view, const Converter*> by_op = index_registry(registry());
  if (default_domain(domain)) domain = "";
  const auto [b, e] = by_op.equal_range(op);
  for (auto it = b; it != e; ++it)
    if (it->second->domain == domain && it->second->since <= opset && opset <= it->second->until) return it->second;
  return nullptr;
}

// ------------------------------------------------------------------ run
Importer::Importer(const onnx::ModelProto& m, std::string folder, const OnnxImportOptions& options)
    : m_(m), g_(m.graph()), folder_(std::move(folder)) {
  if (options.max_tensor_bytes < 0)
    throw ValueError("import_onnx: OnnxImportOptions::max_tensor_bytes is " + std::to_string(options.max_tensor_bytes) +
                     " (valid: 0 for the machine's physical memory, or a number of bytes)");
  reads_.max_bytes = static_cast<uint64_t>(options.max_tensor_bytes);
}

Graph Importer::run() {
  check_versions();
  check_single_writers();
  read_opset();
  for (const auto& t : g_.initializer()) {
    if (t.name().empty()) throw IOError("import_onnx: an initializer has no name");
    consts_[t.name()] = detail::to_tensor(t, folder_, reads_);
  }
  if (g_.sparse_initializer_size() > 0) failures_.push_back("sparse initializers are not imported");
  const std::vector<nn::Layer> inputs = read_inputs();
  for (const auto& n : g_.node())
    for (const auto& i : n.input()) ++uses_[i];
  for (const auto& o : g_.output()) ++uses_[o.name()];
  read_constants();
  index_nodes();
  // the patterns, before the nodes one by one: the blocks they find are imported whole (at
  // their last node, import_node), their other nodes not at all
  find_zero_states();
  find_adaptive_pools();
  find_attention();
  find_shape_arithmetic();
  for (int k = 0; k < g_.node_size(); ++k)
    if (!done_.count(k)) import_one(k);
  const std::vector<nn::Layer> outs = outputs();
  throw_failures();
  if (outs.empty()) throw ValueError("import_onnx: the model has no outputs");
  return built(outs, inputs);
}

// The opset of ONNX's default domain (1 when the model names none); past the last one Loom reads
// is a failure, reported with the others (the nodes are still read, as of the last opset, so
// that everything else that fails is listed too).
void Importer::read_opset() {
  opset_ = 0;
  for (const auto& o : m_.opset_import())
    if (default_domain(o.domain())) opset_ = o.version();
  if (opset_ == 0) opset_ = 1;
  if (opset_ > kLastOpset)
    failures_.push_back("the model's opset " + std::to_string(opset_) + " is past " + std::to_string(kLastOpset) + ", the last one Loom reads");
}

// The model's inputs that are not initializers, as Input layers.
std::vector<nn::Layer> Importer::read_inputs() {
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
  return inputs;
}

// Constant nodes first (they read nothing): patterns look ahead at constants defined later.
// Identity nodes of constants too: torch.onnx writes a weight shared by several layers (or
// equal in them: nn.TransformerEncoder's copies of its layer) once, read through Identity
// nodes, and the patterns need the weights behind them.
void Importer::read_constants() {
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
    } catch (const Unsupported&) {  // reported by import_nodes
    }
  }
}

// Which node computes each value, and which nodes read it (the patterns' questions).
void Importer::index_nodes() {
  for (int k = 0; k < g_.node_size(); ++k) {
    for (const auto& o : g_.node(k).output())
      if (!o.empty()) producer_[o] = k;
    for (int i = 0; i < g_.node(k).input_size(); ++i) readers_[g_.node(k).input(i)].push_back({k, i});
  }
}

// The node k through its converter; what fails is collected, and the node's values poisoned (the
// nodes reading them are not examined further).
void Importer::import_one(int k) {
  const onnx::NodeProto& n = g_.node(k);
  node_ = &n;
  index_ = k;
  bool poisoned = false;
  for (const auto& i : n.input())
    if (poisoned_.count(i)) poisoned = true;
  // a node of an operator no converter reads is listed by its operator, wherever it is (also
  // downstream of a refused node, which cannot be examined further)
  if (!find_converter(n.domain(), n.op_type(), std::min(opset_, kLastOpset))) {
    unsupported(n);
    poison(n);
    return;
  }
  if (poisoned) return poison(n);
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

// The node being imported: the block a pattern found ending at it, or its operator's converter.
void Importer::import_node(const onnx::NodeProto& n) {
  if (auto it = adaptive_.find(index_); it != adaptive_.end()) return import_adaptive_pool(it->second);
  if (auto it = attention_.find(index_); it != attention_.end()) return import_attention(it->second);
  if (auto it = encoders_.find(index_); it != encoders_.end()) return import_encoder(it->second);
  find_converter(n.domain(), n.op_type(), std::min(opset_, kLastOpset))->convert(*this);
}

// The model's outputs as layers (under their names).
std::vector<nn::Layer> Importer::outputs() {
  std::vector<nn::Layer> outs;
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
    outs.push_back(l);
  }
  return outs;
}

// One ValueError listing every node that cannot be imported, if any.
void Importer::throw_failures() const {
  if (failures_.empty() && unsupported_.empty()) return;
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

// The graph, its parameters and buffers set from the initializers.
Graph Importer::built(const std::vector<nn::Layer>& outputs, const std::vector<nn::Layer>& inputs) const {
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

// ------------------------------------------------------------------ checks, names, inputs
// The model's IR version is one libonnx reads (a newer one may change what fields mean).
void Importer::check_versions() const {
  if (m_.ir_version() > onnx::IR_VERSION)
    throw ValueError("import_onnx: the model's IR version " + std::to_string(m_.ir_version()) + " is newer than " +
                     std::to_string(static_cast<int>(onnx::IR_VERSION)) + ", the last one Loom's ONNX library reads");
}

// Each value is defined once (ONNX graphs are in single static assignment form, which
// onnx.checker and ONNX Runtime enforce): an initializer, a graph input, or one node's output.
// Two definitions would leave which one a reader sees to the order of the file.
void Importer::check_single_writers() const {
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

void Importer::unsupported(const onnx::NodeProto& n) {
  const std::string op = n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type() : n.domain() + "." + n.op_type();
  auto it = std::find_if(unsupported_.begin(), unsupported_.end(), [&](const auto& u) { return u.first == op; });
  if (it == unsupported_.end()) {
    unsupported_.emplace_back(op, UnsupportedOp{0, node_name(n)});
    it = std::prev(unsupported_.end());
  }
  ++it->second.count;
}

std::string Importer::node_name(const onnx::NodeProto& n) {
  if (!n.name().empty()) return n.name();
  for (const auto& o : n.output())
    if (!o.empty()) return o;  // the first output that has a name (an LSTM's Y may be omitted)
  return "?";
}

void Importer::poison(const onnx::NodeProto& n) {
  for (const auto& o : n.output()) poisoned_.insert(o);
}

std::string Importer::unique(const std::string& want) {
  std::string base = sanitize(want), name = base;
  for (int k = 1; names_.count(name); ++k) name = base + "_" + std::to_string(k);
  names_.insert(name);
  return name;
}

nn::Layer Importer::make_input(const onnx::ValueInfoProto& v) {
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
const onnx::AttributeProto* Importer::attr(const std::string& name) const {
  for (const auto& a : node_->attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t Importer::attr_int(const std::string& name, int64_t dflt) const {
  const auto* a = attr(name);
  return a ? a->i() : dflt;
}

float Importer::attr_float(const std::string& name, float dflt) const {
  const auto* a = attr(name);
  return a ? a->f() : dflt;
}

std::string Importer::attr_string(const std::string& name, const std::string& dflt) const {
  const auto* a = attr(name);
  return a ? a->s() : dflt;
}

std::vector<int64_t> Importer::attr_ints(const std::string& name, std::vector<int64_t> dflt) const {
  const auto* a = attr(name);
  if (!a) return dflt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

// Attributes the importer does not read must be absent.
void Importer::only_attrs(std::initializer_list<const char*> known) const {
  for (const auto& a : node_->attribute()) {
    bool ok = false;
    for (const char* k : known) ok = ok || a.name() == k;
    if (!ok) throw Unsupported("the attribute '" + a.name() + "' is not imported");
  }
}

size_t Importer::n_inputs() const {
  size_t n = static_cast<size_t>(node_->input_size());
  while (n > 0 && node_->input(static_cast<int>(n) - 1).empty()) --n;
  return n;
}

const Tensor& Importer::constant(size_t i, const char* what) const {
  if (!has_input(i)) throw Unsupported(std::string("its ") + what + " is missing");
  auto it = consts_.find(node_->input(static_cast<int>(i)));
  if (it == consts_.end()) throw Unsupported(std::string("its ") + what + " '" + node_->input(static_cast<int>(i)) + "' must be a constant (an initializer)");
  return it->second;
}

nn::Layer Importer::value(size_t i) {
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

nn::Layer Importer::value_named(const std::string& name) {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  throw Unsupported("its input '" + name + "' is computed by no earlier node");
}

// Only the first output may be used.
void Importer::single_output() const {
  for (int k = 1; k < node_->output_size(); ++k)
    if (!node_->output(k).empty() && uses_.count(node_->output(k)))
      throw Unsupported("its output " + std::to_string(k) + " ('" + node_->output(k) + "') is used; Loom's layer has one output");
}

const std::string& Importer::out() const {
  if (node_->output_size() < 1 || node_->output(0).empty()) throw Unsupported("it has no output");
  return node_->output(0);
}

std::vector<int64_t> Importer::ints_of(const Tensor& t) {
  const Tensor c = t.astype(DType::Int64).contiguous();
  const auto* p = static_cast<const int64_t*>(c.data_ptr());
  return std::vector<int64_t>(p, p + c.numel());
}

// The single node reading `value` (and no graph output); -1 when there is not exactly one.
int Importer::sole_reader(const std::string& v) const {
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
const nn::Layer& Importer::floating(const nn::Layer& x) {
  if (!is_floating(x.dtype())) throw Unsupported(std::string("its input has the dtype ") + dtype_name(x.dtype()) + " (the layer computes in floating point)");
  return x;
}

int64_t Importer::norm_axis(int64_t axis, int64_t rank) const {
  if (axis < -rank || axis >= rank) throw Unsupported("the axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}


std::vector<OnnxConverterInfo> onnx_import_registry() {
  std::vector<OnnxConverterInfo> out;
  for (const Converter& c : Importer::registry()) out.push_back({std::string(c.domain), std::string(c.op), c.since, c.until, c.claimed});
  return out;
}

namespace {

Graph import_model(const onnx::ModelProto& m, const std::string& folder, const OnnxImportOptions& options) {
  return Importer(m, folder, options).run();
}

}  // namespace

}  // namespace loom::io::detail

namespace loom::io {

// The claimed operators of the registry, each once, in the registry's order.
std::vector<std::string> onnx_importable_operators() {
  std::vector<std::string> ops;
  for (const detail::Converter& c : detail::Importer::registry())
    if (c.claimed && std::find(ops.begin(), ops.end(), c.op) == ops.end()) ops.emplace_back(c.op);
  return ops;
}

Graph import_onnx(const std::string& path, const OnnxImportOptions& options) {
  const onnx::ModelProto m = detail::read_model_file(path);
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return detail::import_model(m, parent.empty() ? std::filesystem::path(".").string() : parent.string(), options);
}

Graph decode_onnx(const std::string& bytes, const OnnxImportOptions& options) {
  return detail::import_model(detail::parse_model(bytes), "", options);
}

}  // namespace loom::io
