#include "loom/graph/serialize.h"

#include <nlohmann/json.hpp>

#include <map>
#include <unordered_map>

#include "loom/graph/module.h"
#include "loom/nn/adaptive_pool.h"
#include "loom/nn/attention_layers.h"
#include "loom/nn/conv_layers.h"
#include "loom/nn/layers.h"
#include "loom/nn/recurrent.h"
#include "loom/nn/shape_layers.h"
#include "loom/core/grad_mode.h"
#include "loom/ops/creation.h"

namespace loom {

using json = nlohmann::json;
using nn::Layer;

namespace {

constexpr const char* kFormat = "loom.graph";
constexpr int kVersion = 1;

DType dtype_named(const std::string& name, const std::string& where) {
  for (DType d : {Bool, UInt8, Int32, Int64, Float16, BFloat16, Float32, Float64})
    if (name == dtype_name(d)) return d;
  throw ValueError("graph_from_json: " + where + " has unknown dtype '" + name + "'");
}

json graph_json(const Graph& g);

json layer_options(const Layer& l) {
  const std::string kind = l.kind();
  if (kind == "Lambda")
    throw ValueError("graph_to_json: layer '" + l.name() + "' is a Lambda (an arbitrary C++ function), which JSON cannot hold");
  if (kind == "Module") return json{{"graph", graph_json(*nn::module_graph(l))}};
  if (kind == "Constant") {
    Tensor v = l();
    return json{{"shape", v.shape()}, {"dtype", dtype_name(v.dtype())}, {"values", v.to_vector<double>()}};
  }
  return json::parse(l.options_json());
}

json graph_json(const Graph& g) {
  json layers = json::array();
  std::unordered_map<const nn::State*, size_t> groups;
  std::unordered_map<const TensorImpl*, std::pair<std::string, std::string>> owners;
  for (const Layer& l : g.nodes()) {
    const nn::State* st = l.shared_state().get();
    const bool first = !groups.count(st);
    if (first) groups.emplace(st, groups.size());
    json entry{{"name", l.name()}, {"kind", l.kind()}, {"shape", l.shape()}, {"dtype", dtype_name(l.dtype())},
               {"state", groups.at(st)}, {"options", layer_options(l)}};
    json ins = json::array();
    bool is_start = false;
    for (const Layer& i : g.inputs()) is_start = is_start || i == l;
    if (!is_start)
      for (const Layer& i : l.inputs()) ins.push_back(i.name());
    entry["inputs"] = ins;
    // parameters owned by an earlier layer with another state (tied weights)
    if (first)
      for (const auto& [pname, t] : l.state().params()) {
        auto it = owners.find(t.impl().get());
        if (it != owners.end()) entry["tied"][pname] = {{"layer", it->second.first}, {"param", it->second.second}};
        else owners.emplace(t.impl().get(), std::make_pair(l.name(), pname));
      }
    layers.push_back(entry);
  }
  json j{{"format", kFormat}, {"version", kVersion}, {"layers", layers}};
  for (const Layer& i : g.inputs()) j["inputs"].push_back(i.name());
  for (const Layer& o : g.outputs()) j["outputs"].push_back(o.name());
  if (!j.contains("inputs")) j["inputs"] = json::array();
  return j;
}

template <typename T>
T field(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) throw ValueError("graph_from_json: " + where + " lacks the field '" + key + "'");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception& e) {
    throw ValueError("graph_from_json: " + where + " field '" + key + "' has the wrong type (" + e.what() + ")");
  }
}

const Layer& one(const std::vector<Layer>& ins, const std::string& where) {
  if (ins.size() != 1) throw ValueError("graph_from_json: " + where + " needs exactly one input, got " + std::to_string(ins.size()));
  return ins[0];
}

nn::Init init_from(const json& j, const std::string& where) {
  return nn::Init::from_name(field<std::string>(j, "kind", where), j.value("a", 0.0), j.value("b", 0.0));
}

Graph graph_from(const json& j) {
  if (j.value("format", "") != kFormat)
    throw ValueError("graph_from_json: not a Loom graph (the field 'format' must be \"" + std::string(kFormat) + "\")");
  if (j.value("version", 0) != kVersion)
    throw ValueError("graph_from_json: unsupported version " + std::to_string(j.value("version", 0)) + " (supported: 1)");
  std::map<std::string, Layer> built;
  std::map<int64_t, Layer> state_owner;
  for (const json& e : field<json>(j, "layers", "the graph")) {
    const std::string name = field<std::string>(e, "name", "a layer");
    const std::string where = "layer '" + name + "'";
    const std::string kind = field<std::string>(e, "kind", where);
    const json opt = field<json>(e, "options", where);
    std::vector<Layer> ins;
    for (const auto& n : field<std::vector<std::string>>(e, "inputs", where)) {
      auto it = built.find(n);
      if (it == built.end()) throw ValueError("graph_from_json: " + where + " reads '" + n + "', which is not defined before it");
      ins.push_back(it->second);
    }
    const int64_t group = field<int64_t>(e, "state", where);
    Layer l;
    if (auto owner = state_owner.find(group); owner != state_owner.end() && kind != "Input") {
      l = owner->second.reuse_with(ins, name);
    } else if (kind == "Input") {
      l = nn::Input(field<Shape>(e, "shape", where), dtype_named(field<std::string>(e, "dtype", where), where), name);
    } else if (kind == "Constant") {
      Tensor v = from_vector(field<std::vector<double>>(opt, "values", where), field<Shape>(opt, "shape", where));
      l = nn::Constant(v.astype(dtype_named(field<std::string>(opt, "dtype", where), where)), name);
    } else if (kind == "Param") {
      l = nn::Param(field<double>(opt, "value", where), name);
    } else if (kind == "Linear") {
      nn::LinearOptions o;
      o.bias = field<bool>(opt, "bias", where);
      o.transpose_weights = field<bool>(opt, "transpose_weights", where);
      o.weight_init = init_from(field<json>(opt, "weight_init", where), where);
      o.bias_init = init_from(field<json>(opt, "bias_init", where), where);
      if (e.contains("tied") && e["tied"].contains("weights")) {
        const std::string src = field<std::string>(e["tied"]["weights"], "layer", where);
        if (!built.count(src)) throw ValueError("graph_from_json: " + where + " ties its weights to unknown layer '" + src + "'");
        o.shared_weights = built.at(src).state().param(field<std::string>(e["tied"]["weights"], "param", where));
      }
      if (ins.size() != 1) throw ValueError("graph_from_json: " + where + " (Linear) needs exactly one input");
      l = nn::Linear(ins[0], field<int64_t>(opt, "n_units", where), o, name);
    } else if (kind == "Activation") {
      if (ins.size() != 1) throw ValueError("graph_from_json: " + where + " (Activation) needs exactly one input");
      l = nn::Activation(ins[0], nn::activation_by_name(field<std::string>(opt, "fn", where)), name);
    } else if (kind == "Dropout") {
      if (ins.size() != 1) throw ValueError("graph_from_json: " + where + " (Dropout) needs exactly one input");
      l = nn::Dropout(ins[0], field<double>(opt, "probability", where), field<uint64_t>(opt, "seed", where), name);
    } else if (kind == "Add") {
      l = nn::Add(ins, name);
    } else if (kind == "Subtract") {
      if (ins.size() != 2) throw ValueError("graph_from_json: " + where + " (Subtract) needs exactly two inputs");
      l = nn::Subtract(ins[0], ins[1], name);
    } else if (kind == "Multiply") {
      l = nn::Multiply(ins, name);
    } else if (kind == "Mean") {
      l = nn::Mean(ins, name);
    } else if (kind == "Concat") {
      l = nn::Concat(ins, field<int64_t>(opt, "axis", where), name);
    } else if (kind == "Reshape") {
      l = nn::Reshape(one(ins, where), field<Shape>(opt, "shape", where), name);
    } else if (kind == "Transpose") {
      l = nn::Transpose(one(ins, where), field<Axes>(opt, "perm", where), name);
    } else if (kind == "Residual") {
      if (ins.size() != 2) throw ValueError("graph_from_json: " + where + " (Residual) needs exactly two inputs");
      l = nn::Residual(ins[0], ins[1], name);
    } else if (kind == "Gate") {
      if (ins.size() != 2) throw ValueError("graph_from_json: " + where + " (Gate) needs exactly two inputs");
      l = nn::Gate(ins[0], ins[1], name);
    } else if (kind == "OneHot") {
      l = nn::OneHot(one(ins, where), field<int64_t>(opt, "n_classes", where),
                     dtype_named(field<std::string>(opt, "dtype", where), where), name);
    } else if (kind == "Lookup") {
      nn::LookupOptions o;
      o.padding_id = field<int64_t>(opt, "padding_id", where);
      o.init = init_from(field<json>(opt, "init", where), where);
      l = nn::Lookup(one(ins, where), field<int64_t>(opt, "vocab_size", where), field<int64_t>(opt, "n_units", where), o, name);
    } else if (kind == "RNNCell" || kind == "LSTMCell" || kind == "GRUCell") {
      if (ins.size() != 2) throw ValueError("graph_from_json: " + where + " (" + kind + ") needs an input and a state");
      nn::CellOptions o;
      o.activation = nn::activation_by_name(field<std::string>(opt, "activation", where));
      o.bias = field<bool>(opt, "bias", where);
      const int64_t n = field<int64_t>(opt, "n_units", where);
      if (kind == "RNNCell") l = nn::RNNCell(ins[0], ins[1], n, o, name);
      else if (kind == "LSTMCell") l = nn::LSTMCell(ins[0], ins[1], n, o, name);
      else l = nn::GRUCell(ins[0], ins[1], n, o, name);
    } else if (kind == "RNN") {
      nn::RNNOptions o;
      const std::string cell = field<std::string>(opt, "cell", where);
      if (cell == "RNN") o.cell = nn::CellKind::RNN;
      else if (cell == "LSTM") o.cell = nn::CellKind::LSTM;
      else if (cell == "GRU") o.cell = nn::CellKind::GRU;
      else throw ValueError("graph_from_json: " + where + " has unknown cell '" + cell + "' (valid: RNN, LSTM, GRU)");
      o.return_sequences = field<bool>(opt, "return_sequences", where);
      o.reverse = field<bool>(opt, "reverse", where);
      o.bidirectional = field<bool>(opt, "bidirectional", where);
      o.stateful = field<bool>(opt, "stateful", where);
      o.cell_options.activation = nn::activation_by_name(field<std::string>(opt, "activation", where));
      o.cell_options.bias = field<bool>(opt, "bias", where);
      l = nn::RNN(one(ins, where), field<int64_t>(opt, "n_units", where), o, name);
    } else if (kind == "Conv1D" || kind == "Conv2D") {
      nn::ConvOptions o;
      o.stride = IntList(field<std::vector<int64_t>>(opt, "stride", where));
      o.dilation = IntList(field<std::vector<int64_t>>(opt, "dilation", where));
      if (opt.contains("padding") && opt["padding"].is_string()) o.padding = ConvPadding(opt["padding"].get<std::string>());
      else o.padding = ConvPadding(field<std::vector<int64_t>>(opt, "padding", where));
      o.groups = field<int64_t>(opt, "groups", where);
      o.bias = field<bool>(opt, "bias", where);
      const auto k = field<std::vector<int64_t>>(opt, "kernel_size", where);
      const int64_t filters = field<int64_t>(opt, "filters", where);
      if (kind == "Conv1D") l = nn::Conv1D(one(ins, where), filters, k.at(0), o, name);
      else l = nn::Conv2D(one(ins, where), filters, IntList(k), o, name);
    } else if (kind == "Conv2DTranspose") {
      nn::ConvTransposeOptions o;
      o.stride = IntList(field<std::vector<int64_t>>(opt, "stride", where));
      o.padding = IntList(field<std::vector<int64_t>>(opt, "padding", where));
      o.output_padding = IntList(field<std::vector<int64_t>>(opt, "output_padding", where));
      o.dilation = IntList(field<std::vector<int64_t>>(opt, "dilation", where));
      o.groups = field<int64_t>(opt, "groups", where);
      o.bias = field<bool>(opt, "bias", where);
      l = nn::Conv2DTranspose(one(ins, where), field<int64_t>(opt, "filters", where),
                              IntList(field<std::vector<int64_t>>(opt, "kernel_size", where)), o, name);
    } else if (kind == "MaxPool2D" || kind == "AvgPool2D") {
      nn::PoolOptions o;
      o.stride = IntList(field<std::vector<int64_t>>(opt, "stride", where));
      o.padding = IntList(field<std::vector<int64_t>>(opt, "padding", where));
      o.ceil_mode = field<bool>(opt, "ceil_mode", where);
      const IntList k(field<std::vector<int64_t>>(opt, "kernel_size", where));
      if (kind == "MaxPool2D") l = nn::MaxPool2D(one(ins, where), k, o, name);
      else l = nn::AvgPool2D(one(ins, where), k, o, name);
    } else if (kind == "GlobalPool") {
      l = nn::GlobalPool(one(ins, where), field<std::string>(opt, "mode", where) == "max" ? nn::GlobalPool::Mode::Max : nn::GlobalPool::Mode::Avg, name);
    } else if (kind == "AdaptiveAvgPool2D") {
      l = nn::AdaptiveAvgPool2D(one(ins, where), IntList(field<std::vector<int64_t>>(opt, "output_size", where)), name);
    } else if (kind == "BatchNorm") {
      l = nn::BatchNorm(one(ins, where), {field<double>(opt, "momentum", where), field<double>(opt, "eps", where), field<bool>(opt, "affine", where)}, name);
    } else if (kind == "LayerNorm") {
      l = nn::LayerNorm(one(ins, where), field<double>(opt, "eps", where), name);
    } else if (kind == "MultiHeadAttention") {
      if (ins.size() != 3 && ins.size() != 4) throw ValueError("graph_from_json: " + where + " needs query, key, value (and a mask)");
      std::optional<Layer> mask;
      if (ins.size() == 4) mask = ins[3];
      l = nn::MultiHeadAttention(ins[0], ins[1], ins[2], field<int64_t>(opt, "n_heads", where),
                                 {field<bool>(opt, "causal", where), field<bool>(opt, "bias", where)}, mask, name);
    } else if (kind == "TransformerEncoderLayer") {
      if (ins.empty() || ins.size() > 2) throw ValueError("graph_from_json: " + where + " needs an input (and a mask)");
      nn::TransformerOptions o;
      o.ff_units = field<int64_t>(opt, "ff_units", where);
      o.dropout = field<double>(opt, "dropout", where);
      o.activation = nn::activation_by_name(field<std::string>(opt, "activation", where));
      o.norm_first = field<bool>(opt, "norm_first", where);
      o.eps = field<double>(opt, "eps", where);
      o.causal = field<bool>(opt, "causal", where);
      std::optional<Layer> mask;
      if (ins.size() == 2) mask = ins[1];
      l = nn::TransformerEncoderLayer(ins[0], field<int64_t>(opt, "n_heads", where), o, mask, name);
    } else if (kind == "Module") {
      Graph inner = graph_from(field<json>(opt, "graph", where));
      if (inner.outputs().size() != 1) throw ValueError("graph_from_json: " + where + " (Module) must have one output");
      l = nn::Module(inner.inputs(), inner.outputs()[0], name);
      if (!ins.empty()) l = l.reuse_with(ins, name);
    } else {
      throw ValueError("graph_from_json: " + where + " has unknown kind '" + kind + "'");
    }
    if (!state_owner.count(group)) state_owner.emplace(group, l);
    built[name] = l;
  }
  auto named = [&](const char* key) {
    std::vector<Layer> out;
    for (const auto& n : field<std::vector<std::string>>(j, key, "the graph")) {
      if (!built.count(n)) throw ValueError("graph_from_json: the graph's " + std::string(key) + " name unknown layer '" + n + "'");
      out.push_back(built.at(n));
    }
    return out;
  };
  return Graph::build(named("outputs"), named("inputs"));
}

}  // namespace

std::string graph_to_json(const Graph& graph) { return graph_json(graph).dump(2); }

Graph graph_from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw ValueError(std::string("graph_from_json: the text is not JSON (") + e.what() + ")");
  }
  return graph_from(j);
}

void copy_state(const Graph& from, const Graph& to) {
  std::map<std::string, Layer> target;
  for (const Layer& l : to.nodes()) target[l.name()] = l;
  GradModeScope off(false);
  for (const Layer& l : from.nodes()) {
    auto it = target.find(l.name());
    if (it == target.end()) continue;
    for (bool buffers : {false, true}) {
      auto src = buffers ? l.state().all_buffers() : l.state().all_params();
      auto dst = buffers ? it->second.state().all_buffers() : it->second.state().all_params();
      if (src.size() != dst.size())
        throw ValueError("copy_state: layer '" + l.name() + "' has " + std::to_string(src.size()) + (buffers ? " buffers" : " parameters") +
                         " in the source and " + std::to_string(dst.size()) + " in the target");
      for (size_t i = 0; i < src.size(); ++i) {
        if (src[i].second.shape() != dst[i].second.shape())
          throw ShapeError("copy_state: '" + l.name() + "/" + src[i].first + "' has shape " + shape_str(src[i].second.shape()) +
                           " in the source and " + shape_str(dst[i].second.shape()) + " in the target");
        dst[i].second.copy_(src[i].second);
      }
    }
  }
}

}  // namespace loom
