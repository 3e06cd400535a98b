#pragma once
// Winograd F(2x2, 3x3) and F(4x4, 3x3) inference convolutions on blocked activations
// (conv_winograd.cpp).
#include "loom/core/tensor.h"

namespace loom::cpu {

// The transformed weights ((m+2)², C, K) of float32 OIHW 3x3 weights (K, C, 3, 3), for
// F(m x m, 3x3), m = 2 or 4.
Tensor winograd_weights(const Tensor& w, int m);

// out = relu?(conv(x, w) + bias + (out when `sum`)) for a 3x3, stride-1, undilated convolution
// with padding pad_top / pad_left (the output's shape gives the rest): x and out in a blocked
// layout of `block` channels (N, C/block, H, W, block), C and K multiples of block; u from
// winograd_weights(w, m); bias K floats or null.
void conv2d_winograd(const Tensor& out, const Tensor& x, const Tensor& u, const float* bias, int64_t block, int m,
                     int64_t pad_top, int64_t pad_left, bool sum, bool relu);

}  // namespace loom::cpu
