// The sum of squares of a contiguous float32 tensor in one read (Backend::sum_squares_f32, the
// 2-norm of clip_grad_norm): float32 vector sums over fixed blocks of 64 Ki values, split over
// the pool and added in double in block order, so the result does not depend on the thread count.
#include <algorithm>
#include <vector>

#include "loom/core/parallel.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/register.h"
#include "ops/cpu/simd/simd.h"

namespace loom::cpu {

double sum_squares_f32(const Tensor& x) {
  constexpr int64_t kBlock = int64_t(1) << 16;
  const int64_t n = x.numel(), blocks = (n + kBlock - 1) / kBlock;
  const float* p = x.data<float>();
  const auto kernel = simd::table().sum_squares;
  std::vector<double> part(static_cast<size_t>(blocks));
  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) part[static_cast<size_t>(b)] = kernel(p + b * kBlock, std::min(kBlock, n - b * kBlock));
  });
  double s = 0.0;
  for (double v : part) s += v;
  return s;
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/train/clip.cpp), with its signature, which the slot checks.
void add_sum_squares_kernels(detail::Backend& b) {
  b.kernels.fill("clip.sum_squares_f32", &cpu::sum_squares_f32);
}

}  // namespace loom::cpu
