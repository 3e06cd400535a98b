// int8 weights (ops/quantized.h): quantization's rounding and scales; the per-ISA kernel of every
// build the CPU can run against a float64 product of the same int8 values and scales (tails, odd
// groups, 1 to 5 rows, 1 to 9 columns); matmul_int8 against matmul with the dequantized matrix;
// refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/grad_mode.h"
#include "loom/core/tensor.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/quantized.h"
#include "loom/ops/random.h"
#include "loom/ops/reduction.h"
#include "ops/cpu/simd/simd.h"
#include "unit/ops/simd_tables.h"

using namespace loom;
namespace simd = loom::cpu::simd;

TEST(QuantizeInt8, RoundsToTheNearestStepOfEachGroupsScale) {
  // K = 4 inputs, N = 2 outputs; groups of 2 inputs
  const Tensor w = from_vector<float>({1.27f, -0.5f, 0.0f, 2.54f, -1.0f, 0.0f, 0.0f, 0.0f}, {4, 2});
  const QuantizedMatrix q = quantize_int8(w, 2);
  EXPECT_EQ(q.group, 2);
  ASSERT_EQ(q.values.shape(), (Shape{2, 4}));
  ASSERT_EQ(q.scales.shape(), (Shape{2, 2}));
  const std::vector<float> s = q.scales.to_vector<float>();
  EXPECT_FLOAT_EQ(s[0], 1.27f / 127);   // output 0, inputs 0-1: max |1.27|, |0|
  EXPECT_FLOAT_EQ(s[1], 1.0f / 127);    // output 0, inputs 2-3
  EXPECT_FLOAT_EQ(s[2], 2.54f / 127);   // output 1, inputs 0-1
  EXPECT_FLOAT_EQ(s[3], 0.0f);          // output 1, inputs 2-3: all zero
  std::vector<int> v;
  for (uint8_t b : q.values.to_vector<uint8_t>()) v.push_back(static_cast<int8_t>(b));
  EXPECT_EQ(v, (std::vector<int>{127, 0, -127, 0, -25, 127, 0, 0}));  // -0.5 / (2.54 / 127) = -25
  const Tensor back = dequantize(q);
  // every element within half a step of its group's scale
  const std::vector<float> a = w.to_vector<float>(), b = back.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t k = static_cast<int64_t>(i) / 2, j = static_cast<int64_t>(i) % 2;
    EXPECT_LE(std::abs(a[i] - b[i]), s[static_cast<size_t>(j * 2 + k / 2)] / 2 + 1e-7f) << i;
  }
}

TEST(QuantizeInt8, KernelOfEveryBuildEqualsTheProductOfItsValues) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> q8(-127, 127);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (const simd::Table* t : runnable_tables())
    for (const int64_t k : {1, 7, 8, 16, 33, 64, 100})
      for (const int64_t group : {k, int64_t{7}, int64_t{32}})
        for (const int64_t m : {1, 2, 3, 5})
          for (const int64_t n : {1, 3, 4, 9}) {
            if (group > k) continue;
            const int64_t ng = (k + group - 1) / group;
            std::vector<float> a(static_cast<size_t>(m * k)), s(static_cast<size_t>(n * ng));
            std::vector<signed char> q(static_cast<size_t>(n * k));
            for (float& x : a) x = unit(rng);
            for (float& x : s) x = unit(rng) + 1.5f;
            for (signed char& x : q) x = static_cast<signed char>(q8(rng));
            std::vector<float> c(static_cast<size_t>(m * n) + 1, -7.0f);  // one past the end: must stay
            t->gemm_rows_q8(c.data(), n, a.data(), k, q.data(), k, s.data(), group, m, n, k);
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                double want = 0, size = 0;
                for (int64_t x = 0; x < k; ++x) {
                  const double term = static_cast<double>(a[static_cast<size_t>(i * k + x)]) * q[static_cast<size_t>(j * k + x)] *
                                      s[static_cast<size_t>(j * ng + x / group)];
                  want += term;
                  size += std::abs(term);
                }
                ASSERT_NEAR(c[static_cast<size_t>(i * n + j)], want, 1e-6 * size + 1e-6)
                    << t->isa << " K " << k << " group " << group << " m " << m << " n " << n << " at " << i << "," << j;
              }
            EXPECT_EQ(c.back(), -7.0f) << t->isa << ": wrote past its output";
          }
}

TEST(MatmulInt8, EqualsMatmulWithTheDequantizedMatrix) {
  Generator g(3);
  for (const int64_t group : {int64_t{0}, int64_t{32}, int64_t{40}}) {
    const Tensor w = normal({96, 70}, 0.0, 0.1, Float32, default_device(), &g);
    const QuantizedMatrix q = quantize_int8(w, group);
    for (const Shape& xs : {Shape{96}, Shape{1, 96}, Shape{3, 5, 96}, Shape{0, 96}}) {
      const Tensor x = normal(xs, 0.0, 1.0, Float32, default_device(), &g);
      const Tensor got = matmul_int8(x, q), want = matmul(x, dequantize(q));
      ASSERT_EQ(got.shape(), want.shape());
      if (x.numel() == 0) continue;
      EXPECT_LT(max(abs(got - want)).item<double>(), 1e-5 * max(abs(want)).item<double>()) << "group " << group;
    }
    // a strided x is read as its values
    const Tensor xt = normal({96, 4}, 0.0, 1.0, Float32, default_device(), &g).transpose();
    EXPECT_LT(max(abs(matmul_int8(xt, q) - matmul(xt, dequantize(q)))).item<double>(), 1e-4);
  }
}

TEST(MatmulInt8, Refusals) {
  const QuantizedMatrix q = quantize_int8(ones({8, 4}));
  EXPECT_THROW(quantize_int8(ones({8})), ValueError);
  EXPECT_THROW(quantize_int8(ones({8, 4}, Int64)), ValueError);
  EXPECT_THROW(quantize_int8(ones({8, 4}), 9), ValueError);
  EXPECT_THROW(matmul_int8(ones({2, 7}), q), ShapeError);
  EXPECT_THROW(matmul_int8(ones({2, 8}, Float64), q), ValueError);
  EXPECT_THROW(matmul_int8(ones({2, 8}).requires_grad_(), q), ValueError);
  NoGrad no_grad;
  EXPECT_NO_THROW(matmul_int8(ones({2, 8}).requires_grad_(), q));
}
