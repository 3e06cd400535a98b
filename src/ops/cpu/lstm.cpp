// Fused LSTM cell kernels (the op: src/ops/recurrent.cpp). Forward: per row, the four gate
// activations, c2 = f c + i g, tanh(c2) and h2 = o tanh(c2) in one pass while the row is in
// L1, keeping the activated gates and tanh(c2) in the workspace (as PyTorch's fused cell).
// Backward: every gate gradient and dc from that workspace in one loop. float32 activations
// run the vector kernels of simd::Table (the same ones the sigmoid / tanh ops use, so values
// match the composition); the rest are plain loops the compiler vectorises.
#include <algorithm>
#include <cmath>

#include "ops/cpu/loops.h"
#include "ops/cpu/nn_kernels.h"
#include "ops/cpu/register.h"
#include "ops/cpu/simd/simd.h"
#include "ops/dispatch.h"

namespace loom::cpu {

namespace {

// As the sigmoid / tanh ops' scalar forms (unary.cpp).
template <typename T>
void sigmoid_n(T* o, const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) return simd::table().unary[simd::kSigmoid](o, x, n);
  for (int64_t k = 0; k < n; ++k) {
    const T v = x[k];
    if (v >= 0) {
      o[k] = T(1) / (T(1) + std::exp(-v));
    } else {
      const T e = std::exp(v);
      o[k] = e / (T(1) + e);
    }
  }
}
template <typename T>
void tanh_n(T* o, const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) return simd::table().unary[simd::kTanh](o, x, n);
  for (int64_t k = 0; k < n; ++k) o[k] = std::tanh(x[k]);
}

// Rows per task: enough work per task that small batches run inline.
int64_t row_grain(int64_t n) { return std::max<int64_t>(1, kGrain / std::max<int64_t>(1, 5 * n)); }

template <typename T>
void forward_typed(const Tensor& out, const Tensor& ws, const Tensor& gates, const Tensor& c) {
  const int64_t rows = c.shape()[0], n = c.shape()[1];
  T* po = static_cast<T*>(out.data_ptr());
  T* pw = static_cast<T*>(ws.data_ptr());
  const T* pg = static_cast<const T*>(gates.data_ptr());
  const T* pc = static_cast<const T*>(c.data_ptr());
  parallel_range(0, rows, row_grain(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      T* a = pw + r * 5 * n;  // i, f, g, o, tanh(c2)
      const T* g = pg + r * 4 * n;
      sigmoid_n(a, g, 2 * n);
      tanh_n(a + 2 * n, g + 2 * n, n);
      sigmoid_n(a + 3 * n, g + 3 * n, n);
      const T* __restrict i = a;
      const T* __restrict f = a + n;
      const T* __restrict gg = a + 2 * n;
      const T* __restrict cp = pc + r * n;
      T* __restrict h2 = po + r * 2 * n;
      T* __restrict c2 = h2 + n;
      for (int64_t k = 0; k < n; ++k) c2[k] = f[k] * cp[k] + i[k] * gg[k];
      tanh_n(a + 4 * n, c2, n);
      const T* __restrict o = a + 3 * n;
      const T* __restrict tc = a + 4 * n;
      for (int64_t k = 0; k < n; ++k) h2[k] = o[k] * tc[k];
    }
  });
}

// One row: a = [i, f, g, o, tanh(c2)] (5n), grad = [dh2, dc2] (2n), cp = c (n) -> dgates (4n)
// and, when WantDc, dc (n). A function of its own (restrict parameters, no `if (dc)` in the
// loop) so that GCC vectorises it.
template <typename T, bool WantDc>
void backward_row(T* __restrict dgates, T* __restrict dc, const T* __restrict grad, const T* __restrict a,
                  const T* __restrict cp, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    const T i = a[k], f = a[n + k], g = a[2 * n + k], o = a[3 * n + k], tc = a[4 * n + k];
    const T dh = grad[k];
    // gradient reaching c2: directly, and through h2 = o tanh(c2)
    const T dct = grad[n + k] + dh * o * (T(1) - tc * tc);
    dgates[k] = dct * g * (i * (T(1) - i));
    dgates[n + k] = dct * cp[k] * (f * (T(1) - f));
    dgates[2 * n + k] = dct * i * (T(1) - g * g);
    dgates[3 * n + k] = dh * tc * (o * (T(1) - o));
    if constexpr (WantDc) dc[k] = dct * f;
  }
}

template <typename T>
void backward_typed(const Tensor& dgates, const Tensor& dc, const Tensor& grad, const Tensor& ws, const Tensor& c) {
  const int64_t rows = c.shape()[0], n = c.shape()[1];
  T* pdg = static_cast<T*>(dgates.data_ptr());
  T* pdc = dc.defined() ? static_cast<T*>(dc.data_ptr()) : nullptr;
  const T* pgr = static_cast<const T*>(grad.data_ptr());
  const T* pw = static_cast<const T*>(ws.data_ptr());
  const T* pc = static_cast<const T*>(c.data_ptr());
  parallel_range(0, rows, row_grain(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (pdc)
        backward_row<T, true>(pdg + r * 4 * n, pdc + r * n, pgr + r * 2 * n, pw + r * 5 * n, pc + r * n, n);
      else
        backward_row<T, false>(pdg + r * 4 * n, nullptr, pgr + r * 2 * n, pw + r * 5 * n, pc + r * n, n);
    }
  });
}

}  // namespace

void lstm_cell(const Tensor& out, const Tensor& ws, const Tensor& gates, const Tensor& c) {
  detail::dispatch_float(c.dtype(), "lstm_cell", [&](auto tag) { forward_typed<decltype(tag)>(out, ws, gates, c); });
}

void lstm_cell_backward(const Tensor& dgates, const Tensor& dc, const Tensor& grad, const Tensor& ws, const Tensor& c) {
  detail::dispatch_float(c.dtype(), "lstm_cell", [&](auto tag) {
    backward_typed<decltype(tag)>(dgates, dc, grad, ws, c);
  });
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/recurrent.cpp), with its signature, which the slot checks.
void add_lstm_kernels(detail::Backend& b) {
  b.kernels.fill("lstm.lstm_cell", &cpu::lstm_cell);
  b.kernels.fill("lstm.lstm_cell_backward", &cpu::lstm_cell_backward);
}

}  // namespace loom::cpu
