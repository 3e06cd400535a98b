#pragma once
// Fused recurrent-cell updates (docs/nn_ops.md "Recurrent cells"): one kernel forward and one
// backward instead of the dozen elementwise ops (and autograd nodes) of the composition.
#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

// One LSTM cell update. gates (batch, 4 * n) holds the pre-activations in PyTorch's order
// i, f, g, o (x w_ih + h w_hh + biases), c (batch, n) the previous cell state:
//   c2 = sigmoid(f) * c + sigmoid(i) * tanh(g),   h2 = sigmoid(o) * tanh(c2).
// Returns the next state packed as [h2, c2] (batch, 2 * n), the layout of nn::LSTMCell's state.
// Equal to that composition within float rounding; differentiable in gates and c. float32
// and float64 run fused kernels (any layout); float16 / bfloat16 run the composition.
LOOM_API Tensor lstm_cell(const Tensor& gates, const Tensor& c);

}  // namespace loom
