// Fused softmax cross-entropy over the rows of a float32 matrix: the forward reads each row
// once (it stays in L1/L2 for its max and exp-sum passes) and keeps two floats per row; the
// backward reads it once more and writes the gradient once. The composite (log_softmax, pick,
// scatter, log_softmax's backward) makes about six passes over the N x C values.
#include <algorithm>

#include "loom/core/parallel.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/register.h"
#include "ops/cpu/simd/simd.h"

namespace loom::cpu {

namespace {
int64_t row_grain(int64_t n) { return std::max<int64_t>(1, kGrain / 4 / n); }  // exp: as softmax
}  // namespace

void cross_entropy_rows_f32(const Tensor& loss, const Tensor& m, const Tensor& ls, const Tensor& x, const Tensor& t,
                            int64_t ignore_index) {
  const int64_t rows = x.shape()[0], n = x.shape()[1];
  const float* xp = static_cast<const float*>(x.data_ptr());
  const int64_t* tp = static_cast<const int64_t*>(t.data_ptr());
  float* lp = static_cast<float*>(loss.data_ptr());
  float* mp = static_cast<float*>(m.data_ptr());
  float* lsp = static_cast<float*>(ls.data_ptr());
  const auto kernel = simd::table().max_log_sum_exp_rows;
  parallel_range(0, rows, row_grain(n), [&](int64_t r0, int64_t r1) {
    kernel(mp + r0, lsp + r0, xp + r0 * n, r1 - r0, n);
    for (int64_t r = r0; r < r1; ++r)
      lp[r] = tp[r] == ignore_index ? 0.0f : -((xp[r * n + tp[r]] - mp[r]) - lsp[r]);
  });
}

void cross_entropy_rows_backward_f32(const Tensor& gx, const Tensor& g, const Tensor& x, const Tensor& m, const Tensor& ls,
                                     const Tensor& t, int64_t ignore_index) {
  const int64_t rows = x.shape()[0], n = x.shape()[1];
  const float* xp = static_cast<const float*>(x.data_ptr());
  const float* gp = static_cast<const float*>(g.data_ptr());
  const int64_t* tp = static_cast<const int64_t*>(t.data_ptr());
  const float* mp = static_cast<const float*>(m.data_ptr());
  const float* lsp = static_cast<const float*>(ls.data_ptr());
  float* op = static_cast<float*>(gx.data_ptr());
  const auto kernel = simd::table().exp_shift_scale;
  parallel_range(0, rows, row_grain(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const bool ignored = tp[r] == ignore_index;
      const float gr = ignored ? 0.0f : gp[r];
      kernel(op + r * n, xp + r * n, n, mp[r], lsp[r], gr);
      if (!ignored) op[r * n + tp[r]] -= gr;
    }
  });
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/losses.cpp), with its signature, which the slot checks.
void add_cross_entropy_kernels(detail::Backend& b) {
  b.kernels.fill("losses.cross_entropy_rows_f32", &cpu::cross_entropy_rows_f32);
  b.kernels.fill("losses.cross_entropy_rows_backward_f32", &cpu::cross_entropy_rows_backward_f32);
}

}  // namespace loom::cpu
