#pragma once
// Graph::build traces a layer graph back from its outputs, orders it by dependency and
// validates it; as_function() and compile() turn it into a callable plan.
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "loom/nn/layer.h"

namespace loom {

class Plan;

class Graph {
 public:
  // Traces from `outputs` back through each layer's inputs, stopping at the layers in
  // `inputs` (which need not be Input layers: that selects the path between chosen start and
  // end layers). With no `inputs`, every Input reached is an input. Throws ValueError naming the
  // layers for: a cycle; an output that depends on an Input neither given nor holding a value;
  // a given input that reaches no output; two layers with one name (names identify layers in
  // saved files and in layer(name)).
  static Graph build(const std::vector<nn::Layer>& outputs, const std::vector<nn::Layer>& inputs = {});

  const std::vector<nn::Layer>& nodes() const { return nodes_; }  // dependency order
  const std::vector<nn::Layer>& inputs() const { return inputs_; }
  const std::vector<nn::Layer>& outputs() const { return outputs_; }
  // Edges as (from, to) node positions.
  std::vector<std::pair<size_t, size_t>> edges() const;
  // The layer named `name`; ValueError listing the graph's layer names when there is none.
  const nn::Layer& layer(const std::string& name) const;
  // Every trainable tensor of the graph's layers (inner Module layers included), each once,
  // in node order: what an optimizer trains.
  std::vector<Tensor> parameters() const;
  // A Keras-like table: one row per layer (name, kind, output shape, parameter count, the
  // layer it shares state with), then the total and trainable parameter counts. Shared
  // parameters count once.
  std::string summary() const;

  // A function of the input tensors (positionally, as `inputs`) returning the outputs. It runs
  // the ordered plan without re-tracing and frees each intermediate after its last consumer.
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> as_function() const;
  // The static plan (today the same ordered plan as as_function; the optimizing compiler will
  // replace its internals without changing this interface).
  Plan compile() const;

  // Graphviz DOT text: one node per layer with kind, name and shape; layers that share state
  // are drawn in the same colour and joined by a dashed "shared" edge.
  std::string to_dot() const;

 private:
  std::vector<nn::Layer> nodes_, inputs_, outputs_;
  std::vector<std::vector<size_t>> args_;  // per node: positions of its inputs in nodes_
  friend class Plan;
};

// The summary() table.
std::ostream& operator<<(std::ostream& os, const Graph& graph);

class Plan {
 public:
  explicit Plan(Graph graph);
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
  // Single-output convenience: fn(x), fn(x1, x2).
  template <typename... Ts>
  Tensor operator()(const Ts&... xs) const {
    return single(run(std::vector<Tensor>{xs...}));
  }
  const Graph& graph() const { return *graph_; }

 private:
  static Tensor single(std::vector<Tensor> outs);
  std::shared_ptr<const Graph> graph_;
  std::vector<size_t> last_use_;  // per node: the last node position that reads it
  std::vector<bool> is_output_;
  std::vector<size_t> input_pos_, output_pos_;  // node positions of the inputs and outputs
};

}  // namespace loom
