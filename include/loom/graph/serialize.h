#pragma once
// A graph's architecture as JSON: layer kinds, names, options, edges, and which layers share
// state. graph_from_json rebuilds a working graph from that text alone (fresh parameters;
// copy_state moves trained values across).
#include <string>

#include "loom/core/api.h"
#include "loom/graph/graph.h"

namespace loom {

LOOM_API std::string graph_to_json(const Graph& graph);
// Throws ValueError naming the layer and field when the text is not a valid Loom graph.
LOOM_API Graph graph_from_json(const std::string& json);
// Copies every parameter and buffer value of `from` into the layer of the same name in `to`.
LOOM_API void copy_state(const Graph& from, const Graph& to);

}  // namespace loom
