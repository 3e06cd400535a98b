// Softmax and log-softmax of float32 rows along the last axis (Backend::softmax_lastdim_f32):
// per row one pass for the max, one for exp and the sum, one to scale, while the row is in
// L1/L2, rows split over the pool.
#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/register.h"
#include "ops/cpu/simd/simd.h"

namespace loom::cpu {

void softmax_lastdim_f32(const Tensor& out, const Tensor& x, bool log) {
  const int64_t n = x.shape().empty() ? 1 : x.shape().back();
  if (n == 0 || x.numel() == 0) return;
  const int64_t rows = x.numel() / n;
  const float* xp = static_cast<const float*>(x.data_ptr());
  float* op = static_cast<float*>(out.data_ptr());
  const auto kernel = simd::table().softmax_rows;
  // exp costs ~10x an add: a smaller grain than the elementwise kernels'.
  parallel_range(0, rows, std::max<int64_t>(1, kGrain / 4 / n), [&](int64_t r0, int64_t r1) {
    kernel(op + r0 * n, xp + r0 * n, r1 - r0, n, log);
  });
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/reduction.cpp), with its signature, which the slot checks.
void add_softmax_kernels(detail::Backend& b) {
  b.kernels.fill("softmax.softmax_lastdim_f32", &cpu::softmax_lastdim_f32);
}

}  // namespace loom::cpu
