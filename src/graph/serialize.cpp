#include "loom/graph/serialize.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <unordered_map>

#include "core/json_util.h"
#include "graph/serialize_internal.h"
#include "loom/core/grad_mode.h"
#include "loom/nn/registry.h"
#include "nn/options_json.h"

namespace loom {

using json = nlohmann::json;
using nn::Layer;

namespace {

constexpr const char* kFormat = "loom.graph";
constexpr int kVersion = 1;
constexpr int kMaxModuleDepth = 24;  // Modules inside Modules (each adds 4 JSON levels; see core/json_util.h)

// Module nesting of the graph being written or read on this thread: a Module's options()
// and factory re-enter graph_json / graph_from through module_options / module_graph_from.
thread_local int t_depth = -1;

struct DepthScope {
  explicit DepthScope(const char* fn) {
    if (t_depth + 1 > kMaxModuleDepth)
      throw ValueError(std::string(fn) + ": Modules nest more than " + std::to_string(kMaxModuleDepth) + " deep (the limit)");
    ++t_depth;
  }
  ~DepthScope() { --t_depth; }
  DepthScope(const DepthScope&) = delete;
  DepthScope& operator=(const DepthScope&) = delete;
};

json layer_options(const Layer& l) {
  nn::Options o = l.options();  // a Lambda refuses here, naming itself
  if (!nn::is_layer_kind_registered(l.kind()))
    throw ValueError("graph_to_json: layer '" + l.name() + "' has kind '" + l.kind() +
                     "', which is not registered, so a saved graph could not be loaded (register it with nn::register_layer_kind, "
                     "a Lambda's kind with nn::register_lambda_kind; "
                     "docs/layers.md, \"Writing a layer\")");
  return nn::json_of(o);
}

json graph_json(const Graph& g) {
  DepthScope scope("graph_to_json");
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

// Every field is read with its type and range checked: a file is untrusted, and nlohmann's
// get<int64_t>() of 1e300 is undefined behaviour, get<>() of a wrong type throws its own
// exception type. Each failure is a ValueError naming the place, the field and what is valid.
// A layer's own options are read by its kind's factory through nn::Options, which checks the same way.
[[noreturn]] void bad(const std::string& where, const std::string& what) { throw ValueError("graph_from_json: " + where + " " + what); }

const json& member(const json& j, const char* key, const std::string& where) {
  if (!j.is_object()) bad(where, std::string("is ") + nn::json_brief(j) + ", not a JSON object");
  auto it = j.find(key);
  if (it == j.end()) bad(where, std::string("lacks the field '") + key + "'");
  return *it;
}

const json& object_field(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  if (!v.is_object()) bad(where, std::string("field '") + key + "' is " + nn::json_brief(v) + " (valid: a JSON object)");
  return v;
}

const json& array_field(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  if (!v.is_array()) bad(where, std::string("field '") + key + "' is " + nn::json_brief(v) + " (valid: a JSON array)");
  return v;
}

int64_t int_field(const json& j, const char* key, const std::string& where, int64_t lo, int64_t hi) {
  const json& v = member(j, key, where);
  const auto r = detail::json_to_int(v, lo, hi);
  if (!r)
    bad(where, std::string("field '") + key + "' is " + nn::json_brief(v) + " (valid: an integer in [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "])");
  return *r;
}

std::string string_field(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  if (!v.is_string()) bad(where, std::string("field '") + key + "' is " + nn::json_brief(v) + " (valid: a string)");
  return v.get<std::string>();
}

std::vector<std::string> names_field(const json& j, const char* key, const std::string& where) {
  std::vector<std::string> out;
  for (const json& v : array_field(j, key, where)) {
    if (!v.is_string()) bad(where, std::string("field '") + key + "' holds " + nn::json_brief(v) + " (valid: layer names, strings)");
    out.push_back(v.get<std::string>());
  }
  return out;
}

Graph graph_from(const json& j) {
  DepthScope scope("graph_from_json");
  if (!j.is_object()) bad("the text", "is " + nn::json_brief(j) + ", not a Loom graph (valid: a JSON object with \"format\": \"" + kFormat + "\")");
  const auto fmt = j.find("format");
  if (fmt == j.end() || !fmt->is_string() || fmt->get_ref<const std::string&>() != kFormat)
    throw ValueError("graph_from_json: not a Loom graph (the field 'format' must be \"" + std::string(kFormat) + "\")");
  const auto ver = j.find("version");
  if (ver == j.end() || detail::json_to_int(*ver) != std::optional<int64_t>(kVersion))
    throw ValueError("graph_from_json: unsupported version " + (ver == j.end() ? std::string("(none)") : nn::json_brief(*ver)) + " (supported: 1)");
  std::map<std::string, Layer> built;
  std::map<int64_t, Layer> state_owner;
  for (const json& e : array_field(j, "layers", "the graph")) {
    const std::string name = string_field(e, "name", "a layer");
    const std::string where = "layer '" + name + "'";
    if (built.count(name)) bad(where, "is defined twice (layer names must be unique)");
    const std::string kind = string_field(e, "kind", where);
    nn::LayerSpec spec{name, {}, nn::options_from(object_field(e, "options", where), "graph_from_json: " + where), {}};
    for (const auto& n : names_field(e, "inputs", where)) {
      auto it = built.find(n);
      if (it == built.end()) throw ValueError("graph_from_json: " + where + " reads '" + n + "', which is not defined before it");
      spec.inputs.push_back(it->second);
    }
    if (e.contains("tied"))
      for (const auto& [pname, t] : object_field(e, "tied", where).items()) {
        const std::string src = string_field(t, "layer", where + " tied '" + pname + "'");
        if (!built.count(src)) throw ValueError("graph_from_json: " + where + " ties its '" + pname + "' to unknown layer '" + src + "'");
        spec.tied.emplace_back(pname, built.at(src).state().param(string_field(t, "param", where + " tied '" + pname + "'")));
      }
    const int64_t group = int_field(e, "state", where, 0, INT64_MAX);
    Layer l;
    if (auto owner = state_owner.find(group); owner != state_owner.end() && kind != "Input") l = owner->second.reuse_with(spec.inputs, name);
    else l = nn::make_layer(kind, spec);
    if (l.name() != name || l.kind() != kind)
      bad(where, "was rebuilt by the factory of kind '" + kind + "' as " + l.kind() + " '" + l.name() +
                     "' (a factory must build its own kind, named LayerSpec::name)");
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

std::string graph_to_json(const Graph& graph) { return graph_json(graph).dump(2); }

nn::Options detail::module_options(const Graph& inner) {
  nn::Options o;
  nn::json_of(o)["graph"] = graph_json(inner);
  return o;
}

Graph detail::module_graph_from(const nn::Options& options) {
  if (!options.has("graph")) options.fail("lacks the field 'graph'");
  const json& g = nn::json_of(options).at("graph");
  if (!g.is_object()) options.fail("field 'graph' is " + nn::json_brief(g) + " (valid: a JSON object)");
  return graph_from(g);
}

Graph graph_from_json(const std::string& text) {
  std::string error;
  const std::optional<json> j = detail::parse_json(text, &error);
  if (!j) throw ValueError("graph_from_json: the text is not JSON Loom can read (" + error + ")");
  try {
    return graph_from(*j);
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
  NoGrad off;
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
