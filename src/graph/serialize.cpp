#include "loom/graph/serialize.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <unordered_map>

#include "core/json_util.h"
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
constexpr int kMaxModuleDepth = 24;  // Modules inside Modules (each adds 4 JSON levels; see core/json_util.h)

DType dtype_named(const std::string& name, const std::string& where) {
  for (DType d : {Bool, UInt8, Int32, Int64, Float16, BFloat16, Float32, Float64})
    if (name == dtype_name(d)) return d;
  throw ValueError("graph_from_json: " + where + " has unknown dtype '" + name + "'");
}

json graph_json(const Graph& g, int depth);

json layer_options(const Layer& l, int depth) {
  const std::string kind = l.kind();
  if (kind == "Lambda")
    throw ValueError("graph_to_json: layer '" + l.name() + "' is a Lambda (an arbitrary C++ function), which JSON cannot hold");
  if (kind == "Module") return json{{"graph", graph_json(*nn::module_graph(l), depth + 1)}};
  if (kind == "Constant") {  // integers exactly (int64 beyond 2^53 too), floats with NaN/inf spelled out
    Tensor v = l();
    json values = json::array();
    if (is_floating(v.dtype()))
      for (double x : v.to_vector<double>()) values.push_back(detail::json_float(x));
    else
      for (int64_t x : v.to_vector<int64_t>()) values.push_back(x);
    return json{{"shape", v.shape()}, {"dtype", dtype_name(v.dtype())}, {"values", std::move(values)}};
  }
  return json::parse(l.options_json());
}

json graph_json(const Graph& g, int depth) {
  if (depth > kMaxModuleDepth)
    throw ValueError("graph_to_json: Modules nest more than " + std::to_string(kMaxModuleDepth) + " deep (the limit that graph_from_json enforces)");
  json layers = json::array();
  std::unordered_map<const nn::State*, size_t> groups;
  std::unordered_map<const TensorImpl*, std::pair<std::string, std::string>> owners;
  for (const Layer& l : g.nodes()) {
    const nn::State* st = l.shared_state().get();
    const bool first = !groups.count(st);
    if (first) groups.emplace(st, groups.size());
    json entry{{"name", l.name()}, {"kind", l.kind()}, {"shape", l.shape()}, {"dtype", dtype_name(l.dtype())},
               {"state", groups.at(st)}, {"options", layer_options(l, depth)}};
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

// Every field is read with its type and range checked: a file is untrusted, and nlohmann's
// get<int64_t>() of 1e300 is undefined behaviour, get<>() of a wrong type throws its own
// exception type. Each failure is a ValueError naming the place, the field and what is valid.
constexpr int64_t kMaxSize = int64_t{1} << 40;  // sizes, units, kernel extents read from a file

[[noreturn]] void bad(const std::string& where, const std::string& what) { throw ValueError("graph_from_json: " + where + " " + what); }

std::string brief(const json& v) {
  if (v.is_structured()) return std::string("an ") + v.type_name();
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

const json& member(const json& j, const char* key, const std::string& where) {
  if (!j.is_object()) bad(where, std::string("is ") + brief(j) + ", not a JSON object");
  auto it = j.find(key);
  if (it == j.end()) bad(where, std::string("lacks the field '") + key + "'");
  return *it;
}

const json& object_field(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  if (!v.is_object()) bad(where, std::string("field '") + key + "' is " + brief(v) + " (valid: a JSON object)");
  return v;
}

const json& array_field(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  if (!v.is_array()) bad(where, std::string("field '") + key + "' is " + brief(v) + " (valid: a JSON array)");
  return v;
}

std::string range_str(int64_t lo, int64_t hi) { return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]"; }

int64_t int_value(const json& v, const char* key, const std::string& where, int64_t lo, int64_t hi) {
  const auto r = detail::json_to_int(v, lo, hi);
  if (!r) bad(where, std::string("field '") + key + "' is " + brief(v) + " (valid: an integer in " + range_str(lo, hi) + ")");
  return *r;
}

int64_t int_field(const json& j, const char* key, const std::string& where, int64_t lo = 1, int64_t hi = kMaxSize) {
  return int_value(member(j, key, where), key, where, lo, hi);
}

std::vector<int64_t> ints_field(const json& j, const char* key, const std::string& where, int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  for (const json& v : array_field(j, key, where)) out.push_back(int_value(v, key, where, lo, hi));
  return out;
}

uint64_t u64_field(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    bad(where, std::string("field '") + key + "' is " + brief(v) + " (valid: an integer in [0, 2^64))");
  return v.get<uint64_t>();
}

double float_field(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  const auto r = detail::json_to_float(v);
  if (!r) bad(where, std::string("field '") + key + "' is " + brief(v) + " (valid: " + detail::json_float_help() + ")");
  return *r;
}

bool bool_field(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  if (!v.is_boolean()) bad(where, std::string("field '") + key + "' is " + brief(v) + " (valid: true or false)");
  return v.get<bool>();
}

std::string string_field(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  if (!v.is_string()) bad(where, std::string("field '") + key + "' is " + brief(v) + " (valid: a string)");
  return v.get<std::string>();
}

std::vector<std::string> names_field(const json& j, const char* key, const std::string& where) {
  std::vector<std::string> out;
  for (const json& v : array_field(j, key, where)) {
    if (!v.is_string()) bad(where, std::string("field '") + key + "' holds " + brief(v) + " (valid: layer names, strings)");
    out.push_back(v.get<std::string>());
  }
  return out;
}

// Shapes: -1 marks an unknown extent (a batch axis), Reshape's -1 one to infer.
Shape shape_field(const json& j, const char* key, const std::string& where) { return ints_field(j, key, where, -1, kMaxSize); }

const Layer& one(const std::vector<Layer>& ins, const std::string& where) {
  if (ins.size() != 1) throw ValueError("graph_from_json: " + where + " needs exactly one input, got " + std::to_string(ins.size()));
  return ins[0];
}

nn::Init init_from(const json& j, const std::string& where) {
  const json& a = j.is_object() && j.contains("a") ? j["a"] : json(0.0);
  const json& b = j.is_object() && j.contains("b") ? j["b"] : json(0.0);
  const auto va = detail::json_to_float(a), vb = detail::json_to_float(b);
  if (!va || !vb) bad(where, "has an initializer whose 'a' or 'b' is not " + std::string(detail::json_float_help()));
  return nn::Init::from_name(string_field(j, "kind", where), *va, *vb);
}

// A Constant's values: integer dtypes as exact integers (older files wrote them as floats,
// accepted while integral and exact, |v| <= 2^53), floating dtypes as detail::json_float.
Tensor constant_from(const json& opt, const std::string& where) {
  const Shape shape = ints_field(opt, "shape", where, 0, kMaxSize);
  const DType dtype = dtype_named(string_field(opt, "dtype", where), where);
  const json& values = array_field(opt, "values", where);
  uint64_t count = 1;  // saturates past values.size(): the shape is only compared with it
  for (int64_t d : shape) {
    const uint64_t u = static_cast<uint64_t>(d);
    if (count <= values.size()) count = u != 0 && count > UINT64_MAX / u ? UINT64_MAX : count * u;
  }
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) count = 0;
  if (count != values.size())
    bad(where, "has " + std::to_string(values.size()) + " values for shape " + shape_str(shape) + " (valid: exactly its element count)");
  if (is_floating(dtype)) {
    std::vector<double> v;
    v.reserve(values.size());
    for (const json& x : values) {
      const auto f = detail::json_to_float(x);
      if (!f) bad(where, "holds the value " + brief(x) + " (valid: " + detail::json_float_help() + ")");
      v.push_back(*f);
    }
    return from_vector(v, shape).astype(dtype);
  }
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  if (dtype == Bool) lo = 0, hi = 1;
  else if (dtype == UInt8) lo = 0, hi = 255;
  else if (dtype == Int32) lo = INT32_MIN, hi = INT32_MAX;
  std::vector<int64_t> v;
  v.reserve(values.size());
  for (const json& x : values) {
    std::optional<int64_t> i = detail::json_to_int(x, lo, hi);
    if (!i && x.is_number_float()) {
      const double d = x.get<double>();
      if (d == std::floor(d) && std::fabs(d) <= 9007199254740992.0 && d >= static_cast<double>(lo) && d <= static_cast<double>(hi))
        i = static_cast<int64_t>(d);
    }
    if (!i) bad(where, "holds the value " + brief(x) + " (valid for " + dtype_name(dtype) + ": an integer in " + range_str(lo, hi) + ")");
    v.push_back(*i);
  }
  return from_vector(v, shape).astype(dtype);
}

Graph graph_from(const json& j, int depth) {
  if (!j.is_object()) bad("the text", "is " + brief(j) + ", not a Loom graph (valid: a JSON object with \"format\": \"" + kFormat + "\")");
  const auto fmt = j.find("format");
  if (fmt == j.end() || !fmt->is_string() || fmt->get_ref<const std::string&>() != kFormat)
    throw ValueError("graph_from_json: not a Loom graph (the field 'format' must be \"" + std::string(kFormat) + "\")");
  const auto ver = j.find("version");
  if (ver == j.end() || detail::json_to_int(*ver) != std::optional<int64_t>(kVersion))
    throw ValueError("graph_from_json: unsupported version " + (ver == j.end() ? std::string("(none)") : brief(*ver)) + " (supported: 1)");
  if (depth > kMaxModuleDepth)
    throw ValueError("graph_from_json: Modules nest more than " + std::to_string(kMaxModuleDepth) + " deep (the limit)");
  std::map<std::string, Layer> built;
  std::map<int64_t, Layer> state_owner;
  for (const json& e : array_field(j, "layers", "the graph")) {
    const std::string name = string_field(e, "name", "a layer");
    const std::string where = "layer '" + name + "'";
    if (built.count(name)) bad(where, "is defined twice (layer names must be unique)");
    const std::string kind = string_field(e, "kind", where);
    const json& opt = object_field(e, "options", where);
    std::vector<Layer> ins;
    for (const auto& n : names_field(e, "inputs", where)) {
      auto it = built.find(n);
      if (it == built.end()) throw ValueError("graph_from_json: " + where + " reads '" + n + "', which is not defined before it");
      ins.push_back(it->second);
    }
    const int64_t group = int_field(e, "state", where, 0, INT64_MAX);
    Layer l;
    if (auto owner = state_owner.find(group); owner != state_owner.end() && kind != "Input") {
      l = owner->second.reuse_with(ins, name);
    } else if (kind == "Input") {
      l = nn::Input(shape_field(e, "shape", where), dtype_named(string_field(e, "dtype", where), where), name);
    } else if (kind == "Constant") {
      l = nn::Constant(constant_from(opt, where), name);
    } else if (kind == "Param") {
      l = nn::Param(float_field(opt, "value", where), name);
    } else if (kind == "Linear") {
      nn::LinearOptions o;
      o.bias = bool_field(opt, "bias", where);
      o.transpose_weights = bool_field(opt, "transpose_weights", where);
      o.weight_init = init_from(object_field(opt, "weight_init", where), where);
      o.bias_init = init_from(object_field(opt, "bias_init", where), where);
      if (e.contains("tied")) {
        const json& tied = object_field(e, "tied", where);
        if (tied.contains("weights")) {
          const json& t = object_field(tied, "weights", where);
          const std::string src = string_field(t, "layer", where);
          if (!built.count(src)) throw ValueError("graph_from_json: " + where + " ties its weights to unknown layer '" + src + "'");
          o.shared_weights = built.at(src).state().param(string_field(t, "param", where));
        }
      }
      if (ins.size() != 1) throw ValueError("graph_from_json: " + where + " (Linear) needs exactly one input");
      l = nn::Linear(ins[0], int_field(opt, "n_units", where), o, name);
    } else if (kind == "Activation") {
      if (ins.size() != 1) throw ValueError("graph_from_json: " + where + " (Activation) needs exactly one input");
      l = nn::Activation(ins[0], nn::activation_by_name(string_field(opt, "fn", where)), name);
    } else if (kind == "Dropout") {
      if (ins.size() != 1) throw ValueError("graph_from_json: " + where + " (Dropout) needs exactly one input");
      l = nn::Dropout(ins[0], float_field(opt, "probability", where), u64_field(opt, "seed", where), name);
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
      l = nn::Concat(ins, int_field(opt, "axis", where, -kMaxSize, kMaxSize), name);
    } else if (kind == "Reshape") {
      l = nn::Reshape(one(ins, where), shape_field(opt, "shape", where), name);
    } else if (kind == "Transpose") {
      l = nn::Transpose(one(ins, where), ints_field(opt, "perm", where, -kMaxSize, kMaxSize), name);
    } else if (kind == "Residual") {
      if (ins.size() != 2) throw ValueError("graph_from_json: " + where + " (Residual) needs exactly two inputs");
      l = nn::Residual(ins[0], ins[1], name);
    } else if (kind == "Gate") {
      if (ins.size() != 2) throw ValueError("graph_from_json: " + where + " (Gate) needs exactly two inputs");
      l = nn::Gate(ins[0], ins[1], name);
    } else if (kind == "OneHot") {
      l = nn::OneHot(one(ins, where), int_field(opt, "n_classes", where), dtype_named(string_field(opt, "dtype", where), where), name);
    } else if (kind == "Lookup") {
      nn::LookupOptions o;
      o.padding_id = int_field(opt, "padding_id", where, -1, kMaxSize);
      o.init = init_from(object_field(opt, "init", where), where);
      l = nn::Lookup(one(ins, where), int_field(opt, "vocab_size", where), int_field(opt, "n_units", where), o, name);
    } else if (kind == "RNNCell" || kind == "LSTMCell" || kind == "GRUCell") {
      if (ins.size() != 2) throw ValueError("graph_from_json: " + where + " (" + kind + ") needs an input and a state");
      nn::CellOptions o;
      o.activation = nn::activation_by_name(string_field(opt, "activation", where));
      o.bias = bool_field(opt, "bias", where);
      const int64_t n = int_field(opt, "n_units", where);
      if (kind == "RNNCell") l = nn::RNNCell(ins[0], ins[1], n, o, name);
      else if (kind == "LSTMCell") l = nn::LSTMCell(ins[0], ins[1], n, o, name);
      else l = nn::GRUCell(ins[0], ins[1], n, o, name);
    } else if (kind == "RNN") {
      nn::RNNOptions o;
      const std::string cell = string_field(opt, "cell", where);
      if (cell == "RNN") o.cell = nn::CellKind::RNN;
      else if (cell == "LSTM") o.cell = nn::CellKind::LSTM;
      else if (cell == "GRU") o.cell = nn::CellKind::GRU;
      else throw ValueError("graph_from_json: " + where + " has unknown cell '" + cell + "' (valid: RNN, LSTM, GRU)");
      o.return_sequences = bool_field(opt, "return_sequences", where);
      o.reverse = bool_field(opt, "reverse", where);
      o.bidirectional = bool_field(opt, "bidirectional", where);
      o.stateful = bool_field(opt, "stateful", where);
      o.cell_options.activation = nn::activation_by_name(string_field(opt, "activation", where));
      o.cell_options.bias = bool_field(opt, "bias", where);
      l = nn::RNN(one(ins, where), int_field(opt, "n_units", where), o, name);
    } else if (kind == "Conv1D" || kind == "Conv2D") {
      nn::ConvOptions o;
      o.stride = IntList(ints_field(opt, "stride", where, 1, kMaxSize));
      o.dilation = IntList(ints_field(opt, "dilation", where, 1, kMaxSize));
      if (opt.contains("padding") && opt["padding"].is_string()) o.padding = ConvPadding(opt["padding"].get<std::string>());
      else o.padding = ConvPadding(ints_field(opt, "padding", where, 0, kMaxSize));
      o.groups = int_field(opt, "groups", where);
      o.bias = bool_field(opt, "bias", where);
      const auto k = ints_field(opt, "kernel_size", where, 1, kMaxSize);
      const int64_t filters = int_field(opt, "filters", where);
      if (kind == "Conv1D") {
        if (k.size() != 1) bad(where, "field 'kernel_size' has " + std::to_string(k.size()) + " values (valid: 1 for Conv1D)");
        l = nn::Conv1D(one(ins, where), filters, k[0], o, name);
      } else {
        l = nn::Conv2D(one(ins, where), filters, IntList(k), o, name);
      }
    } else if (kind == "Conv2DTranspose") {
      nn::ConvTransposeOptions o;
      o.stride = IntList(ints_field(opt, "stride", where, 1, kMaxSize));
      o.padding = IntList(ints_field(opt, "padding", where, 0, kMaxSize));
      o.output_padding = IntList(ints_field(opt, "output_padding", where, 0, kMaxSize));
      o.dilation = IntList(ints_field(opt, "dilation", where, 1, kMaxSize));
      o.groups = int_field(opt, "groups", where);
      o.bias = bool_field(opt, "bias", where);
      l = nn::Conv2DTranspose(one(ins, where), int_field(opt, "filters", where),
                              IntList(ints_field(opt, "kernel_size", where, 1, kMaxSize)), o, name);
    } else if (kind == "MaxPool2D" || kind == "AvgPool2D") {
      nn::PoolOptions o;
      o.stride = IntList(ints_field(opt, "stride", where, 1, kMaxSize));
      o.padding = IntList(ints_field(opt, "padding", where, 0, kMaxSize));
      o.ceil_mode = bool_field(opt, "ceil_mode", where);
      const IntList k(ints_field(opt, "kernel_size", where, 1, kMaxSize));
      if (kind == "MaxPool2D") l = nn::MaxPool2D(one(ins, where), k, o, name);
      else l = nn::AvgPool2D(one(ins, where), k, o, name);
    } else if (kind == "GlobalPool") {
      const std::string mode = string_field(opt, "mode", where);
      if (mode != "max" && mode != "avg") bad(where, "has the mode '" + mode + "' (valid: \"max\", \"avg\")");
      l = nn::GlobalPool(one(ins, where), mode == "max" ? nn::GlobalPool::Mode::Max : nn::GlobalPool::Mode::Avg, name);
    } else if (kind == "AdaptiveAvgPool2D") {
      l = nn::AdaptiveAvgPool2D(one(ins, where), IntList(ints_field(opt, "output_size", where, 1, kMaxSize)), name);
    } else if (kind == "BatchNorm") {
      // "sync" is optional: files written before synchronized batch norm lack it
      const bool sync = opt.contains("sync") && bool_field(opt, "sync", where);
      l = nn::BatchNorm(one(ins, where), {float_field(opt, "momentum", where), float_field(opt, "eps", where), bool_field(opt, "affine", where), sync}, name);
    } else if (kind == "LayerNorm") {
      l = nn::LayerNorm(one(ins, where), float_field(opt, "eps", where), name);
    } else if (kind == "MultiHeadAttention") {
      if (ins.size() != 3 && ins.size() != 4) throw ValueError("graph_from_json: " + where + " needs query, key, value (and a mask)");
      std::optional<Layer> mask;
      if (ins.size() == 4) mask = ins[3];
      l = nn::MultiHeadAttention(ins[0], ins[1], ins[2], int_field(opt, "n_heads", where),
                                 {bool_field(opt, "causal", where), bool_field(opt, "bias", where)}, mask, name);
    } else if (kind == "TransformerEncoderLayer") {
      if (ins.empty() || ins.size() > 2) throw ValueError("graph_from_json: " + where + " needs an input (and a mask)");
      nn::TransformerOptions o;
      o.ff_units = int_field(opt, "ff_units", where);
      o.dropout = float_field(opt, "dropout", where);
      o.activation = nn::activation_by_name(string_field(opt, "activation", where));
      o.norm_first = bool_field(opt, "norm_first", where);
      o.eps = float_field(opt, "eps", where);
      o.causal = bool_field(opt, "causal", where);
      std::optional<Layer> mask;
      if (ins.size() == 2) mask = ins[1];
      l = nn::TransformerEncoderLayer(ins[0], int_field(opt, "n_heads", where), o, mask, name);
    } else if (kind == "Module") {
      Graph inner = graph_from(object_field(opt, "graph", where), depth + 1);
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
    for (const auto& n : names_field(j, key, "the graph")) {
      if (!built.count(n)) throw ValueError("graph_from_json: the graph's " + std::string(key) + " name unknown layer '" + n + "'");
      out.push_back(built.at(n));
    }
    return out;
  };
  return Graph::build(named("outputs"), named("inputs"));
}

}  // namespace

std::string graph_to_json(const Graph& graph) { return graph_json(graph, 0).dump(2); }

Graph graph_from_json(const std::string& text) {
  std::string error;
  const std::optional<json> j = detail::parse_json(text, &error);
  if (!j) throw ValueError("graph_from_json: the text is not JSON Loom can read (" + error + ")");
  try {
    return graph_from(*j, 0);
  } catch (const Error&) {
    throw;
  } catch (const json::exception& e) {  // a layer's own check that is not (yet) a loom::Error
    throw ValueError(std::string("graph_from_json: the graph is not valid (") + e.what() + ")");
  } catch (const std::logic_error& e) {
    throw ValueError(std::string("graph_from_json: the graph is not valid (") + e.what() + ")");
  }
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
