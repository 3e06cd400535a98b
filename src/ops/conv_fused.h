#pragma once
// A convolution with its inference epilogue fused in (internal, not public API; for the graph
// compiler): relu(batch_norm_eval(conv2d(x, w) + bias) + residual), each part optional as
// FusedConv says. Without gradients (grad mode off, or nothing requires grad) and in float32
// it runs as one oneDNN primitive: batch norm folded into the weights and bias (prepared once
// while the tensors stay unchanged), the residual and ReLU as post-ops. Otherwise, or where the
// backend has no fused kernel, it runs the unfused ops (differentiable). The two agree within
// float32 rounding of the reordered arithmetic (tests/unit/conv_infer_test.cpp).
#include "loom/ops/conv.h"
#include "ops/backend.h"

namespace loom::detail {

Tensor conv2d_fused(const Tensor& x, const Tensor& weight, const Tensor& bias, const FusedConv& epilogue,
                    IntList stride = 1, ConvPadding padding = 0, IntList dilation = 1, int64_t groups = 1);

}  // namespace loom::detail
