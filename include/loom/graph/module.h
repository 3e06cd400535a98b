#pragma once
// Module: a subgraph made into one layer. Its state is the states of the layers inside, so
// reuse_with gives a module on new inputs sharing every inner weight. Sequential is a Module
// over layers applied in order.
#include <functional>
#include <vector>

#include "loom/core/api.h"
#include "loom/graph/graph.h"
#include "loom/nn/layer.h"

namespace loom::nn {

class LOOM_API Module : public Layer {
 public:
  // `inputs` are the layers the subgraph starts from (usually Inputs), `output` where it ends.
  Module(const std::vector<Layer>& inputs, const Layer& output, const std::string& name = "");
  // A module with several outputs: output(i) (or module[i]) is a layer reading output i. Used
  // directly as a layer, the module stands for its first output (its shape() is that one's).
  Module(const std::vector<Layer>& inputs, const std::vector<Layer>& outputs, const std::string& name = "");
  const Graph& graph() const;
  size_t n_outputs() const;
  Layer output(size_t i, const std::string& name = "") const;
  Layer operator[](size_t i) const { return output(i); }
};

// The inner graph of a layer of kind "Module" or "Sequential" (also one made by reuse_with);
// null otherwise.
LOOM_API const Graph* module_graph(const Layer& layer);
// What a ModuleOutput layer is besides its module, read by type (attributes_of): the index of the
// module's output it reads.
struct LOOM_API ModuleOutputAttributes {
  int64_t index = 0;
};
// A layer (kind "ModuleOutput") reading output i of `module`, a Module with several outputs or a
// reuse_with of one; ValueError naming the module otherwise or when i is out of range.
LOOM_API Layer module_output(const Layer& module, size_t i, const std::string& name = "");

// One step of a Sequential: a layer made without input (nn::Linear(128), a Sequential made without
// input), any layer (called: reuse_with), or a function from a layer to a layer.
using Step = std::function<Layer(const Layer&)>;

// Layers applied in order, as Keras' Sequential and TensorGraph's HiddenNode(layers=[...]): a
// Module (kind "Sequential") over the graph the steps make from an Input shaped as the input.
// Made without input, it is bound by its first call (Sequential seq({...}); Layer y = seq(x));
// later calls share every inner weight. Graph::summary() lists its inner layers.
class LOOM_API Sequential : public Layer {
 public:
  explicit Sequential(std::vector<Step> steps, const std::string& name = "");
  Sequential(const Layer& input, std::vector<Step> steps, const std::string& name = "");
};

}  // namespace loom::nn
