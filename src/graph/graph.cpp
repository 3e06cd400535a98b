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

Graph GraphAccess::build(const std::vector<Layer>& output_handles, const std::vector<Layer>& input_handles, bool unique_names) {
  if (output_handles.empty()) throw ValueError("Graph::build: no output layers given");
  for (const Layer& l : output_handles)
    if (!l.defined()) throw ValueError("Graph::build: an output layer is undefined");
  for (const Layer& l : input_handles)
    if (!l.defined()) throw ValueError("Graph::build: an input layer is undefined");
  // a layer made without input stands for the layer its first call built (Layer::node)
  std::vector<Layer> outputs, inputs;
  for (const Layer& l : output_handles) outputs.push_back(l.node());
  for (const Layer& l : input_handles) inputs.push_back(l.node());
  Graph g;
  g.outputs_ = outputs;
  std::unordered_set<const LayerImpl*> given;
  for (const Layer& l : inputs) {
    if (!given.insert(l.impl().get()).second) throw ValueError("Graph::build: input '" + l.name() + "' is given twice");
  }
  // depth-first post-order from each output, on an explicit stack rather than the call stack:
  // a chain of a million layers is as deep as the stack would need frames (issue 46). The
  // stack is the current path, so a layer met again while on it closes a cycle.
  std::unordered_map<const LayerImpl*, size_t> pos;
  std::unordered_set<const LayerImpl*> on_path;
  struct Frame {
    Layer layer;
    size_t next = 0;  // the next input to visit
  };
  std::vector<Frame> path;
  std::vector<Layer> free_inputs;
  // pushes `handle`'s node unless it is placed already; throws on a cycle
  auto enter = [&](const Layer& handle) {
    const Layer l = handle.node();
    const LayerImpl* key = l.impl().get();
    if (pos.count(key)) return;
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
    if (!given.count(key) && is_input_kind(l) && !inputs.empty()) free_inputs.push_back(l);
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
      pos[key] = g.nodes_.size();
      g.nodes_.push_back(std::move(f.layer));
      path.pop_back();
    }
  }
  // names identify layers in saved files, copy_state and layer(name)
  std::unordered_map<std::string, const Layer*> by_name;
  for (const Layer& l : g.nodes_) {
    if (!unique_names) break;
    auto [it, fresh] = by_name.emplace(l.name(), &l);
    if (!fresh)
      throw ValueError("Graph::build: two layers are named '" + l.name() + "' (of kinds " + it->second->kind() + " and " + l.kind() +
                       "); layer names must be unique in a graph: pass distinct names, or none for generated ones");
  }

  if (inputs.empty()) {
    for (const Layer& l : g.nodes_)
      if (is_input_kind(l)) g.inputs_.push_back(l);
  } else {
    for (const Layer& l : inputs) {
      if (!pos.count(l.impl().get())) {
        std::string outs;
        for (const Layer& o : outputs) outs += (outs.empty() ? "'" : ", '") + o.name() + "'";
        throw ValueError("Graph::build: input '" + l.name() + "' (" + l.kind() + ") reaches none of the outputs " + outs);
      }
      g.inputs_.push_back(l);
    }
    // an Input that is not a graph input must hold a value to be read at run time
    for (const Layer& l : free_inputs) {
      nn::Input in(l.impl());
      if (!in.has_value()) {
        std::string names;
        for (const Layer& i : inputs) names += (names.empty() ? "'" : ", '") + i.name() + "'";
        throw ValueError("Graph::build: the outputs depend on Input '" + l.name() +
                         "', which is neither among the given inputs (" + names + ") nor holds a value");
      }
    }
  }
  g.args_.resize(g.nodes_.size());
  for (size_t k = 0; k < g.nodes_.size(); ++k) {
    if (given.count(g.nodes_[k].impl().get())) continue;
    for (const Layer& i : g.nodes_[k].inputs()) g.args_[k].push_back(pos.at(i.node().impl().get()));
  }
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
