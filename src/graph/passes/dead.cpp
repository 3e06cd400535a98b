// Pass "dead" (CompileOptions::remove_dead_nodes; it runs either way: off, every node is live):
// what no output reaches is dropped, and the folded constants still read are kept in the plan.
#include <algorithm>

#include "graph/plan_impl.h"

namespace loom {

using nn::Layer;

void remove_dead_nodes(Compilation& c) {
  Compilation::Impl* const p = &c.p;
  const CompileOptions& opt = c.opt;
  const Graph& g = c.g;
  const std::vector<Layer>& nodes = c.nodes;
  const std::vector<std::vector<size_t>>& args = c.args;
  const size_t n = c.n;
  const auto& pos = c.pos;
  const std::vector<bool>& is_input = c.is_input;
  std::vector<bool>& folded = c.folded;
  std::vector<std::vector<Tensor>>& const_value = c.const_value;
  std::vector<size_t>& alias = c.alias;
  std::vector<bool>& live = c.live;
  // what no output reaches once folded nodes stop at their value and merged
  // nodes read their first copy. Graph inputs stay (they are the positional interface).
  for (const Layer& o : g.outputs()) p->output_pos.push_back(alias[pos.at(o.impl().get())]);
  live.assign(n, !opt.remove_dead_nodes);
  for (size_t k : p->output_pos) live[k] = true;
  for (size_t k = n; k-- > 0;) {
    if (!live[k] || alias[k] != k || folded[k]) continue;
    for (size_t a : args[k]) live[alias[a]] = true;
  }
  for (size_t k = 0; k < n; ++k) {
    if (is_input[k] || alias[k] != k) continue;
    if (!live[k]) {
      c.note("dead   " + label(nodes[k]) + " (no output reads it after the other passes)");
    } else if (folded[k]) {
      p->constants.emplace_back(k, const_value[k]);
      // a fold is reported once it is known to be read (here, after merging and dead nodes)
      c.note("fold   " + label(nodes[k]) + " " + shape_str(const_value[k][0].shape()) +
                 " computed once at compile time (it depends only on constants)",
             "fold");
    }
  }
}

}  // namespace loom
