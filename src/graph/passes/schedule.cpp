// Pass "schedule": the surviving nodes as steps in graph order, each slot freed after its last reader.
#include <algorithm>

#include "graph/plan_impl.h"

namespace loom {

using nn::Layer;

void schedule_steps(Compilation& c) {
  Compilation::Impl* const p = &c.p;
  const std::vector<Layer>& nodes = c.nodes;
  const std::vector<std::vector<size_t>>& args = c.args;
  const size_t n = c.n;
  const std::vector<bool>& is_input = c.is_input;
  std::vector<bool>& folded = c.folded;
  std::vector<size_t>& alias = c.alias;
  std::vector<bool>& live = c.live;
  // steps and liveness: each slot is released after its last reader (outputs and folded
  // constants are kept)
  std::vector<size_t> last(n, SIZE_MAX);
  for (size_t k = 0; k < n; ++k) {
    if (is_input[k] || alias[k] != k || !live[k] || folded[k]) continue;
    Compilation::Step s;
    s.node = k;
    for (size_t a : args[k]) s.args.push_back(alias[a]);
    for (size_t a : s.args) last[a] = p->steps.size();
    if (nodes[k].impl()->n_outputs() > 1) s.action = MultiOutputStep{}, p->has_multi = true;
    p->steps.push_back(std::move(s));
  }
  std::vector<bool> kept(n, false);
  for (size_t k : p->output_pos) kept[k] = true;
  for (const auto& folded_node : p->constants) kept[folded_node.first] = true;
  for (size_t k = 0; k < n; ++k)
    if (last[k] != SIZE_MAX && !kept[k]) p->steps[last[k]].frees.push_back(k);

  // who reads each slot, and each node's step, for the two fusion passes (which change neither)
  c.readers.assign(n, 0);
  c.step_of.assign(n, SIZE_MAX);
  c.is_out.assign(n, false);
  for (size_t k : p->output_pos) c.is_out[k] = true;
  for (size_t i = 0; i < p->steps.size(); ++i) {
    c.step_of[p->steps[i].node] = i;
    for (size_t a : p->steps[i].args) ++c.readers[a];
  }
  c.note("schedule " + std::to_string(p->steps.size()) + " step(s) in graph order, each value freed after its last reader");
}

}  // namespace loom
