// int8 weight products (ops/quantized.h) on the CPU: x's rows rounded to int16 once, then the
// rows of q split between the threads, each block through the SIMD table's gemm_rows_q8
// (simd/quantized.inc), which multiplies int16 by int8 in integer registers.
#include <algorithm>
#include <cstdint>

#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/register.h"
#include "ops/cpu/simd/simd.h"
#include "ops/internal.h"

namespace loom::cpu {

void matmul_int8(const Tensor& out, const Tensor& x, const Tensor& q, const Tensor& scales, int64_t group, const Tensor& bias) {
  const int64_t m = x.dim(0), k = x.dim(1), n = q.dim(0);
  float* o = out.data<float>();
  const float* a = x.data<float>();
  const auto* w = reinterpret_cast<const signed char*>(q.data<uint8_t>());
  const float* s = scales.data<float>();
  const int64_t ng = scales.dim(1);
  const float* b = bias.defined() ? bias.data<float>() : nullptr;
  const auto& table = simd::table();
  // x as int16 rows padded to a multiple of 64 inputs (a whole register of every build), in
  // buffers of the caching allocator (Loom has no int16 dtype: their bytes)
  const int64_t ld = (k + 63) / 64 * 64;
  const Tensor rounded = detail::alloc({m * ld * 2}, UInt8, x.device()), row_scales = detail::alloc({m}, Float32, x.device());
  auto* xr = reinterpret_cast<int16_t*>(rounded.data<uint8_t>());
  float* xs = row_scales.data<float>();
  parallel_range(0, m, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(k, 1)), [&](int64_t i0, int64_t i1) {
    table.round_rows_i16(xr + i0 * ld, ld, xs + i0, a + i0 * k, k, i1 - i0, k);
  });
  // at least ~64 KiB of weights per task, and 4 rows (one tile's columns) at the least
  const int64_t grain = std::max<int64_t>(4, (int64_t{1} << 16) / std::max<int64_t>(k, 1) / 4 * 4);
  parallel_range(0, n, grain, [&](int64_t j0, int64_t j1) {
    table.gemm_rows_q8(o + j0, n, xr, ld, xs, w + j0 * k, k, s + j0 * ng, b ? b + j0 : nullptr, group, m, j1 - j0, k);
  });
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/quantized.cpp), with its signature, which the slot checks.
void add_quantized_kernels(detail::Backend& b) {
  b.kernels.fill("quantized.matmul_int8", &cpu::matmul_int8);
}

}  // namespace loom::cpu
