#pragma once
// Module: a subgraph made into one layer. Its state is the states of the layers inside, so
// reuse_with gives a module on new inputs sharing every inner weight.
#include <vector>

#include "loom/graph/graph.h"
#include "loom/nn/layer.h"

namespace loom::nn {

class Module : public Layer {
 public:
  // `inputs` are the layers the subgraph starts from (usually Inputs), `output` where it ends.
  Module(const std::vector<Layer>& inputs, const Layer& output, const std::string& name = "");
  const Graph& graph() const;
};

// The inner graph of a layer of kind "Module" (also one made by reuse_with); null otherwise.
const Graph* module_graph(const Layer& layer);

}  // namespace loom::nn
