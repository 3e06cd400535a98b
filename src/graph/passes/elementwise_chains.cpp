// Pass "elementwise chains" (CompileOptions::fuse_elementwise): Add / Subtract / Multiply of two
// operands and relu / sigmoid / tanh Activations in float32, each link read by nothing but the
// next, become one ChainStep at the chain's last step (the others ChainedStep), run as one pass
// over the operands (ops/fused_elementwise.h) in any mode: with gradients as one recorded node
// (differentiable_chain). The chain runs at its last step, so the frees of the others move there.
#include <algorithm>

#include "graph/plan_impl.h"

namespace loom {

using nn::Layer;

namespace {

using Op = detail::ElementwiseChain::Op;
using Links = std::vector<std::pair<size_t, Op>>;  // the chain's steps and their ops, in order

// The op step i computes, when it can be a link: a plain single-output float32 layer of a kind
// the chain runs, whose operands all have its compiled shape.
bool link_op(const Compilation& c, size_t i, Op& op) {
  const Compilation::Step& s = c.p.steps[i];
  const Layer& l = c.nodes[s.node];
  if (!s.is<LayerStep>() || l.dtype() != DType::Float32 || c.pick(s.node) != 0 || l.impl()->n_outputs() != 1) return false;
  // operands of another shape (a broadcast) would make every run take the op-by-op path
  const Shape& shape = c.p.shapes[s.node][0];
  for (size_t a : s.args) {
    const Shape& sa = c.p.shapes[a][0];
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
}

// The step reading slot k when it is read once and is no output, and that step can be a link.
size_t next_link(const Compilation& c, size_t k, Op& op) {
  if (c.readers[k] != 1 || c.is_out[k]) return SIZE_MAX;
  const auto& steps = c.p.steps;
  for (size_t i = c.step_of[k] + 1; i < steps.size(); ++i)
    if (std::find(steps[i].args.begin(), steps[i].args.end(), k) != steps[i].args.end()) return link_op(c, i, op) ? i : SIZE_MAX;
  return SIZE_MAX;
}

// The longest chain starting at step i (one link when none follows, none when i is no link).
Links links_from(const Compilation& c, size_t i) {
  Op op;
  if (!link_op(c, i, op)) return {};
  Links links{{i, op}};
  for (size_t j; (j = next_link(c, c.p.steps[links.back().first].node, op)) != SIZE_MAX;) links.push_back({j, op});
  return links;
}

// The chain the links compute, over its distinct operand slots (`inputs`); `text` names the links.
std::shared_ptr<detail::ElementwiseChain> chain_of(const Compilation& c, const Links& links, std::vector<size_t>& inputs,
                                                   std::string& text) {
  auto chain = std::make_shared<detail::ElementwiseChain>();
  auto input = [&](size_t slot) {
    const auto it = std::find(inputs.begin(), inputs.end(), slot);
    if (it != inputs.end()) return static_cast<int>(it - inputs.begin());
    inputs.push_back(slot);
    return static_cast<int>(inputs.size() - 1);
  };
  size_t acc = SIZE_MAX;  // the slot the chain's value stands for
  for (const auto& [k, o] : links) {
    const Compilation::Step& s = c.p.steps[k];
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
    text += (text.empty() ? "" : " -> ") + label(c.nodes[s.node]);
  }
  return chain;
}

// The links before the last become ChainedSteps and their frees move to the last, which reads
// the chain's inputs: a step in between that was an input's last reader (by position) must not
// free it before then either. Returns the last step's frees.
std::vector<size_t> chain_frees(Compilation& c, const Links& links, const std::vector<size_t>& inputs) {
  auto& steps = c.p.steps;
  std::vector<size_t> frees;
  for (size_t l = 0; l + 1 < links.size(); ++l) {
    Compilation::Step& s = steps[links[l].first];
    s.action = ChainedStep{};
    frees.insert(frees.end(), s.frees.begin(), s.frees.end());
    s.frees.clear();
  }
  for (size_t k = links.front().first + 1; k < links.back().first; ++k) {
    std::vector<size_t>& fr = steps[k].frees;
    for (auto it = fr.begin(); it != fr.end();)
      if (std::find(inputs.begin(), inputs.end(), *it) != inputs.end()) {
        frees.push_back(*it);
        it = fr.erase(it);
      } else {
        ++it;
      }
  }
  return frees;
}

}  // namespace

void fuse_elementwise_chains(Compilation& c) {
  for (size_t i = 0; i < c.p.steps.size(); ++i) {
    const Links links = links_from(c, i);
    if (links.size() < 2) continue;
    std::vector<size_t> inputs;
    std::string text;
    std::shared_ptr<const detail::ElementwiseChain> chain = chain_of(c, links, inputs, text);
    const std::vector<size_t> moved = chain_frees(c, links, inputs);
    Compilation::Step& last = c.p.steps[links.back().first];
    last.frees.insert(last.frees.end(), moved.begin(), moved.end());
    ChainStep step{chain, differentiable_chain(chain), std::move(inputs), {}};
    for (const auto& link : links) step.links.push_back(link.first);
    last.action = std::move(step);
    c.note("fuse   " + text + " (one elementwise pass; with gradients one node, its backward the links')");
  }
}

}  // namespace loom
