#pragma once
// Reverse-mode automatic differentiation over the graph that ops record while grad mode is on.
#include <functional>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/grad_mode.h"
#include "loom/core/node.h"
#include "loom/core/tensor.h"

namespace loom {

// Accumulates d(output)/d(leaf) into every leaf's .grad(). A non-scalar output needs a seed
// gradient of its shape. As in PyTorch, each node frees the tensors saved for its rule as soon
// as the pass has run it (activations do not outlive their use), so a second backward through
// the same nodes throws AutogradError; retain_graph keeps them for another pass. A pass that
// fails part-way leaves every .grad() unchanged, but the nodes it ran are freed.
LOOM_API void backward(const Tensor& output, const Tensor& seed = Tensor(), bool retain_graph = false);

// Gradients of `output` with respect to `inputs`, returned instead of accumulated; an input
// the output does not depend on gets zeros. Leaves' .grad() are untouched and the graph is
// kept (grad may be called on it again).
LOOM_API std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& seed = Tensor());

// Functional form: calls f on fresh differentiable copies of `inputs` and returns the
// gradients of its (scalar) result with respect to each.
LOOM_API std::vector<Tensor> grad(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                         const std::vector<Tensor>& inputs);

}  // namespace loom
