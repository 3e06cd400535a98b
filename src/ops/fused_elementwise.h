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

}  // namespace loom::detail
