#include "ops/fused_elementwise.h"

#include "ops/internal.h"

namespace loom::detail {

// The kernel's slot, declared beside its op (src/ops/backend.h, KernelSlot), filled by
// src/ops/cpu/elementwise_chain.cpp: out = the chain over inputs (all float32, contiguous, of
// out's shape) in one pass: each block of elements goes through every step while it is in
// cache. Unfilled (if_filled): no fused kernel (the op returns an undefined tensor).
static constinit const KernelSlot<void(const Tensor& out, const ElementwiseChain& chain,
                                       const std::vector<Tensor>& inputs)>
    kElementwiseChain{"fused.elementwise_chain"};

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
  const auto kernel = kElementwiseChain.if_filled(first.device());
  if (!kernel) return Tensor();
  Tensor out = alloc(first.shape(), DType::Float32, first.device(), "elementwise_chain");
  if (out.numel() > 0) kernel(out, chain, inputs);
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
