// GELU with the tanh approximation over contiguous float32 (Backend::gelu_tanh_f32 and its
// backward), GPT-2's activation. The composite (elementwise.cpp's gelu) runs nine elementwise
// ops over the whole tensor, each writing a full-size intermediate and recording a node that
// keeps its inputs for backward; here each block of kBlock elements goes through the same
// SIMD-table operations while it sits in L1, and only y is written. The backward recomputes
// t = tanh(c (x + a x^3)) per block from x (the only tensor kept: keeping t too took 12.6 MB a
// layer in train_bench's GPT, more than the tanh costs). The forward does the composite's
// operations in its order, so y is the composite's bit for bit; elementwise, so the bits do not
// depend on the thread count.
#include <algorithm>
#include <cmath>

#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/register.h"
#include "ops/cpu/simd/simd.h"

namespace loom::cpu {

namespace {
constexpr int64_t kBlock = 1024;                 // floats per block: the scratch blocks (12 KiB) stay in L1
const float kA = static_cast<float>(0.044715);  // the composite's scalars, as float32 ops take them
const float kC = static_cast<float>(std::sqrt(2.0 / M_PI));
// t (m values) = tanh((x + x x x 0.044715) sqrt(2 / pi)), the composite's operations in its order.
void tanh_part(float* t, const float* x, int64_t m, const simd::Table& s) {
  s.binary_vv[simd::kMul](t, x, x, m);  // x * x
  s.binary_vv[simd::kMul](t, t, x, m);  // * x
  s.binary_vs[simd::kMul](t, t, kA, m);  // * 0.044715
  s.binary_vv[simd::kAdd](t, x, t, m);  // x + ...
  s.binary_vs[simd::kMul](t, t, kC, m);  // * sqrt(2 / pi)
  s.unary[simd::kTanh](t, t, m);
}

}  // namespace

void gelu_tanh_f32(const Tensor& out, const Tensor& x) {
  const int64_t n = x.numel();
  const float* xp = static_cast<const float*>(x.data_ptr());
  float* op = static_cast<float*>(out.data_ptr());
  const simd::Table& s = simd::table();
  // tanh costs several adds per element: a smaller grain than the plain elementwise kernels'
  parallel_range(0, n, kGrain / 4, [&](int64_t b0, int64_t b1) {
    alignas(64) float t[kBlock];
    for (int64_t i = b0; i < b1; i += kBlock) {
      const int64_t m = std::min(kBlock, b1 - i);
      const float* xi = xp + i;
      tanh_part(t, xi, m, s);
      s.binary_sv[simd::kAdd](t, 1.0f, t, m);         // 1 + t
      s.binary_vs[simd::kMul](op + i, xi, 0.5f, m);   // x * 0.5
      s.binary_vv[simd::kMul](op + i, op + i, t, m);  // (x * 0.5) (1 + t)
    }
  });
}

// d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2), times g.
void gelu_tanh_backward_f32(const Tensor& gx, const Tensor& g, const Tensor& x) {
  const int64_t n = x.numel();
  const float* xp = static_cast<const float*>(x.data_ptr());
  const float* gp = static_cast<const float*>(g.data_ptr());
  float* op = static_cast<float*>(gx.data_ptr());
  const simd::Table& s = simd::table();
  parallel_range(0, n, kGrain / 4, [&](int64_t b0, int64_t b1) {
    alignas(64) float u[kBlock], w[kBlock], t[kBlock];
    for (int64_t i = b0; i < b1; i += kBlock) {
      const int64_t m = std::min(kBlock, b1 - i);
      const float* xi = xp + i;
      const float* ti = t;
      tanh_part(t, xi, m, s);
      s.binary_vv[simd::kMul](u, xi, xi, m);         // x^2
      s.binary_vs[simd::kMul](u, u, 3.0f * kA, m);   // 3 a x^2
      s.binary_vs[simd::kAdd](u, u, 1.0f, m);        // 1 + 3 a x^2
      s.binary_vs[simd::kMul](u, u, kC, m);          // c (1 + 3 a x^2)
      s.binary_vv[simd::kMul](w, ti, ti, m);         // t^2
      s.binary_sv[simd::kSub](w, 1.0f, w, m);        // 1 - t^2
      s.binary_vv[simd::kMul](u, u, w, m);
      s.binary_vv[simd::kMul](u, u, xi, m);          // x (1 - t^2) c (1 + 3 a x^2)
      s.binary_vs[simd::kAdd](w, ti, 1.0f, m);       // 1 + t
      s.binary_vv[simd::kAdd](u, u, w, m);
      s.binary_vs[simd::kMul](u, u, 0.5f, m);
      s.binary_vv[simd::kMul](op + i, u, gp + i, m);
    }
  });
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/elementwise.cpp), with its signature, which the slot checks.
void add_gelu_kernels(detail::Backend& b) {
  b.kernels.fill("gelu.gelu_tanh_f32", &cpu::gelu_tanh_f32);
  b.kernels.fill("gelu.gelu_tanh_backward_f32", &cpu::gelu_tanh_backward_f32);
}

}  // namespace loom::cpu
