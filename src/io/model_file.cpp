#include "loom/io/model_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "loom/core/file.h"
#include "loom/core/grad_mode.h"
#include "loom/graph/serialize.h"
#include "loom/nn/init.h"
#include "io/state_check.h"

namespace loom::io {

using json = nlohmann::json;

namespace {

constexpr const char* kFormatKey = "loom.format";
constexpr const char* kGraphKey = "loom.graph";
constexpr const char* kExtraKey = "loom.extra";

bool reserved(const std::string& key) { return key == kFormatKey || key == kGraphKey || key == kExtraKey; }

// One parameter or buffer of a graph and every key that names it (a shared tensor is reachable
// from each layer that holds it; the first key, in graph order, is the one written).
struct Slot {
  std::vector<std::string> keys;
  Tensor tensor;
};

std::vector<Slot> slots_of(const Graph& graph) {
  std::vector<Slot> slots;
  std::unordered_map<const TensorImpl*, size_t> index;
  for (const nn::Layer& l : graph.nodes()) {
    const nn::State& st = l.state();
    for (bool buffers : {false, true})
      for (const auto& [path, t] : buffers ? st.all_buffers() : st.all_params()) {
        const std::string key = l.name() + "/" + path;
        auto [it, fresh] = index.emplace(t.impl().get(), slots.size());
        if (fresh) slots.push_back({{}, t});
        std::vector<std::string>& keys = slots[it->second].keys;
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
      }
  }
  return slots;
}

std::string list(const std::vector<std::string>& names, size_t most = 8) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < most; ++i) s += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > most) s += ", ... (" + std::to_string(names.size()) + " in all)";
  return s;
}

std::string encode(const char* op, const Graph& graph, bool with_graph, const TensorMap& extra, const Metadata& metadata) {
  for (const auto& [k, v] : metadata)
    if (reserved(k))
      throw ValueError(std::string(op) + ": the metadata key '" + k + "' is reserved (" + kFormatKey + ", " + kGraphKey + ", " + kExtraKey + ")");
  TensorMap all = graph_state(graph);
  json extra_names = json::array();
  for (const auto& [name, t] : extra) {
    if (all.count(name))
      throw ValueError(std::string(op) + ": the extra tensor '" + name + "' has the name of a parameter or buffer of the graph");
    all.emplace(name, t);
    extra_names.push_back(name);
  }
  Metadata meta = metadata;
  meta[kFormatKey] = with_graph ? "model" : "state";
  if (with_graph) meta[kGraphKey] = graph_to_json(graph);  // throws for a Lambda layer
  if (!extra.empty()) meta[kExtraKey] = extra_names.dump();
  try {
    return encode_safetensors(all, meta);
  } catch (const ValueError& e) {
    throw ValueError(std::string(op) + ": " + e.what());
  }
}

// Splits a file's tensors into the graph's and the extras; checks the reserved metadata.
Checkpoint split(const std::string& path, TensorMap& tensors, Metadata& meta) {
  Checkpoint rest;
  if (auto it = meta.find(kExtraKey); it != meta.end()) {
    json names;
    try {
      names = json::parse(it->second);
    } catch (const json::exception&) {
      throw IOError("load: '" + path + "': the metadata '" + kExtraKey + "' is not a JSON list of names");
    }
    if (!names.is_array()) throw IOError("load: '" + path + "': the metadata '" + kExtraKey + "' is not a JSON list of names");
    for (const json& n : names) {
      if (!n.is_string()) throw IOError("load: '" + path + "': the metadata '" + kExtraKey + "' is not a JSON list of names");
      auto t = tensors.find(n.get<std::string>());
      if (t == tensors.end())
        throw IOError("load: '" + path + "': the extra tensor '" + n.get<std::string>() + "' listed in the metadata is missing");
      rest.extra.insert(tensors.extract(t));
    }
  }
  for (const auto& [k, v] : meta)
    if (!reserved(k)) rest.metadata.emplace(k, v);
  return rest;
}

}  // namespace

TensorMap graph_state(const Graph& graph) {
  TensorMap out;
  for (Slot& s : slots_of(graph)) {
    if (out.count(s.keys[0]))
      throw ValueError("graph_state: two different tensors have the key '" + s.keys[0] + "' (layer names must be unique)");
    out.emplace(s.keys[0], s.tensor);
  }
  return out;
}

namespace detail {

StateCheck check_state(const Graph& graph, const TensorMap& tensors) {
  StateCheck out;
  const std::vector<Slot> slots = slots_of(graph);
  std::unordered_map<std::string, bool> used;
  for (const auto& [k, v] : tensors) used.emplace(k, false);
  for (const Slot& s : slots) {
    std::vector<std::string> present;
    const Tensor* value = nullptr;
    for (const std::string& k : s.keys)
      if (auto it = tensors.find(k); it != tensors.end()) {
        present.push_back(k);
        used[k] = true;
        value = &it->second;
      }
    out.pairs.emplace_back(s.tensor, value);
    if (present.empty()) {
      out.missing.push_back(s.keys[0]);
      continue;
    }
    if (present.size() > 1) {
      out.issues.push_back({StateIssue::Kind::Doubly, present, "name the same shared tensor: give it once"});
      continue;
    }
    const Tensor& v = *value;
    if (!v.defined())
      out.issues.push_back({StateIssue::Kind::Undefined, present, "is undefined"});
    else if (v.shape() != s.tensor.shape())
      out.issues.push_back({StateIssue::Kind::Shape, present,
                            "has shape " + shape_str(v.shape()) + " but the graph expects " + shape_str(s.tensor.shape())});
    else if (v.dtype() != s.tensor.dtype())
      out.issues.push_back({StateIssue::Kind::DType, present,
                            std::string("has dtype ") + dtype_name(v.dtype()) + " but the graph expects " + dtype_name(s.tensor.dtype())});
  }
  for (const auto& [k, v] : tensors)
    if (!used.at(k)) out.unexpected.push_back(k);
  return out;
}

}  // namespace detail

namespace {

// Pairs each parameter and buffer of `graph` with its value in `tensors`, checking everything
// (names, shapes, dtypes) so that copying afterwards cannot fail half way. Throws for the first
// problem of the graph's tensors (in graph order), then for missing, then for unexpected names.
std::vector<std::pair<Tensor, const Tensor*>> match(const Graph& graph, const TensorMap& tensors, const std::string& source) {
  detail::StateCheck c = detail::check_state(graph, tensors);
  using Kind = detail::StateIssue::Kind;
  if (!c.issues.empty()) {
    const detail::StateIssue& i = c.issues.front();
    switch (i.kind) {
      case Kind::Doubly: throw ValueError("load: " + source + " holds " + list(i.keys) + ", which " + i.detail);
      case Kind::Undefined: throw ValueError("load: " + source + ": the tensor '" + i.keys[0] + "' " + i.detail);
      case Kind::Shape: throw ShapeError("load: " + source + ": '" + i.keys[0] + "' " + i.detail);
      case Kind::DType: throw DTypeError("load: " + source + ": '" + i.keys[0] + "' " + i.detail);
    }
  }
  if (!c.missing.empty()) throw ValueError("load: " + source + " lacks the graph's " + list(c.missing));
  if (!c.unexpected.empty()) throw ValueError("load: " + source + " holds " + list(c.unexpected) + ", which the graph does not have");
  return std::move(c.pairs);
}

}  // namespace

void check_graph_state(const Graph& graph, const TensorMap& tensors, const std::string& source) { match(graph, tensors, source); }

void load_graph_state(const Graph& graph, const TensorMap& tensors, const std::string& source) {
  auto pairs = match(graph, tensors, source);
  NoGrad off;
  for (auto& [dst, src] : pairs) dst.copy_(*src);
}

void save_model(const std::string& path, const Graph& graph, const TensorMap& extra, const Metadata& metadata) {
  write_file_atomic(path, encode("save_model", graph, true, extra, metadata));
}

void save_state(const std::string& path, const Graph& graph, const TensorMap& extra, const Metadata& metadata) {
  write_file_atomic(path, encode("save_state", graph, false, extra, metadata));
}

std::string encode_state(const Graph& graph, const TensorMap& extra, const Metadata& metadata) {
  return encode("encode_state", graph, false, extra, metadata);
}

Graph build_model(const std::string& architecture, const TensorMap& weights, const std::string& source) {
  Graph graph = [&] {
    // Every parameter and buffer must come from `weights`, so building may allocate no more
    // than they hold (checked before each allocation; nothing is initialised).
    uint64_t held = 0;
    for (const auto& [name, t] : weights) held += t.nbytes();
    nn::ParamBudget budget(held);
    try {
      return graph_from_json(architecture);
    } catch (const ValueError& e) {
      throw ValueError("load_model: " + source + ": " + e.what());
    }
  }();
  load_graph_state(graph, weights, source);
  return graph;
}

Graph load_model(const std::string& path, Checkpoint* rest) {
  Metadata meta;
  TensorMap tensors = load_safetensors(path, &meta);
  auto g = meta.find(kGraphKey);
  if (g == meta.end())
    throw IOError("load_model: '" + path + "' holds no architecture (no '" + std::string(kGraphKey) +
                  "' metadata): it is a weights-only file; build the graph and use load_state");
  const std::string architecture = g->second;
  Checkpoint r = split(path, tensors, meta);
  Graph graph = build_model(architecture, tensors, "'" + path + "'");
  if (rest) *rest = std::move(r);
  return graph;
}

Checkpoint read_state(const std::string& path, TensorMap* weights) {
  Metadata meta;
  TensorMap tensors = load_safetensors(path, &meta);
  Checkpoint r = split(path, tensors, meta);
  if (weights) *weights = std::move(tensors);
  return r;
}

Checkpoint load_state(const std::string& path, const Graph& graph) {
  TensorMap tensors;
  Checkpoint r = read_state(path, &tensors);
  load_graph_state(graph, tensors, "'" + path + "'");
  return r;
}

}  // namespace loom::io
