#pragma once
// A chain of elementwise ops run as one pass (internal, not public API; for the graph
// compiler's elementwise groups, docs/compile.md). See ElementwiseChain in ops/backend.h.
#include <vector>

#include "ops/backend.h"

namespace loom::detail {

// The chain's result when it can run fused: no gradient needed (grad mode off, or no input
// requires grad), every input defined, float32, contiguous, on one device whose backend has the
// kernel, and of one shape. Otherwise an undefined tensor: the caller runs the ops one by one.
Tensor elementwise_chain(const ElementwiseChain& chain, const std::vector<Tensor>& inputs);

// relu's gradient from its output y, g where y > 0 or is NaN and 0 elsewhere: the kernel of
// relu's own rule, for the chain's backward (graph/chain_gradient.cpp), which has no public op
// for it. g and y of one shape and dtype; nothing is recorded.
Tensor relu_backward(const Tensor& g, const Tensor& y);

}  // namespace loom::detail
