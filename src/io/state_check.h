#pragma once
// Private to io: load_graph_state's checks as data, so that loaders built on it (the PyTorch
// weights of torch_weights.cpp) can report every problem at once in their own terms.
#include <string>
#include <utility>
#include <vector>

#include "loom/graph/graph.h"
#include "loom/io/safetensors.h"

namespace loom::io::detail {

// One problem with one parameter or buffer of the graph, in graph order.
struct StateIssue {
  enum class Kind { Doubly, Undefined, Shape, DType };
  Kind kind;
  std::vector<std::string> keys;  // the given key(s) that name it (several for Doubly)
  std::string detail;             // "has shape (2, 3) but the graph expects (3, 2)", ...
};

struct StateCheck {
  std::vector<StateIssue> issues;
  std::vector<std::string> missing;     // the graph's keys no given tensor names
  std::vector<std::string> unexpected;  // given keys the graph does not have
  // every parameter and buffer paired with its value in the given map (null where missing)
  std::vector<std::pair<Tensor, const Tensor*>> pairs;
  bool ok() const { return issues.empty() && missing.empty() && unexpected.empty(); }
};

// Every check of load_graph_state, collected (throws nothing for a mismatch).
StateCheck check_state(const Graph& graph, const TensorMap& tensors);

}  // namespace loom::io::detail
