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

}  // namespace loom::detail
