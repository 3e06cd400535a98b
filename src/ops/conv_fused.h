#pragma once
// A convolution with its inference epilogue fused in (internal, not public API; for the graph
// compiler): relu(batch_norm_eval(conv2d(x, w) + bias) + residual), each part optional as
// FusedConv says. Without gradients (grad mode off, or nothing requires grad) and in float32
// it runs as one oneDNN primitive: batch norm folded into the weights and bias (prepared once
// while the tensors stay unchanged), the residual and ReLU as post-ops. Otherwise, or where the
// backend has no fused kernel, it runs the unfused ops (differentiable). The two agree within
// float32 rounding of the reordered arithmetic (tests/unit/train/conv_infer_test.cpp).
#include "loom/core/api.h"
#include "loom/ops/conv.h"
#include "ops/backend.h"

namespace loom::detail {

LOOM_INTERNAL Tensor conv2d_fused(const Tensor& x, const Tensor& weight, const Tensor& bias, const FusedConv& epilogue,
                    IntList stride = 1, ConvPadding padding = 0, IntList dilation = 1, int64_t groups = 1);

// Blocked activation layouts, kept by the graph compiler between fused convolutions
// (docs/compile.md): with FusedConv::x_blocked, x holds the backend's blocked layout (a float32
// tensor of the logical NCHW shape whose memory is N, C/B, H, W, B); with out_blocked, the
// residual does and the result will. A call the fused kernel cannot run converts around the
// unfused ops. Only without gradients: nothing records how to differentiate a reorder.
//
// conv2d_fused_blocked: the channel block B when conv2d_fused can write this call's output
// blocked (float32, groups 1, channels a multiple of B, a backend that has such layouts), else 0.
LOOM_INTERNAL int64_t conv2d_fused_blocked(const Tensor& x, const Tensor& weight, IntList stride, ConvPadding padding,
                             IntList dilation, int64_t groups);
// x (contiguous 4-d float32) converted from NCHW to the blocked layout, or back when to_plain.
LOOM_INTERNAL Tensor reorder_blocked(const Tensor& x, bool to_plain);
// max_pool2d (dilation 1) of x in the blocked layout, the result in it too; the values of
// max_pool2d on the NCHW tensor, NaN propagated. Only without gradients.
LOOM_INTERNAL Tensor max_pool2d_blocked(const Tensor& x, IntList kernel_size, IntList stride, IntList padding, bool ceil_mode);
// Counts since the process started (for tests): conv2d_fused calls that ran on blocked
// operands, reorder_blocked calls (the fallback's included) and max_pool2d_blocked calls.
struct BlockedStats {
  int64_t fused_calls = 0, reorders = 0, pools = 0;
};
LOOM_INTERNAL BlockedStats blocked_stats();

// While alive, ops prepare weights (reordered, batch norm folded) for the call only and keep
// none in the backend's cache: for runs whose layouts nothing asks for again, as the graph
// compiler's shape runs (unfused, at probe batch sizes). Process-wide (a convolution prepares
// on the pool's threads), so other threads' calls meanwhile prepare per call too. Nests.
class LOOM_INTERNAL PreparedWeightsNotKept {
 public:
  PreparedWeightsNotKept();
  ~PreparedWeightsNotKept();
  PreparedWeightsNotKept(const PreparedWeightsNotKept&) = delete;
  PreparedWeightsNotKept& operator=(const PreparedWeightsNotKept&) = delete;
};

}  // namespace loom::detail
