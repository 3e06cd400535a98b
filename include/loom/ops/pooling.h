#pragma once
// 2-d pooling over (N, C, H, W) or (C, H, W) tensors, as torch.nn.functional. Windows that
// hang over the input are padded with -inf (max) or zeros (avg). Output size per axis:
// floor((in + 2 * padding - dilation * (k - 1) - 1) / stride) + 1 (ceil with ceil_mode,
// without starting a window in the right padding).
#include <optional>

#include "loom/core/tensor.h"
#include "loom/ops/conv.h"  // IntList

namespace loom {

// stride defaults to kernel_size; padding must be at most half the kernel. The gradient goes
// to the position of each window's maximum (the first one on ties, as PyTorch).
Tensor max_pool2d(const Tensor& x, IntList kernel_size, IntList stride = {}, IntList padding = 0, IntList dilation = 1,
                  bool ceil_mode = false);
// Also returns the argmax of each window as int64 flat positions h * W + w in its input plane
// (PyTorch's return_indices=True); -1 for a window entirely in the padding (possible with
// dilation), which has no input element: its value is -inf and it passes no gradient.
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntList kernel_size, IntList stride = {},
                                                  IntList padding = 0, IntList dilation = 1, bool ceil_mode = false);
// count_include_pad counts the zero padding in the divisor (PyTorch's default); a positive
// divisor_override replaces the divisor.
Tensor avg_pool2d(const Tensor& x, IntList kernel_size, IntList stride = {}, IntList padding = 0, bool ceil_mode = false,
                  bool count_include_pad = true, int64_t divisor_override = 0);
// Over the whole plane, keeping (N, C, 1, 1): adaptive_{avg,max}_pool2d(x, 1).
Tensor global_avg_pool2d(const Tensor& x);
Tensor global_max_pool2d(const Tensor& x);

}  // namespace loom
