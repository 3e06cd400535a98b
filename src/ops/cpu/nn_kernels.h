#pragma once
// CPU kernels of the neural-network ops (convolution, pooling, normalization). conv2d* and
// avg_pool2d* dispatch float32 to oneDNN (conv_onednn.cpp, pool_onednn.cpp) with Loom's own
// loops as the fallback; float64 runs the loops (the finite-difference reference).
#include "loom/core/api.h"
#include "ops/backend.h"

namespace loom::cpu {
using detail::Conv2dParams;
using detail::FusedConv;
using detail::Pool2dParams;

// Entry points of the backend table.
void conv2d(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p);
void conv2d_backward_data(const Tensor& gx, const Tensor& gy, const Tensor& w, const Conv2dParams& p);
void conv2d_backward_weights(const Tensor& gw, const Tensor& gy, const Tensor& x, const Conv2dParams& p);
void max_pool2d(const Tensor& out, const Tensor& indices, const Tensor& x, const Pool2dParams& p);
void avg_pool2d(const Tensor& out, const Tensor& x, const Pool2dParams& p);
void avg_pool2d_backward(const Tensor& gx, const Tensor& gy, const Pool2dParams& p);

// im2col + GEMM reference (any float dtype the BLAS handles: float32, float64).
void conv2d_ref(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p);
void conv2d_backward_data_ref(const Tensor& gx, const Tensor& gy, const Tensor& w, const Conv2dParams& p);
void conv2d_backward_weights_ref(const Tensor& gw, const Tensor& gy, const Tensor& x, const Conv2dParams& p);

// oneDNN float32 paths; return false when oneDNN has no implementation for the geometry.
bool conv2d_onednn(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p);
bool conv2d_fused_onednn(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                         const FusedConv& e);
int64_t conv2d_blocked_onednn(const Shape& x, const Shape& out, int64_t groups);
void reorder_blocked_onednn(const Tensor& out, const Tensor& x, bool to_plain);
void max_pool2d_blocked(const Tensor& out, const Tensor& x, const Pool2dParams& p);
// Inference calls on one sample whose output rows were split over the threads (for tests).
LOOM_INTERNAL int64_t conv2d_row_split_calls();
// Whether inference plans on blocked activations use oneDNN's Winograd kernels for 3x3,
// stride-1 convolutions on this CPU (LOOM_CONV_WINOGRAD=0 turns them off), and how many such
// plans were built (for tests).
LOOM_INTERNAL bool conv2d_winograd();
LOOM_INTERNAL int64_t conv2d_winograd_plans();
bool conv2d_backward_data_onednn(const Tensor& gx, const Tensor& gy, const Tensor& w, const Conv2dParams& p);
bool conv2d_backward_weights_onednn(const Tensor& gw, const Tensor& gy, const Tensor& x, const Conv2dParams& p);
bool avg_pool2d_onednn(const Tensor& out, const Tensor& x, const Pool2dParams& p);
bool avg_pool2d_backward_onednn(const Tensor& gx, const Tensor& gy, const Pool2dParams& p);

void batch_norm_train(const Tensor& y, const Tensor& mean, const Tensor& var, const Tensor& x, const Tensor& weight,
                      const Tensor& bias, double eps);
void batch_norm_backward(const Tensor& gx, const Tensor& gweight, const Tensor& gbias, const Tensor& g, const Tensor& x,
                         const Tensor& mean, const Tensor& var, const Tensor& weight, double eps);
void batch_norm_sums(const Tensor& sums, const Tensor& x);
void batch_norm_apply(const Tensor& y, const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& weight,
                      const Tensor& bias, double eps);
void batch_norm_grad_sums(const Tensor& sums, const Tensor& g, const Tensor& x, const Tensor& mean);
void batch_norm_input_grad(const Tensor& gx, const Tensor& g, const Tensor& x, const Tensor& mean, const Tensor& var,
                           const Tensor& weight, const Tensor& sums, double count, double eps);
void max_pool2d_backward(const Tensor& gx, const Tensor& gy, const Tensor& indices);
void layer_norm(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                const Tensor& bias, int64_t cols, double eps);
void layer_norm_backward(const Tensor& gx, const Tensor& gweight, const Tensor& gbias, const Tensor& g, const Tensor& x,
                         const Tensor& mean, const Tensor& rstd, const Tensor& weight, int64_t cols);
// fused attention (attention_flash.cpp): see Backend
void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const detail::AttentionParams& p);
void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& gout, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const detail::AttentionParams& p);
void lstm_cell(const Tensor& out, const Tensor& ws, const Tensor& gates, const Tensor& c);
void lstm_cell_backward(const Tensor& dgates, const Tensor& dc, const Tensor& grad, const Tensor& ws, const Tensor& c);

}  // namespace loom::cpu
