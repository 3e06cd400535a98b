#pragma once
// Ops defined outside the op library: a forward function of tensors and a backward function
// from the outputs' gradients to the inputs' gradients, recorded on the autograd tape as a
// built-in op is (the idea of PyTorch's autograd.Function and MLX's custom_vjp).
//
//   const CustomOp cube{"cube",
//       [](const std::vector<Tensor>& in, std::vector<Tensor>& saved) {
//         saved.push_back(in[0]);
//         return std::vector<Tensor>{in[0] * in[0] * in[0]};
//       },
//       [](const CustomGrad& g) {
//         const Tensor& x = g.saved[0];
//         return std::vector<Tensor>{g.output_grads[0] * 3.0 * x * x};
//       }};
//   Tensor y = cube({x})[0];
//
// - The forward runs with recording off (NoGrad): the ops inside it are not recorded, the op is
//   recorded once, as one node, when recording is on and some input requires grad. Under NoGrad,
//   or with no input requiring grad, it is the forward alone.
// - Inputs may be undefined (an absent optional operand): they get no gradient.
// - The backward receives one gradient per output, of the output's shape and dtype (zeros for
//   an output that no gradient reached), the tensors the forward saved, and which inputs need a
//   gradient; it returns one tensor per input: the gradient, of the input's shape, or an
//   undefined Tensor (zero) for an input that needs none. Gradients for inputs that do not
//   require grad are dropped. A wrong count, shape or a non-floating dtype is an Error naming
//   the op. Gradients are converted to the inputs' dtypes.
// - Saved tensors are checked as a built-in op's are: an in-place write to one between forward
//   and backward makes backward throw AutogradError naming the op. backward() frees them after
//   running the node, unless the graph is retained.
// - Several outputs: each floating output carries history; non-floating outputs (indices,
//   masks) are returned without. The backward runs once for all of them.
// - The backward runs with recording off (no higher-order gradients, as the built-in ops).
#include <functional>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

// What a custom op's backward receives.
struct LOOM_API CustomGrad {
  std::vector<Tensor> output_grads;   // one per output (zeros where none reached it; undefined for non-floating outputs)
  std::vector<Tensor> saved;          // what the forward appended to `saved`, in order
  std::vector<bool> needs_input_grad;  // per input: defined and requiring grad
};

// forward(inputs, saved): the outputs (at least one); appends what backward needs to `saved`.
using CustomForward = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs, std::vector<Tensor>& saved)>;
// backward(grad): one gradient per input (undefined: none / zero).
using CustomBackward = std::function<std::vector<Tensor>(const CustomGrad& grad)>;

// An op defined by its forward and its gradient; `name` names it in errors and in the graph.
struct LOOM_API CustomOp {
  std::string name;
  CustomForward forward;
  CustomBackward backward;

  // Runs the forward on `inputs` and, when recording is on and an input requires grad, records
  // the backward for the outputs.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
};

}  // namespace loom
