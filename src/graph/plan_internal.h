#pragma once
// The graph part's access to Graph internals: tracing without the unique-name rule (for
// Layer::operator()(), which never needed names) and the node argument lists the compiler reads.
#include <string>
#include <vector>

#include "loom/graph/graph.h"

namespace loom {

struct GraphAccess {
  // Graph::build; unique_names = false skips the rule that layer names are unique.
  static Graph build(const std::vector<nn::Layer>& outputs, const std::vector<nn::Layer>& inputs, bool unique_names);
  static const std::vector<std::vector<size_t>>& args(const Graph& g) { return g.args_; }
  // Replaces the handle of the graph's one output node by a non-owning one (see eval.cpp).
  static void unown_output(Graph& g);
};

// "'a', 'b'": the layers' names, as messages list them.
std::string names_of(const std::vector<nn::Layer>& layers);

}  // namespace loom
