// int8 weights (ops/quantized.h): quantization's rounding and scales; the per-ISA rounding of x
// to int16 and product of every build the CPU can run, against scalar and float64 references
// (tails, odd groups, chunks of 1024 at the integer extremes, 1 to 5 rows, 1 to 9 columns);
// matmul_int8 against matmul with the dequantized matrix within the rounding of x; non-finite
// rows; refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/grad_mode.h"
#include "loom/core/tensor.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/manipulation.h"
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

// The rounding of x's rows to int16 of every build against the same formula in scalar code:
// round(x * (32767 / amax)) with ties to even, zeros past K; a zero row and non-finite rows.
TEST(QuantizeInt8, RowsRoundToInt16OfTheirLargestMagnitude) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> unit(-3.0f, 3.0f);
  for (const simd::Table* t : runnable_tables())
    for (const int64_t k : {1, 7, 8, 17, 64, 100}) {
      const int64_t m = 3, ld = (k + 63) / 64 * 64;
      std::vector<float> a(static_cast<size_t>(m * k));
      for (float& x : a) x = unit(rng);
      std::vector<int16_t> out(static_cast<size_t>(m * ld), 99);
      std::vector<float> scale(static_cast<size_t>(m), -1.0f);
      t->round_rows_i16(out.data(), ld, scale.data(), a.data(), k, m, k);
      for (int64_t i = 0; i < m; ++i) {
        float amax = 0;
        for (int64_t x = 0; x < k; ++x) amax = std::max(amax, std::abs(a[static_cast<size_t>(i * k + x)]));
        ASSERT_EQ(scale[static_cast<size_t>(i)], amax / 32767.0f) << t->isa;
        const float inv = 32767.0f / amax;
        int top = 0;
        for (int64_t x = 0; x < ld; ++x) {
          const int got = out[static_cast<size_t>(i * ld + x)];
          const int want = x < k ? static_cast<int>(std::nearbyint(a[static_cast<size_t>(i * k + x)] * inv)) : 0;
          ASSERT_EQ(got, want) << t->isa << " K " << k << " row " << i << " at " << x;
          top = std::max(top, std::abs(got));
        }
        EXPECT_EQ(top, 32767) << t->isa << ": the largest magnitude takes the whole range";
      }
      // a row of zeros: scale 0; a row with an infinity or a NaN: scale NaN (its products NaN)
      for (const float odd : {0.0f, std::numeric_limits<float>::infinity(), std::nanf("")}) {
        std::vector<float> row(static_cast<size_t>(k), 0.0f);
        row[static_cast<size_t>(k - 1)] = odd;
        std::vector<int16_t> o(static_cast<size_t>(ld), 99);
        float sc = -1;
        t->round_rows_i16(o.data(), ld, &sc, row.data(), k, 1, k);
        if (odd == 0) EXPECT_EQ(sc, 0.0f) << t->isa;
        else EXPECT_TRUE(std::isnan(sc)) << t->isa << " " << odd;
        for (int16_t v : o) ASSERT_EQ(v, 0) << t->isa;
      }
    }
}

// The product of every build against a float64 sum of the same int16 and int8 values and scales:
// the integer dots are exact, so only the float scaling rounds.
TEST(QuantizeInt8, KernelOfEveryBuildEqualsTheProductOfItsValues) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> q8(-127, 127), x16(-32767, 32767);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (const simd::Table* t : runnable_tables())
    for (const int64_t k : {1, 7, 8, 16, 33, 64, 100, 9000})
      for (const int64_t group : {k, int64_t{7}, int64_t{32}, int64_t{1100}})
        for (const int64_t m : {1, 2, 3, 5})
          for (const int64_t n : {1, 3, 4, 9}) {
            if (group > k || (k == 9000 && group < 32)) continue;
            const int64_t ng = (k + group - 1) / group, ld = (k + 63) / 64 * 64;
            std::vector<int16_t> a(static_cast<size_t>(m * ld), 0);
            std::vector<float> as(static_cast<size_t>(m)), s(static_cast<size_t>(n * ng));
            std::vector<signed char> q(static_cast<size_t>(n * k));
            for (int64_t i = 0; i < m; ++i)
              for (int64_t x = 0; x < k; ++x) {
                // the extremes of both ranges: 9000 of them overflow an int32 lane of every build unless
                // the sums go to float every chunk of 1024
                const bool edge = k == 9000 && i == 0;
                a[static_cast<size_t>(i * ld + x)] = static_cast<int16_t>(edge ? 32767 : x16(rng));
              }
            for (float& x : as) x = unit(rng) + 1.5f;
            for (float& x : s) x = unit(rng) + 1.5f;
            for (signed char& x : q) x = static_cast<signed char>(k == 9000 && n == 1 ? 127 : q8(rng));
            // a bias on every other case
            std::vector<float> bias(static_cast<size_t>(n));
            for (float& x : bias) x = unit(rng);
            const bool biased = (k + m + n) % 2 == 0;
            std::vector<float> c(static_cast<size_t>(m * n) + 1, -7.0f);  // one past the end: must stay
            t->gemm_rows_q8(c.data(), n, a.data(), ld, as.data(), q.data(), k, s.data(), biased ? bias.data() : nullptr, group, m, n, k);
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                double want = biased ? bias[static_cast<size_t>(j)] : 0.0, size = std::abs(want);
                for (int64_t x = 0; x < k; ++x) {
                  const double term = static_cast<double>(a[static_cast<size_t>(i * ld + x)]) * q[static_cast<size_t>(j * k + x)] *
                                      s[static_cast<size_t>(j * ng + x / group)] * as[static_cast<size_t>(i)];
                  want += term;
                  size += std::abs(term);
                }
                ASSERT_NEAR(c[static_cast<size_t>(i * n + j)], want, 1e-6 * size + 1e-6)
                    << t->isa << " K " << k << " group " << group << " m " << m << " n " << n << " at " << i << "," << j;
              }
            EXPECT_EQ(c.back(), -7.0f) << t->isa << ": wrote past its output";
          }
}

// Against matmul with the dequantized matrix: within the rounding of x to int16, half a step of
// its row's scale per input, |x - rounded| <= amax / 32767 / 2, times the column's sum of |w|.
TEST(MatmulInt8, EqualsMatmulWithTheDequantizedMatrixWithinTheRoundingOfX) {
  Generator g(3);
  for (const int64_t group : {int64_t{0}, int64_t{32}, int64_t{40}}) {
    const Tensor w = normal({96, 70}, 0.0, 0.1, Float32, default_device(), &g);
    const QuantizedMatrix q = quantize_int8(w, group);
    const Tensor column_size = sum(abs(dequantize(q)), {0});  // (70)
    for (const Shape& xs : {Shape{96}, Shape{1, 96}, Shape{3, 5, 96}, Shape{0, 96}}) {
      const Tensor x = normal(xs, 0.0, 1.0, Float32, default_device(), &g);
      const Tensor got = matmul_int8(x, q), want = matmul(x, dequantize(q));
      ASSERT_EQ(got.shape(), want.shape());
      if (x.numel() == 0) continue;
      const Tensor step = max(abs(x), {-1}, true) / 32767.0;  // (..., 1)
      const Tensor bound = step * 0.5 * column_size + 1e-5 * max(abs(want)).item<double>();
      EXPECT_TRUE(all(abs(got - want) <= bound).item<bool>()) << "group " << group;
      // x is rounded: the product differs from the float one (a kernel that skipped the rounding
      // would not)
      EXPECT_GT(max(abs(got - want)).item<double>(), 0.0) << "group " << group;
    }
    // a strided x is read as its values
    const Tensor xt = normal({96, 4}, 0.0, 1.0, Float32, default_device(), &g).transpose();
    const Tensor bound = max(abs(xt), {-1}, true) / 32767.0 * 0.5 * column_size + 1e-5;
    EXPECT_TRUE(all(abs(matmul_int8(xt, q) - matmul(xt, dequantize(q))) <= bound).item<bool>());
  }
}

// A bias is added in the product's pass: as adding it after would, but for the one rounding the
// kernel's multiply-add saves. K = 0 gives the bias alone (zeros without one).
TEST(MatmulInt8, ABiasIsAddedInTheProductsPass) {
  Generator g(4);
  const QuantizedMatrix q = quantize_int8(normal({40, 9}, 0.0, 0.1, Float32, default_device(), &g), 16);
  const Tensor x = normal({3, 2, 40}, 0.0, 1.0, Float32, default_device(), &g), b = normal({9}, 0.0, 1.0, Float32, default_device(), &g);
  const Tensor fused = matmul_int8(x, q, b), after = matmul_int8(x, q) + b;
  ASSERT_EQ(fused.shape(), (Shape{3, 2, 9}));
  EXPECT_LE(max(abs(fused - after)).item<double>(), 1e-6 * max(abs(after)).item<double>());
  EXPECT_GT(max(abs(fused - matmul_int8(x, q))).item<double>(), 0.1);  // the bias is there
  const QuantizedMatrix none = quantize_int8(zeros({0, 9}));
  EXPECT_TRUE(all(equal(matmul_int8(zeros({2, 0}), none, b), broadcast_to(b, {2, 9}))).item<bool>());
  EXPECT_TRUE(all(equal(matmul_int8(ones({4, 2, 0}), none), zeros({4, 2, 9}))).item<bool>());
  EXPECT_THROW(matmul_int8(x, q, ones({8})), ShapeError);
  EXPECT_THROW(matmul_int8(x, q, ones({9}, Float64)), ShapeError);
  EXPECT_THROW(matmul_int8(x, q, ones({1, 9})), ShapeError);
  EXPECT_THROW(matmul_int8(x, q, ones({9}).requires_grad_()), ValueError);
}

// A row of x with an infinity or NaN gives NaN outputs in that row only; a row of zeros, zeros.
TEST(MatmulInt8, NonFiniteRowsGiveNaNAndOnlyThere) {
  const QuantizedMatrix q = quantize_int8(ones({8, 5}));
  std::vector<float> xv(24, 0.5f);
  xv[3] = std::numeric_limits<float>::infinity();
  for (int i = 8; i < 16; ++i) xv[static_cast<size_t>(i)] = 0.0f;
  const std::vector<float> y = matmul_int8(from_vector<float>(xv, {3, 8}), q).to_vector<float>();
  for (int j = 0; j < 5; ++j) {
    EXPECT_TRUE(std::isnan(y[static_cast<size_t>(j)])) << j;
    EXPECT_EQ(y[static_cast<size_t>(5 + j)], 0.0f) << j;
    EXPECT_NEAR(y[static_cast<size_t>(10 + j)], 4.0f, 1e-6f) << j;
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
