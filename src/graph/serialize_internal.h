#pragma once
// A Module's inner graph as its options ({"graph": <graph JSON>}) and back, with the nesting
// limit of graph_to_json / graph_from_json (src/graph/serialize.cpp).
#include "loom/graph/graph.h"
#include "loom/nn/options.h"

namespace loom::detail {

nn::Options module_options(const Graph& inner);
Graph module_graph_from(const nn::Options& options);

}  // namespace loom::detail
