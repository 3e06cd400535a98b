#include "loom/graph/graph.h"

#include "loom/graph/module.h"
#include "graph/plan_internal.h"
#include "loom/nn/layers.h"

#include <algorithm>
#include <map>
#include <ostream>
#include <unordered_map>
#include <unordered_set>

namespace loom {

using nn::Layer;
using nn::LayerImpl;

namespace {
bool is_input_kind(const Layer& l) { return std::string(l.kind()) == "Input"; }
}  // namespace

Graph Graph::build(const std::vector<Layer>& output_handles, const std::vector<Layer>& input_handles) {
  return GraphAccess::build(output_handles, input_handles, true);
}

namespace {

using Given = std::unordered_set<const LayerImpl*>;

// The handles as their nodes (a layer made without input stands for the layer its first call
// built, Layer::node), each defined; `what` names them in the error.
std::vector<Layer> nodes_of(const std::vector<Layer>& handles, const char* what) {
  std::vector<Layer> out;
  for (const Layer& l : handles) {
    if (!l.defined()) throw ValueError(std::string("Graph::build: ") + what + " layer is undefined");
    out.push_back(l.node());
  }
  return out;
}

Given given_inputs(const std::vector<Layer>& inputs) {
  Given given;
  for (const Layer& l : inputs)
    if (!given.insert(l.impl().get()).second) throw ValueError("Graph::build: input '" + l.name() + "' is given twice");
  return given;
}

// The nodes the outputs reach, in depth-first post-order (stopping at the given inputs), each
// node's position, and the Input layers met that are not given.
struct Trace {
  std::vector<Layer> nodes;
  std::unordered_map<const LayerImpl*, size_t> pos;
  std::vector<Layer> free_inputs;
};

// Depth-first post-order from each output, on an explicit stack rather than the call stack: a
// chain of a million layers is as deep as the stack would need frames (issue 46). The stack is
// the current path, so a layer met again while on it closes a cycle.
Trace trace(const std::vector<Layer>& outputs, const Given& given, bool inputs_given) {
  Trace t;
  std::unordered_set<const LayerImpl*> on_path;
  struct Frame {
    Layer layer;
    size_t next = 0;  // the next input to visit
  };
  std::vector<Frame> path;
  // pushes `handle`'s node unless it is placed already; throws on a cycle
  auto enter = [&](const Layer& handle) {
    const Layer l = handle.node();
    const LayerImpl* key = l.impl().get();
    if (t.pos.count(key)) return;
    if (on_path.count(key)) {
      std::string cycle;
      bool in = false;
      for (const Frame& p : path) {
        if (p.layer.impl().get() == key) in = true;
        if (in) cycle += p.layer.name() + " -> ";
      }
      throw ValueError("Graph::build: the graph has a cycle: " + cycle + l.name());
    }
    on_path.insert(key);
    if (!given.count(key) && is_input_kind(l) && inputs_given) t.free_inputs.push_back(l);
    path.push_back({l, 0});
  };
  for (const Layer& o : outputs) {
    enter(o);
    while (!path.empty()) {
      Frame& f = path.back();
      const LayerImpl* key = f.layer.impl().get();
      if (!given.count(key) && f.next < f.layer.inputs().size()) {
        const Layer next = f.layer.inputs()[f.next++];  // a copy: enter() may reallocate `path`
        enter(next);
        continue;
      }
      on_path.erase(key);
      t.pos[key] = t.nodes.size();
      t.nodes.push_back(std::move(f.layer));
      path.pop_back();
    }
  }
  return t;
}

// Names identify layers in saved files, copy_state and layer(name).
void check_unique_names(const std::vector<Layer>& nodes) {
  std::unordered_map<std::string, const Layer*> by_name;
  for (const Layer& l : nodes) {
    auto [it, fresh] = by_name.emplace(l.name(), &l);
    if (!fresh)
      throw ValueError("Graph::build: two layers are named '" + l.name() + "' (of kinds " + it->second->kind() + " and " + l.kind() +
                       "); layer names must be unique in a graph: pass distinct names, or none for generated ones");
  }
}

// The graph's inputs: those given, each reaching an output, or else every Input layer met.
// An Input that is not a graph input must hold a value to be read at run time.
std::vector<Layer> graph_inputs(const Trace& t, const std::vector<Layer>& inputs, const std::vector<Layer>& outputs) {
  if (inputs.empty()) {
    std::vector<Layer> found;
    for (const Layer& l : t.nodes)
      if (is_input_kind(l)) found.push_back(l);
    return found;
  }
  for (const Layer& l : inputs)
    if (!t.pos.count(l.impl().get()))
      throw ValueError("Graph::build: input '" + l.name() + "' (" + l.kind() + ") reaches none of the outputs " + names_of(outputs));
  for (const Layer& l : t.free_inputs)
    if (!nn::Input(l.impl()).has_value())
      throw ValueError("Graph::build: the outputs depend on Input '" + l.name() + "', which is neither among the given inputs (" +
                       names_of(inputs) + ") nor holds a value");
  return inputs;
}

}  // namespace

Graph GraphAccess::build(const std::vector<Layer>& output_handles, const std::vector<Layer>& input_handles, bool unique_names) {
  if (output_handles.empty()) throw ValueError("Graph::build: no output layers given");
  const std::vector<Layer> outputs = nodes_of(output_handles, "an output");
  const std::vector<Layer> inputs = nodes_of(input_handles, "an input");
  const Given given = given_inputs(inputs);
  Trace t = trace(outputs, given, !inputs.empty());
  if (unique_names) check_unique_names(t.nodes);
  Graph g;
  g.outputs_ = outputs;
  g.inputs_ = graph_inputs(t, inputs, outputs);
  g.args_.resize(t.nodes.size());
  for (size_t k = 0; k < t.nodes.size(); ++k) {
    if (given.count(t.nodes[k].impl().get())) continue;
    for (const Layer& i : t.nodes[k].inputs()) g.args_[k].push_back(t.pos.at(i.node().impl().get()));
  }
  g.nodes_ = std::move(t.nodes);
  return g;
}

std::vector<std::pair<size_t, size_t>> Graph::edges() const {
  std::vector<std::pair<size_t, size_t>> e;
  for (size_t k = 0; k < args_.size(); ++k)
    for (size_t a : args_[k]) e.emplace_back(a, k);
  return e;
}

const Layer& Graph::layer(const std::string& name) const {
  for (const Layer& l : nodes_)
    if (l.name() == name) return l;
  std::string names;
  for (const Layer& l : nodes_) names += (names.empty() ? "'" : ", '") + l.name() + "'";
  throw ValueError("Graph::layer: no layer is named '" + name + "' (the graph's layers: " + names + ")");
}

std::vector<Tensor> Graph::parameters() const {
  std::vector<Tensor> out;
  std::unordered_set<const TensorImpl*> seen;
  for (const Layer& l : nodes_)
    for (const Tensor& p : l.parameters())
      if (seen.insert(p.impl().get()).second) out.push_back(p);
  return out;
}

std::string Graph::summary() const {
  std::vector<std::vector<std::string>> rows{{"Layer", "Kind", "Output shape", "Params", "Shares state with"}};
  std::unordered_map<const nn::State*, std::string> owner;
  std::unordered_set<const TensorImpl*> seen;
  int64_t total = 0, trainable = 0;
  auto count = [](const Layer& l) {
    int64_t n = 0;
    for (const Tensor& p : l.parameters()) n += p.numel();
    return n;
  };
  // a module's layers follow its row, indented (once per module state; they count in its row)
  auto inner_rows = [&](auto&& self, const Graph& inner, const std::string& indent) -> void {
    for (const Layer& l : inner.nodes()) {
      if (std::find(inner.inputs().begin(), inner.inputs().end(), l) != inner.inputs().end()) continue;
      rows.push_back({indent + l.name(), l.kind(), shape_str(l.shape()), std::to_string(count(l)), ""});
      if (const Graph* g = nn::module_graph(l)) self(self, *g, indent + "  ");
    }
  };
  for (const Layer& l : nodes_) {
    for (const Tensor& p : l.parameters()) {
      if (!seen.insert(p.impl().get()).second) continue;
      total += p.numel();
      if (p.requires_grad()) trainable += p.numel();
    }
    auto [it, first] = owner.emplace(l.shared_state().get(), l.name());
    std::string shape = shape_str(l.shape());
    const Graph* inner = nn::module_graph(l);
    if (inner && inner->outputs().size() > 1) {
      shape.clear();
      for (const Layer& o : inner->outputs()) shape += (shape.empty() ? "" : ", ") + shape_str(o.shape());
    }
    rows.push_back({l.name(), l.kind(), shape, std::to_string(count(l)), first ? "" : it->second});
    if (inner && first) inner_rows(inner_rows, *inner, "  ");
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  size_t line = 0;
  for (size_t w : width) line += w + 2;
  line -= 2;
  auto format = [&](const std::vector<std::string>& r) {
    std::string out;
    for (size_t c = 0; c < r.size(); ++c) {
      const bool right = c == 3;  // counts align right
      const std::string pad(width[c] - r[c].size(), ' ');
      out += right ? pad + r[c] : r[c] + (c + 1 < r.size() ? pad : "");
      if (c + 1 < r.size()) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string text = format(rows[0]) + std::string(line, '=') + "\n";
  for (size_t k = 1; k < rows.size(); ++k) text += format(rows[k]);
  text += std::string(line, '=') + "\n";
  text += "Total params: " + std::to_string(total) + "\n";
  text += "Trainable params: " + std::to_string(trainable) + "\n";
  text += "Non-trainable params: " + std::to_string(total - trainable) + "\n";
  return text;
}

std::ostream& operator<<(std::ostream& os, const Graph& graph) { return os << graph.summary(); }

std::function<std::vector<Tensor>(const std::vector<Tensor>&)> Graph::as_function() const {
  auto plan = std::make_shared<Plan>(*this);
  return [plan](const std::vector<Tensor>& xs) { return plan->run(xs); };
}

Plan Graph::compile() const { return Plan(*this); }
Plan Graph::compile(const std::vector<Shape>& input_shapes) const { return Plan(*this, CompileOptions{input_shapes}); }
Plan Graph::compile(const CompileOptions& options) const { return Plan(*this, options); }

std::string Graph::to_dot() const {
  static const char* colours[] = {"lightblue", "lightpink", "palegreen", "khaki", "plum", "lightsalmon", "lightcyan"};
  std::map<const nn::State*, std::vector<size_t>> by_state;
  for (size_t k = 0; k < nodes_.size(); ++k) by_state[nodes_[k].shared_state().get()].push_back(k);
  std::unordered_map<size_t, std::string> colour;
  size_t c = 0;
  std::string dot = "digraph loom {\n  rankdir=BT;\n  node [shape=box, style=\"rounded,filled\", fillcolor=white];\n";
  std::string shared_edges;
  for (const auto& [state, ks] : by_state) {
    if (ks.size() < 2 || state->params().empty()) continue;
    for (size_t k : ks) colour[k] = colours[c % 7];
    for (size_t j = 1; j < ks.size(); ++j)
      shared_edges += "  n" + std::to_string(ks[0]) + " -> n" + std::to_string(ks[j]) +
                      " [style=dashed, dir=none, label=\"shared\", constraint=false];\n";
    ++c;
  }
  for (size_t k = 0; k < nodes_.size(); ++k) {
    const Layer& l = nodes_[k];
    dot += "  n" + std::to_string(k) + " [label=\"" + l.kind() + "\\n" + l.name() + "\\n" + shape_str(l.shape()) + "\"";
    if (colour.count(k)) dot += ", fillcolor=" + colour[k];
    dot += "];\n";
  }
  for (auto [a, b] : edges()) dot += "  n" + std::to_string(a) + " -> n" + std::to_string(b) + ";\n";
  return dot + shared_edges + "}\n";
}

}  // namespace loom
