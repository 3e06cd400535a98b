#include "ops/fused_elementwise.h"

#include "ops/internal.h"

namespace loom::detail {

Tensor elementwise_chain(const ElementwiseChain& chain, const std::vector<Tensor>& inputs) {
  if (chain.steps.empty() || chain.start < 0 || static_cast<size_t>(chain.start) >= inputs.size()) return Tensor();
  for (const ElementwiseChain::Step& s : chain.steps)
    if (s.operand >= static_cast<int>(inputs.size())) return Tensor();
  const Tensor& first = inputs[static_cast<size_t>(chain.start)];
  for (const Tensor& x : inputs)
    if (!x.defined() || x.dtype() != DType::Float32 || !x.is_contiguous() || x.device() != first.device() ||
        x.shape() != first.shape())
      return Tensor();
  if (needs_grad(inputs)) return Tensor();
  const Backend& b = backend(first.device());
  if (!b.elementwise_chain) return Tensor();
  Tensor out = alloc(first.shape(), DType::Float32, first.device(), "elementwise_chain");
  if (out.numel() > 0) b.elementwise_chain(out, chain, inputs);
  return out;
}

Tensor relu_backward(const Tensor& g, const Tensor& y) {
  check_defined(g, "relu_backward");
  check_defined(y, "relu_backward");
  check_same_device(g, y, "relu_backward");
  if (g.shape() != y.shape() || g.dtype() != y.dtype() || kernel_dtype(y.dtype()) != y.dtype())
    throw ShapeError("relu_backward: the gradient (" + describe_operands({&g, &y}) +
                     ") and relu's output must have one shape and a kernel dtype");
  Tensor out = alloc(y.shape(), y.dtype(), y.device(), "relu_backward");
  backend(y.device()).binary(BinaryOp::ReluGrad, out, g, y);
  return out;
}

}  // namespace loom::detail
