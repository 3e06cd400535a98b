// ONNX export (loom/io/onnx.h, docs/onnx.md): each layer of a graph, in graph order, written as
// ONNX nodes by its exporter (a registered one for the layer's C++ type, else the built-in one
// of its kind, found by the kind's attributes type: src/io/onnx/exporters.h), the weights as
// initializers, opset 17. Here: the builder, the graph walk (modules inlined, batch norms folded)
// and the model's bytes and files.
#include "loom/io/onnx.h"

#include "io/onnx/exporters.h"
#include "io/onnx_proto.h"

#include <cmath>
#include <filesystem>
#include <cstring>
#include <map>
#include <mutex>
#include <typeindex>
#include <unordered_map>
#include <unordered_set>

#include "loom/core/error.h"
#include "loom/core/file.h"
#include "loom/io/model_file.h"
#include "loom/graph/module.h"
#include "loom/nn/layers.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "nn/conv_padding.h"

namespace loom::io {

namespace {

constexpr int64_t kOpset = 17;
constexpr int64_t kIrVersion = 8;

// ------------------------------------------------------------------------------- the registry
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<std::type_index, OnnxExporter>& registry() {
  static std::unordered_map<std::type_index, OnnxExporter> r;
  return r;
}

int32_t onnx_type(DType d, const std::string& who) {
  if (const auto t = detail::onnx_elem_type(d)) return *t;
  throw ValueError(who + ": dtype " + dtype_name(d) + " has no ONNX type here");
}

// The tensor's bytes, little-endian and contiguous, into `proto`.
void fill_tensor(onnx::TensorProto& proto, const std::string& name, const Tensor& t) {
  proto.set_name(name);
  proto.set_data_type(onnx_type(t.dtype(), "export_onnx: tensor '" + name + "'"));
  for (int64_t d : t.shape()) proto.add_dims(d);
  const Tensor c = t.detach().contiguous();  // raw data: little-endian, one byte per bool in both
  proto.set_raw_data(std::string(static_cast<const char*>(c.data_ptr()), c.nbytes()));
}

void set_shape(onnx::ValueInfoProto& v, const std::string& name, DType dtype, const Shape& shape, bool batch_dim,
               const OnnxExportOptions& o, const std::string& who, bool name_dims) {
  v.set_name(name);
  auto* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_type(dtype, who));
  auto* sh = tt->mutable_shape();
  for (size_t i = 0; i < shape.size(); ++i) {
    auto* d = sh->add_dim();
    if (i == 0 && batch_dim) {
      if (o.dynamic_batch) d->set_dim_param("batch");
      else d->set_dim_value(o.batch_size);
    } else if (shape[i] >= 0) {
      d->set_dim_value(shape[i]);
    } else if (name_dims) {
      d->set_dim_param(name + "_dim" + std::to_string(i));
    }
  }
}

// ------------------------------------------------------------------------------- the builder
class Builder final : public OnnxBuilder {
 public:
  Builder(onnx::GraphProto& g, std::unordered_map<const TensorImpl*, std::string> keys, const OnnxExportOptions& options)
      : g_(g), options_(options), keys_(std::move(keys)) {
    for (const auto& [t, k] : keys_) used_.insert(k);
  }

  // Starts the layer `l` whose inputs are the values `inputs`. Nodes and initializers of a layer
  // whose export fails are taken back (rollback()).
  void begin(const nn::Layer& l, std::vector<std::string> inputs, std::string output_name) {
    layer_ = l;
    output_ = std::move(output_name);
    inputs_ = std::move(inputs);
    nodes_mark_ = g_.node_size();
    inits_mark_ = g_.initializer_size();
    emitted_mark_ = emitted_order_.size();
    wrote_output_ = false;
  }
  void rollback() {
    while (g_.node_size() > nodes_mark_) g_.mutable_node()->RemoveLast();
    while (g_.initializer_size() > inits_mark_) g_.mutable_initializer()->RemoveLast();
    while (emitted_order_.size() > emitted_mark_) {
      emitted_.erase(emitted_order_.back());
      emitted_order_.pop_back();
    }
  }
  bool wrote_output() const { return wrote_output_; }

  const nn::Layer& layer() const override { return layer_; }
  std::string input(size_t i) const override {
    if (i >= inputs_.size())
      throw ValueError("input " + std::to_string(i) + " asked for; the layer has " + std::to_string(inputs_.size()));
    return inputs_[i];
  }
  std::string output() const override { return output_; }
  std::string fresh(const std::string& hint) override {
    std::string base = output_ + "/" + hint, name = base;
    for (int n = 1; used_.count(name); ++n) name = base + "_" + std::to_string(n);
    used_.insert(name);
    return name;
  }
  void node(const std::string& op_type, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
            const std::vector<OnnxAttribute>& attributes) override {
    onnx::NodeProto* n = g_.add_node();
    n->set_op_type(op_type);
    n->set_name(fresh(op_type));
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) {
      n->add_output(o);
      if (o == output()) wrote_output_ = true;
    }
    for (const OnnxAttribute& a : attributes) {
      onnx::AttributeProto* p = n->add_attribute();
      p->set_name(a.name);
      std::visit(
          [p](const auto& v) {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, int64_t>) {
              p->set_type(onnx::AttributeProto::INT);
              p->set_i(v);
            } else if constexpr (std::is_same_v<V, float>) {
              p->set_type(onnx::AttributeProto::FLOAT);
              p->set_f(v);
            } else if constexpr (std::is_same_v<V, std::string>) {
              p->set_type(onnx::AttributeProto::STRING);
              p->set_s(v);
            } else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
              p->set_type(onnx::AttributeProto::INTS);
              for (int64_t x : v) p->add_ints(x);
            } else if constexpr (std::is_same_v<V, std::vector<float>>) {
              p->set_type(onnx::AttributeProto::FLOATS);
              for (float x : v) p->add_floats(x);
            } else {
              p->set_type(onnx::AttributeProto::STRINGS);
              for (const std::string& x : v) p->add_strings(x);
            }
          },
          a.value);
    }
  }
  std::string tensor(const Tensor& t, const std::string& hint) override {
    if (!t.defined()) throw ValueError("an undefined tensor as '" + hint + "'");
    if (auto it = keys_.find(t.impl().get()); it != keys_.end()) {
      if (!emitted_.count(it->second)) {
        fill_tensor(*g_.add_initializer(), it->second, t);
        emitted_.insert(it->second);
        emitted_order_.push_back(it->second);
      }
      return it->second;
    }
    const std::string name = fresh(hint);
    fill_tensor(*g_.add_initializer(), name, t);
    return name;
  }
  std::string ints(const std::vector<int64_t>& values, const std::string& hint) override {
    return tensor(from_vector(values, {static_cast<int64_t>(values.size())}), hint);
  }
  void reserve(const std::string& name) { used_.insert(name); }
  // One more input of the model (a SparseInput's dense form).
  void add_graph_input(const nn::Layer& l, const std::string& name) {
    set_shape(*g_.add_input(), name, l.dtype(), l.shape(), !l.shape().empty(), options_, "input '" + name + "'", true);
  }

 private:
  onnx::GraphProto& g_;
  const OnnxExportOptions& options_;
  std::unordered_map<const TensorImpl*, std::string> keys_;
  std::unordered_set<std::string> emitted_, used_;
  std::vector<std::string> emitted_order_;
  nn::Layer layer_;
  std::string output_;
  std::vector<std::string> inputs_;
  int nodes_mark_ = 0, inits_mark_ = 0;
  size_t emitted_mark_ = 0;
  bool wrote_output_ = false;
};

OnnxExporter registered(const nn::Layer& l) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  const nn::LayerImpl& impl = *l.impl();
  auto it = registry().find(std::type_index(typeid(impl)));
  return it == registry().end() ? OnnxExporter() : it->second;
}

// ------------------------------------------------------------------ batch norm folding
// The BatchNorm layers whose input is a Conv1D/Conv2D or a Linear on (batch, units) read by
// nothing else (and not an output, not exported by a registered exporter): each maps to that
// layer, which is then written with the batch norm folded into its weights and bias.
std::unordered_map<const nn::LayerImpl*, nn::Layer> foldable_batch_norms(const Graph& graph) {
  std::unordered_map<const nn::LayerImpl*, int> readers;
  for (const nn::Layer& n : graph.nodes())
    for (const nn::Layer& i : n.node().inputs()) ++readers[i.node().impl().get()];
  for (const nn::Layer& o : graph.outputs()) ++readers[o.node().impl().get()];
  std::unordered_set<const nn::LayerImpl*> inputs;
  for (const nn::Layer& i : graph.inputs()) inputs.insert(i.node().impl().get());
  std::unordered_map<const nn::LayerImpl*, nn::Layer> out;
  for (const nn::Layer& n : graph.nodes()) {
    const nn::Layer bn = n.node();
    if (!nn::attributes_of<nn::BatchNormOptions>(bn) || bn.inputs().size() != 1) continue;
    const nn::Layer c = bn.inputs()[0].node();
    if (inputs.count(c.impl().get()) || readers[c.impl().get()] != 1 || registered(c) || c.dtype() != bn.dtype()) continue;
    bool ok = nn::attributes_of<nn::ConvAttributes>(c) != nullptr;
    if (const auto* la = nn::attributes_of<nn::LinearAttributes>(c))
      ok = !la->transpose_weights && c.shape().size() == 2;
    if (ok) out.emplace(bn.impl().get(), c);
  }
  return out;
}

// `c` (a Conv or a Linear) followed by the batch norm being exported, as one Conv / MatMul + Add:
// with s = gamma / sqrt(var + eps), W' = W s (per output channel), b' = (b - mean) s + beta;
// computed in float64.
void export_folded(OnnxBuilder& b, const nn::Layer& c, const nn::BatchNormOptions& o) {
  nn::State& bs = b.layer().state();
  const Tensor mean = astype(bs.buffer("running_mean"), DType::Float64), var = astype(bs.buffer("running_var"), DType::Float64);
  Tensor scale = rsqrt(var + o.eps), shift = zeros(mean.shape(), DType::Float64);
  if (o.affine) {
    scale = scale * astype(bs.param("weight"), DType::Float64);
    shift = astype(bs.param("bias"), DType::Float64);
  }
  nn::State& cs = c.state();
  const Tensor w = astype(cs.param("weights"), DType::Float64);
  Tensor bias = cs.has_param("bias") ? astype(cs.param("bias"), DType::Float64) : zeros(mean.shape(), DType::Float64);
  bias = (bias - mean) * scale + shift;
  const DType dt = c.dtype();
  if (const nn::ConvAttributes* a = nn::attributes_of<nn::ConvAttributes>(c)) {
    Shape per_filter(static_cast<size_t>(w.ndim()), 1);
    per_filter[0] = w.shape()[0];
    const Tensor wf = astype(w * reshape(scale, per_filter), dt);
    b.node("Conv", {b.input(0), b.tensor(wf, "folded_weights"), b.tensor(astype(bias, dt), "folded_bias")}, {b.output()},
           {{"kernel_shape", a->kernel_size}, {"strides", a->stride}, {"dilations", a->dilation}, {"group", a->groups},
            {"pads", detail::onnx_pads(nn::conv_padding(*a))}});
    return;
  }
  const std::string y = b.fresh("matmul");
  b.node("MatMul", {b.input(0), b.tensor(astype(w * scale, dt), "folded_weights")}, {y});
  b.node("Add", {y, b.tensor(astype(bias, dt), "folded_bias")}, {b.output()});
}

using Values = std::unordered_map<const nn::LayerImpl*, std::string>;

// Exports the layers of `graph` whose values are not in `value` yet (its inputs' are), each
// layer's value named prefix + its name. A Module's inner graph is inlined, its layers' values
// under "<module>/"; the module's value is its first output's, a ModuleOutput's the one it reads.
void export_nodes(const Graph& graph, const std::string& prefix, Values& value,
                  std::unordered_map<const nn::LayerImpl*, std::vector<std::string>>& module_outputs, Builder& b,
                  std::vector<std::string>& failures, bool fold) {
  std::unordered_map<const nn::LayerImpl*, nn::Layer> folds;  // batch norm -> the layer folded into it
  std::unordered_set<const nn::LayerImpl*> folded;
  if (fold)
    for (const auto& [bn, c] : foldable_batch_norms(graph)) {
      folds.emplace(bn, c);
      folded.insert(c.impl().get());
    }
  const auto values_of = [&](const nn::Layer& l) {
    std::vector<std::string> ins;
    for (const nn::Layer& i : l.inputs()) {
      auto it = value.find(i.node().impl().get());
      ins.push_back(it == value.end() ? prefix + i.node().name() : it->second);
    }
    return ins;
  };
  for (const nn::Layer& node : graph.nodes()) {
    const nn::Layer l = node.node();
    if (value.count(l.impl().get())) continue;  // an input
    const std::vector<std::string> ins = values_of(l);
    const std::string name = prefix + l.name();
    value[l.impl().get()] = name;
    if (folded.count(l.impl().get())) continue;  // written with the batch norm that reads it
    const std::string who = name + " (" + l.kind() + ")";
    if (nn::attributes_of<nn::SparseInputAttributes>(l)) {  // a model input taking the dense rows
      if (!prefix.empty()) failures.push_back(who + ": a SparseInput inside a module is not exported");
      else b.add_graph_input(l, name);
      continue;
    }
    b.begin(l, ins, name);
    try {
      if (auto f = folds.find(l.impl().get()); f != folds.end()) {
        const nn::Layer& c = f->second;
        b.begin(l, values_of(c), name);  // the folded layer's inputs
        export_folded(b, c, *nn::attributes_of<nn::BatchNormOptions>(l));
        continue;
      }
      if (const Graph* inner = nn::module_graph(l)) {
        Values inner_value;  // per module layer: a reuse_with of a module may share the inner graph
        if (inner->inputs().size() != ins.size())
          throw ValueError("its graph takes " + std::to_string(inner->inputs().size()) + " inputs, the layer has " + std::to_string(ins.size()));
        for (size_t k = 0; k < ins.size(); ++k) inner_value[inner->inputs()[k].node().impl().get()] = ins[k];
        export_nodes(*inner, name + "/", inner_value, module_outputs, b, failures, fold);
        std::vector<std::string>& outs = module_outputs[l.impl().get()];
        for (const nn::Layer& o : inner->outputs()) outs.push_back(inner_value.at(o.node().impl().get()));
        b.begin(l, ins, name);
        b.node("Identity", {outs.at(0)}, {name}, {});
        continue;
      }
      if (const auto* mo = nn::attributes_of<nn::ModuleOutputAttributes>(l)) {
        auto it = module_outputs.find(l.inputs().at(0).node().impl().get());
        if (it == module_outputs.end()) throw ValueError("its module was not exported");
        b.node("Identity", {it->second.at(static_cast<size_t>(mo->index))}, {name}, {});
        continue;
      }
      bool done = false;
      if (OnnxExporter f = registered(l)) {
        f(b);
        done = true;
      } else {
        done = detail::export_builtin(b);
      }
      if (!done) {
        failures.push_back(who + ": no ONNX exporter for this kind");
        b.rollback();
      } else if (!b.wrote_output()) {
        failures.push_back(who + ": its exporter wrote no node with the layer's output '" + name + "'");
        b.rollback();
      }
    } catch (const std::exception& ex) {
      failures.push_back(who + ": " + ex.what());
      b.rollback();
    }
  }
}

struct Encoded {
  onnx::ModelProto model;
  std::vector<std::string> failures;
};

Encoded encode(const Graph& graph, const OnnxExportOptions& o) {
  Encoded e;
  onnx::ModelProto& m = e.model;
  m.set_ir_version(kIrVersion);
  m.set_producer_name(o.producer_name);
  if (!o.doc_string.empty()) m.set_doc_string(o.doc_string);
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  onnx::GraphProto& g = *m.mutable_graph();
  g.set_name(graph.outputs().empty() ? "loom" : graph.outputs()[0].name());

  std::unordered_map<const TensorImpl*, std::string> keys;
  for (const auto& [k, t] : graph_state(graph)) keys.emplace(t.impl().get(), k);
  Builder b(g, std::move(keys), o);

  std::unordered_map<const nn::LayerImpl*, std::string> value;  // the value each layer's output is
  std::unordered_set<const nn::LayerImpl*> is_input;
  for (const nn::Layer& in : graph.inputs()) {
    const nn::Layer l = in.node();
    is_input.insert(l.impl().get());
    value[l.impl().get()] = l.name();
    b.reserve(l.name());
    set_shape(*g.add_input(), l.name(), l.dtype(), l.shape(), !l.shape().empty(), o, "input '" + l.name() + "'", true);
  }
  for (const nn::Layer& n : graph.nodes()) b.reserve(n.name());
  std::unordered_map<const nn::LayerImpl*, std::vector<std::string>> module_outputs;
  export_nodes(graph, "", value, module_outputs, b, e.failures, o.fold_batch_norm);
  for (const nn::Layer& out : graph.outputs()) {
    const nn::Layer l = out.node();
    set_shape(*g.add_output(), l.name(), l.dtype(), l.shape(), !l.shape().empty() && l.shape()[0] < 0, o, "output '" + l.name() + "'",
              false);
  }
  return e;
}

}  // namespace

void register_onnx_exporter(const std::type_info& kind, OnnxExporter exporter) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  if (exporter) registry()[std::type_index(kind)] = std::move(exporter);
  else registry().erase(std::type_index(kind));
}

std::vector<std::string> onnx_unexportable(const Graph& graph) { return encode(graph, {}).failures; }

namespace {

// protobuf refuses to serialize messages of 2 GB and more
constexpr size_t kProtobufLimit = (size_t{1} << 31) - (size_t{1} << 20);
// tensors smaller than this stay in the model file when the weights go to a file of their own
constexpr size_t kExternalMinBytes = 1024;

Encoded encode_or_throw(const Graph& graph, const OnnxExportOptions& options) {
  Encoded e = encode(graph, options);
  if (!e.failures.empty()) {
    std::string msg = "export_onnx: " + std::to_string(e.failures.size()) + " layer" + (e.failures.size() == 1 ? "" : "s") +
                      " cannot be exported:";
    for (const std::string& f : e.failures) msg += "\n  " + f;
    throw ValueError(msg);
  }
  return e;
}

std::string serialize(const onnx::ModelProto& m) {
  if (m.ByteSizeLong() >= kProtobufLimit)
    throw IOError("export_onnx: the model is " + std::to_string(m.ByteSizeLong()) +
                  " bytes, past protobuf's 2 GB limit (export_onnx writes its weights to a file of their own)");
  std::string bytes;
  if (!m.SerializeToString(&bytes)) throw IOError("export_onnx: the model could not be serialized");
  return bytes;
}

}  // namespace

std::string encode_onnx(const Graph& graph, const OnnxExportOptions& options) { return serialize(encode_or_throw(graph, options).model); }

void export_onnx(const Graph& graph, const std::string& path, const OnnxExportOptions& options) {
  Encoded e = encode_or_throw(graph, options);
  onnx::ModelProto& m = e.model;
  const int64_t threshold = std::min<int64_t>(options.external_data_threshold, static_cast<int64_t>(kProtobufLimit));
  if (options.external_data || static_cast<int64_t>(m.ByteSizeLong()) >= threshold) {
    // the initializers' bytes into "<file>.data", named relative to the model's folder
    const std::string location = std::filesystem::path(path).filename().string() + ".data";
    std::string data;
    for (onnx::TensorProto& t : *m.mutable_graph()->mutable_initializer()) {
      // small tensors (shapes, axes: what shape inference reads) stay inside, as onnx.save does
      if (!t.has_raw_data() || t.raw_data().size() < kExternalMinBytes) continue;
      data.resize((data.size() + 63) / 64 * 64, '\0');
      const size_t offset = data.size(), length = t.raw_data().size();
      data += t.raw_data();
      t.clear_raw_data();
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      for (const auto& [k, v] : {std::pair<const char*, std::string>{"location", location}, {"offset", std::to_string(offset)},
                                  {"length", std::to_string(length)}}) {
        auto* entry = t.add_external_data();
        entry->set_key(k);
        entry->set_value(v);
      }
    }
    const std::string bytes = serialize(m);
    write_file_atomic(path + ".data", data);
    write_file_atomic(path, bytes);
    return;
  }
  write_file_atomic(path, serialize(m));
}

}  // namespace loom::io
