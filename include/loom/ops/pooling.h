#pragma once
// 2-d pooling over (N, C, H, W) or (C, H, W) tensors, as torch.nn.functional. Windows that
// hang over the input are padded with -inf (max) or zeros (avg). Output size per axis:
// floor((in + 2 * padding - dilation * (k - 1) - 1) / stride) + 1 (ceil with ceil_mode,
// without starting a window in the right padding).
#include <optional>

#include "loom/core/api.h"
#include "loom/core/tensor.h"
#include "loom/ops/conv.h"  // IntList

namespace loom {

// The output extent of pooling along one axis (the rule above), shared by the ops and the
// pooling layers: 0 or less when no window fits. Exact for any int64 arguments (kernel, stride,
// dilation >= 1; padding >= 0), saturating at INT64_MAX.
LOOM_API int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding = 0, int64_t dilation = 1,
                         bool ceil_mode = false);

// stride defaults to kernel_size; padding must be at most half the kernel. The gradient goes
// to the position of each window's maximum (the first one on ties, as PyTorch).
LOOM_API Tensor max_pool2d(const Tensor& x, IntList kernel_size, IntList stride = {}, IntList padding = 0, IntList dilation = 1,
                  bool ceil_mode = false);
// Also returns the argmax of each window as int64 flat positions h * W + w in its input plane
// (PyTorch's return_indices=True); -1 for a window entirely in the padding (possible with
// dilation), which has no input element: its value is -inf and it passes no gradient.
LOOM_API std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntList kernel_size, IntList stride = {},
                                                  IntList padding = 0, IntList dilation = 1, bool ceil_mode = false);
// count_include_pad counts the zero padding in the divisor (PyTorch's default); a positive
// divisor_override replaces the divisor.
LOOM_API Tensor avg_pool2d(const Tensor& x, IntList kernel_size, IntList stride = {}, IntList padding = 0, bool ceil_mode = false,
                  bool count_include_pad = true, int64_t divisor_override = 0);
// Over the whole plane, keeping (N, C, 1, 1): adaptive_{avg,max}_pool2d(x, 1).
LOOM_API Tensor global_avg_pool2d(const Tensor& x);
LOOM_API Tensor global_max_pool2d(const Tensor& x);

}  // namespace loom
