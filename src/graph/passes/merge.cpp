// Pass "merge" (CompileOptions::eliminate_common_subexpressions).
#include <algorithm>
#include <map>
#include <tuple>

#include "graph/plan_impl.h"

namespace loom {

using nn::Layer;

void merge_common_subexpressions(Compilation& c) {
  const std::vector<Layer>& nodes = c.nodes;
  const std::vector<std::vector<size_t>>& args = c.args;
  const size_t n = c.n;
  const std::vector<bool>& is_input = c.is_input;
  const std::vector<std::vector<Shape>>& declared = c.declared;
  std::vector<bool>& folded = c.folded;
  std::vector<size_t>& alias = c.alias;
  // common subexpressions: the same pure kind with the same State, options and inputs
  // computes the same value; later copies read the first.
  using Key = std::tuple<std::string, const nn::State*, size_t, std::vector<size_t>>;
  std::map<Key, std::vector<size_t>> seen;
  for (size_t k = 0; k < n; ++k) {
    if (is_input[k] || folded[k] || args[k].empty() || !nodes[k].impl()->pure()) continue;
    std::vector<size_t> in;
    for (size_t a : args[k]) in.push_back(alias[a]);
    auto& candidates = seen[Key{nodes[k].kind(), nodes[k].shared_state().get(), c.pick(k), in}];
    for (size_t j : candidates) {
      if (declared[j] != declared[k] || dtypes_of(nodes[j]) != dtypes_of(nodes[k]) || !nodes[j].impl()->same_options(*nodes[k].impl()))
        continue;
      alias[k] = j;
      c.note("merge  " + label(nodes[k]) + " -> " + label(nodes[j]) + " (same kind, options, state and inputs)");
      break;
    }
    if (alias[k] == k) candidates.push_back(k);
  }
}

}  // namespace loom
