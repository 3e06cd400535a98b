// Pass "elementwise chains" (CompileOptions::fuse_elementwise).
#include <algorithm>

#include "graph/plan_impl.h"

namespace loom {

using nn::Layer;

void fuse_elementwise_chains(Compilation& c) {
  Compilation::Impl* const p = &c.p;
  const std::vector<Layer>& nodes = c.nodes;
  const std::vector<size_t>& readers = c.readers;
  const std::vector<size_t>& step_of = c.step_of;
  const std::vector<bool>& is_out = c.is_out;
  // elementwise chains (any mode): Add / Subtract / Multiply of two operands and relu /
  // sigmoid / tanh Activations in float32, each link read by nothing but the next, run as one
  // pass over the operands when no gradient is needed (ops/fused_elementwise.h), and one op at
  // a time otherwise. The chain runs at its last step, so the frees of the others move there.
  using Op = detail::ElementwiseChain::Op;
  auto op_of = [&](size_t i, Op& op) {
    const Compilation::Step& s = p->steps[i];
    const Layer& l = nodes[s.node];
    if (s.fused_away || s.fused_out != SIZE_MAX || s.chain || s.chained_away || l.dtype() != DType::Float32 ||
        c.pick(s.node) != 0 || l.impl()->n_outputs() != 1)
      return false;
    // operands of another shape (a broadcast) would make every run take the op-by-op path
    const Shape& shape = p->shapes[s.node][0];
    for (size_t a : s.args) {
      const Shape& sa = p->shapes[a][0];
      if (sa.size() != shape.size()) return false;
      for (size_t d = 0; d < sa.size(); ++d)
        if (sa[d] >= 0 && shape[d] >= 0 && sa[d] != shape[d]) return false;
    }
    if (s.args.size() == 2 && is_merge(l, nn::MergeMode::Sum)) return op = Op::Add, true;
    if (s.args.size() == 2 && is_merge(l, nn::MergeMode::Subtract)) return op = Op::Sub, true;
    if (s.args.size() == 2 && is_merge(l, nn::MergeMode::Multiply)) return op = Op::Mul, true;
    if (s.args.size() != 1) return false;
    if (is_activation(l, nn::relu)) return op = Op::Relu, true;
    if (is_activation(l, nn::sigmoid)) return op = Op::Sigmoid, true;
    if (is_activation(l, nn::tanh)) return op = Op::Tanh, true;
    return false;
  };
  // the step reading slot k when it is read once, is no output, and that step can join a chain
  auto next_link = [&](size_t k, Op& op) -> size_t {
    if (readers[k] != 1 || is_out[k]) return SIZE_MAX;
    for (size_t i = step_of[k] + 1; i < p->steps.size(); ++i)
      if (std::find(p->steps[i].args.begin(), p->steps[i].args.end(), k) != p->steps[i].args.end())
        return op_of(i, op) ? i : SIZE_MAX;
    return SIZE_MAX;
  };
  for (size_t i = 0; i < p->steps.size(); ++i) {
    Op op;
    if (!op_of(i, op)) continue;
    std::vector<std::pair<size_t, Op>> links{{i, op}};
    for (size_t j; (j = next_link(p->steps[links.back().first].node, op)) != SIZE_MAX;) links.push_back({j, op});
    if (links.size() < 2) continue;
    auto chain = std::make_shared<detail::ElementwiseChain>();
    std::vector<size_t> inputs;
    auto input = [&](size_t slot) {
      const auto it = std::find(inputs.begin(), inputs.end(), slot);
      if (it != inputs.end()) return static_cast<int>(it - inputs.begin());
      inputs.push_back(slot);
      return static_cast<int>(inputs.size() - 1);
    };
    std::string text;
    size_t acc = SIZE_MAX;  // the slot the chain's value stands for
    for (const auto& [k, o] : links) {
      const Compilation::Step& s = p->steps[k];
      detail::ElementwiseChain::Step st{o};
      if (acc == SIZE_MAX) {
        chain->start = input(s.args[0]);
        if (s.args.size() == 2) st.operand = input(s.args[1]);
      } else if (s.args.size() == 2) {
        st.acc_first = s.args[0] == acc;
        st.operand = input(st.acc_first ? s.args[1] : s.args[0]);
      }
      chain->steps.push_back(st);
      acc = s.node;
      text += (text.empty() ? "" : " -> ") + label(nodes[s.node]);
    }
    Compilation::Step& last = p->steps[links.back().first];
    for (size_t l = 0; l + 1 < links.size(); ++l) {
      Compilation::Step& s = p->steps[links[l].first];
      s.chained_away = true;
      last.frees.insert(last.frees.end(), s.frees.begin(), s.frees.end());
      s.frees.clear();
      last.chain_steps.push_back(links[l].first);
    }
    last.chain_steps.push_back(links.back().first);
    // the chain reads its inputs at its last step: a step in between that was an input's last
    // reader (by position) must not free it before then
    for (size_t k = links.front().first + 1; k < links.back().first; ++k) {
      std::vector<size_t>& fr = p->steps[k].frees;
      for (auto it = fr.begin(); it != fr.end();)
        if (std::find(inputs.begin(), inputs.end(), *it) != inputs.end()) {
          last.frees.push_back(*it);
          it = fr.erase(it);
        } else {
          ++it;
        }
    }
    last.chain = std::move(chain);
    last.chain_inputs = std::move(inputs);
    c.note("fuse   " + text + " (one elementwise pass when no gradient is needed)");
  }
}

}  // namespace loom
