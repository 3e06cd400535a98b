// Pass "fold" (CompileOptions::fold_constants).
#include <algorithm>

#include "graph/plan_impl.h"

namespace loom {

using nn::Layer;

void fold_constants(Compilation& c) {
  const std::vector<Layer>& nodes = c.nodes;
  const std::vector<std::vector<size_t>>& args = c.args;
  const size_t n = c.n;
  const std::vector<bool>& is_input = c.is_input;
  std::vector<bool>& constant = c.constant;
  std::vector<bool>& folded = c.folded;
  std::vector<std::vector<Tensor>>& const_value = c.const_value;
  // a pure, stateless node computed only from constants (Constant layers
  // whose value needs no gradient, or other such nodes) is evaluated here, once.
  for (size_t k = 0; k < n; ++k) {
    if (is_input[k]) continue;
    const Layer& l = nodes[k];
    if (args[k].empty()) {
      // a Constant: a pure source (an Input or a Param changes between runs)
      if (is_source(l) && l.impl()->pure() && state_free(l)) {
        Tensor v = l.impl()->compute({}, nn::Mode::Eval);
        if (!v.requires_grad()) constant[k] = true, const_value[k] = {v};
      }
      continue;
    }
    bool foldable = l.impl()->pure() && state_free(l);
    for (size_t a : args[k]) foldable = foldable && constant[a];
    if (!foldable) continue;
    std::vector<Tensor> in;
    for (size_t a : args[k]) in.push_back(const_value[a].at(std::min(c.pick(k), const_value[a].size() - 1)));
    const_value[k] = l.impl()->n_outputs() > 1 ? l.impl()->compute_outputs(in, nn::Mode::Eval)
                                               : std::vector<Tensor>{l.impl()->compute(in, nn::Mode::Eval)};
    constant[k] = true;
    folded[k] = true;
  }
}

}  // namespace loom
