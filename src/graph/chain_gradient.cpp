// An elementwise chain with its gradient (ChainStep::differentiable, docs/compile.md): a CustomOp
// whose forward is the chain's one pass and whose backward recomputes the values between links
// that its rules read (they are never stored: the node saves the chain's inputs and output) and
// applies each link's gradient with the ops its own rule uses (src/ops/elementwise.cpp; relu's
// kernel through detail::relu_backward): the gradients are bit for bit those of the links run
// one by one where an input's contributions are summed in the same order (two always are).
#include <algorithm>

#include "graph/plan_impl.h"
#include "loom/ops/elementwise.h"

namespace loom {

namespace {

using Chain = detail::ElementwiseChain;
using Op = Chain::Op;

// One link on its input value `acc` and its other operand, as the link's layer computes it.
Tensor apply(const Chain::Step& s, const Tensor& acc, const Tensor& other) {
  const Tensor& a = s.acc_first ? acc : other;
  const Tensor& b = s.acc_first ? other : acc;
  switch (s.op) {
    case Op::Add: return add(a, b);
    case Op::Sub: return subtract(a, b);
    case Op::Mul: return multiply(a, b);
    case Op::Relu: return relu(acc);
    case Op::Sigmoid: return sigmoid(acc);
    case Op::Tanh: return tanh(acc);
  }
  return Tensor();
}

Tensor operand(const Chain::Step& s, const std::vector<Tensor>& in) {
  return s.operand >= 0 ? in[static_cast<size_t>(s.operand)] : Tensor();
}

// The chain's value before each link, acc[0] (its start) to acc[count], link by link.
std::vector<Tensor> link_values(const Chain& chain, const std::vector<Tensor>& in, size_t count) {
  std::vector<Tensor> acc{in[static_cast<size_t>(chain.start)]};
  for (size_t i = 0; i < count; ++i) acc.push_back(apply(chain.steps[i], acc.back(), operand(chain.steps[i], in)));
  return acc;
}

bool is_activation(Op op) { return op == Op::Relu || op == Op::Sigmoid || op == Op::Tanh; }

// The link's gradients for its input value x and its other operand, from its output's gradient
// g, each when needed: the expressions of add's, subtract's, multiply's, relu's, sigmoid's and
// tanh's own rules.
std::pair<Tensor, Tensor> link_gradient(const Chain::Step& s, const Tensor& g, const Tensor& x, const Tensor& other,
                                        const Tensor& out, bool x_needed, bool other_needed) {
  auto when = [](bool needed, auto f) { return needed ? f() : Tensor(); };
  switch (s.op) {
    case Op::Add: return {g, g};
    case Op::Sub:
      return {s.acc_first ? g : when(x_needed, [&] { return negative(g); }),
              s.acc_first ? when(other_needed, [&] { return negative(g); }) : g};
    case Op::Mul:
      return {when(x_needed, [&] { return multiply(g, other); }), when(other_needed, [&] { return multiply(g, x); })};
    case Op::Relu: return {when(x_needed, [&] { return detail::relu_backward(g, out); }), Tensor()};
    case Op::Sigmoid: return {when(x_needed, [&] { return multiply(g, multiply(out, 1.0 - out)); }), Tensor()};
    case Op::Tanh: return {when(x_needed, [&] { return multiply(g, 1.0 - square(out)); }), Tensor()};
  }
  return {};
}

// saved: the chain's inputs, then its output. Walks the links back from the output; where no
// input before a link needs a gradient (its input value records none), the walk ends. Only the
// values between links that a rule reads are recomputed (a Multiply's input value when its
// operand needs a gradient, an activation's output): relu(a * b + c) recomputes none.
std::vector<Tensor> chain_backward(const Chain& chain, const CustomGrad& grad) {
  const std::vector<bool>& needs = grad.needs_input_grad;
  const size_t n = needs.size(), m = chain.steps.size();
  const std::vector<Tensor> in(grad.saved.begin(), grad.saved.begin() + static_cast<std::ptrdiff_t>(n));
  auto other_needed = [&](const Chain::Step& s) { return s.operand >= 0 && needs[static_cast<size_t>(s.operand)]; };
  std::vector<bool> acc_needs{needs[static_cast<size_t>(chain.start)]};  // whether link i's input value needs one
  for (const Chain::Step& s : chain.steps) acc_needs.push_back(acc_needs.back() || other_needed(s));
  size_t read = 0;  // the last value between links that a rule reads
  for (size_t i = 0; i < m; ++i) {
    if (chain.steps[i].op == Op::Mul && other_needed(chain.steps[i])) read = std::max(read, i);
    if (is_activation(chain.steps[i].op) && acc_needs[i] && i + 1 < m) read = std::max(read, i + 1);
  }
  std::vector<Tensor> acc = link_values(chain, in, read);
  acc.resize(m);
  std::vector<Tensor> grads(n);
  auto accumulate = [&](int i, const Tensor& g) {
    Tensor& sum = grads[static_cast<size_t>(i)];
    sum = sum.defined() ? add(sum, g) : g;
  };
  Tensor g = grad.output_grads[0];
  for (size_t i = m; i-- > 0;) {
    const Chain::Step& s = chain.steps[i];
    const Tensor& out = i + 1 < m ? acc[i + 1] : grad.saved[n];
    auto [gx, go] = link_gradient(s, g, acc[i], operand(s, in), out, acc_needs[i], other_needed(s));
    if (other_needed(s)) accumulate(s.operand, go);
    if (!acc_needs[i]) return grads;
    g = std::move(gx);
  }
  accumulate(chain.start, g);
  return grads;
}

}  // namespace

std::shared_ptr<const CustomOp> differentiable_chain(std::shared_ptr<const detail::ElementwiseChain> chain) {
  return std::make_shared<const CustomOp>(CustomOp{
      "elementwise_chain",
      [chain](const std::vector<Tensor>& in, std::vector<Tensor>& saved) {
        Tensor y = detail::elementwise_chain(*chain, in);             // recording is off here: the one pass
        if (!y.defined()) y = link_values(*chain, in, chain->steps.size()).back();  // a backend without the kernel: link by link
        saved = in;
        saved.push_back(y);
        return std::vector<Tensor>{y};
      },
      [chain](const CustomGrad& grad) { return chain_backward(*chain, grad); }});
}

}  // namespace loom
