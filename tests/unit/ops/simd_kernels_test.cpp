// The per-ISA float32 vector kernels (src/ops/cpu/simd): every build the CPU can run is
// checked against the C library / scalar arithmetic, and the ops that use them (fused
// softmax, reductions, elementwise) against float64 composites.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/simd/simd.h"
#include "unit/ops/simd_tables.h"
#include "loom/core/device.h"
#include "loom/core/dim_vector.h"
#include "loom/core/dtype.h"
#include "loom/core/shape.h"
#include "loom/core/tensor.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/random.h"
#include "loom/ops/reduction.h"

using namespace loom;
namespace simd = loom::cpu::simd;

namespace {


int64_t ordered(float f) {
  int32_t i;
  std::memcpy(&i, &f, 4);
  return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : i;
}

int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  if (a == b) return 0;
  return std::llabs(ordered(a) - ordered(b));
}

// Every 997th float bit pattern: all exponents, both signs, NaN, inf, denormals.
std::vector<float> float_sweep() {
  std::vector<float> v;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 997) {
    const uint32_t u = static_cast<uint32_t>(b);
    float f;
    std::memcpy(&f, &u, 4);
    v.push_back(f);
  }
  for (float f : {0.0f, -0.0f, 1.0f, -1.0f, 88.72f, 88.73f, -87.4f, -103.9f, -104.0f, 0.625f, -0.625f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()})
    v.push_back(f);
  return v;
}

float ref_sigmoid(float v) {
  return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(v))));
}

}  // namespace

TEST(SimdKernels, MathWithinUlpsOfTheCLibrary) {
  const std::vector<float> x = float_sweep();
  std::vector<float> y(x.size());
  struct Case {
    simd::Unary op;
    const char* name;
    float (*ref)(float);
    int64_t max_ulp;
  };
  const Case cases[] = {
      {simd::kExp, "exp", [](float v) { return std::exp(v); }, 1},
      {simd::kLog, "log", [](float v) { return std::log(v); }, 1},
      {simd::kTanh, "tanh", [](float v) { return std::tanh(v); }, 2},
      {simd::kSigmoid, "sigmoid", ref_sigmoid, 2},
  };
  for (const simd::Table* t : runnable_tables()) {
    for (const Case& c : cases) {
      t->unary[c.op](y.data(), x.data(), static_cast<int64_t>(x.size()));
      int64_t worst = 0;
      float worst_x = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const int64_t d = ulp_distance(y[i], c.ref(x[i]));
        if (d > worst) {
          worst = d;
          worst_x = x[i];
        }
      }
      EXPECT_LE(worst, c.max_ulp) << t->isa << " " << c.name << " at x = " << worst_x;
    }
  }
}

TEST(SimdKernels, ArithmeticAndReductionsMatchScalarCode) {
  Generator g(7);
  for (int64_t n : {0, 1, 5, 15, 16, 17, 31, 33, 64, 100, 1000}) {
    Tensor xa = uniform({std::max<int64_t>(n, 1)}, -2, 2, Float32, Device::cpu(), &g);
    Tensor ya = uniform({std::max<int64_t>(n, 1)}, 0.5, 2, Float32, Device::cpu(), &g);
    const float* x = xa.data<float>();
    const float* y = ya.data<float>();
    std::vector<float> o(std::max<int64_t>(n, 1));
    for (const simd::Table* t : runnable_tables()) {
      t->binary_vv[simd::kAdd](o.data(), x, y, n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(o[i], x[i] + y[i]) << t->isa;
      t->binary_vs[simd::kDiv](o.data(), x, 3.0f, n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(o[i], x[i] / 3.0f) << t->isa;
      t->binary_sv[simd::kSub](o.data(), 1.5f, y, n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(o[i], 1.5f - y[i]) << t->isa;
      t->unary[simd::kRelu](o.data(), x, n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(o[i], x[i] > 0 ? x[i] : 0.0f) << t->isa;
      double s = 0;
      float mx = -INFINITY;
      for (int64_t i = 0; i < n; ++i) {
        s += x[i];
        mx = std::max(mx, x[i]);
      }
      EXPECT_NEAR(t->sum(x, n), s, 1e-5 * std::max<double>(1, n)) << t->isa << " n=" << n;
      if (n > 0) EXPECT_EQ(t->max(x, n), mx) << t->isa;
    }
  }
  // NaN propagates through max/min and the NaN-aware binary ops.
  std::vector<float> v(40, 1.0f);
  v[37] = NAN;
  for (const simd::Table* t : runnable_tables()) {
    EXPECT_TRUE(std::isnan(t->max(v.data(), 40))) << t->isa;
    EXPECT_TRUE(std::isnan(t->min(v.data(), 40))) << t->isa;
    std::vector<float> o(40);
    t->binary_vs[simd::kMax](o.data(), v.data(), 2.0f, 40);
    EXPECT_TRUE(std::isnan(o[37])) << t->isa;
    EXPECT_EQ(o[0], 2.0f) << t->isa;
  }
}

TEST(SimdKernels, FusedSoftmaxMatchesFloat64Composite) {
  Generator g(11);
  for (Shape shape : {Shape{3, 1}, Shape{4, 17}, Shape{128, 1000}, Shape{2, 3, 33}}) {
    Tensor x = normal(shape, 0, 3, Float32, Device::cpu(), &g);
    Tensor x64 = x.astype(Float64);
    for (bool lsm : {false, true}) {
      Tensor y = lsm ? log_softmax(x, -1) : softmax(x, -1);
      Tensor ref = lsm ? log_softmax(x64, -1) : softmax(x64, -1);  // float64: the composite
      EXPECT_TRUE(allclose(y.astype(Float64), ref, 1e-5, 1e-6)) << shape_str(shape) << (lsm ? " log" : "");
      // gradient of sum(w * f(x)) against the float64 composite's
      Tensor w = uniform(shape, -1, 1, Float32, Device::cpu(), &g);
      Tensor xg = x.detach().requires_grad_();
      Tensor x64g = x64.detach().requires_grad_();
      sum(multiply(lsm ? log_softmax(xg, -1) : softmax(xg, -1), w)).backward();
      sum(multiply(lsm ? log_softmax(x64g, -1) : softmax(x64g, -1), w.astype(Float64))).backward();
      EXPECT_TRUE(allclose(xg.grad().astype(Float64), x64g.grad(), 1e-4, 1e-5)) << shape_str(shape);
    }
    // other axes take the composite; both agree
    Tensor y0 = softmax(x, 0);
    EXPECT_TRUE(allclose(y0.astype(Float64), softmax(x64, 0), 1e-5, 1e-6));
  }
}

TEST(SimdKernels, ReductionsMatchFloat64) {
  Generator g(3);
  for (Shape shape : {Shape{1024, 1024}, Shape{7, 300}, Shape{300, 7}, Shape{5, 33, 17}}) {
    Tensor x = uniform(shape, -1, 1, Float32, Device::cpu(), &g);
    Tensor x64 = x.astype(Float64);
    for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis)
      EXPECT_TRUE(allclose(sum(x, {axis}).astype(Float64), sum(x64, {axis}), 1e-5, 1e-4))
          << shape_str(shape) << " axis " << axis;
    EXPECT_TRUE(allclose(max(x, {-1}).astype(Float64), max(x64, {-1})));
  }
}

// ---------------------------------------------------------------- every kernel, every build
// Each runnable table against scalar / float64 loops, at lengths around its vector width
// (the body, the tails and the padded last blocks) and with NaN, +-inf and -0 in the inputs.

namespace {

std::vector<int64_t> lengths(int w) {
  std::vector<int64_t> n = {0, 1, 2, w - 1, w, w + 1, 2 * w - 1, 2 * w + 1, 4 * w - 1, 4 * w + 1, 8 * w + 3, 37, 101, 1000};
  std::sort(n.begin(), n.end());
  n.erase(std::unique(n.begin(), n.end()), n.end());
  return n;
}

// Sprinkles special values over v: NaN, +-inf, +-0 at positions that differ with the seed
// (the first and the last element included when v is long enough).
void add_specials(std::vector<float>& v, uint32_t seed) {
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f};
  if (v.empty()) return;
  std::mt19937 rng(seed);
  for (size_t k = 0; k < 5 && k < v.size(); ++k) v[rng() % v.size()] = specials[(k + seed) % 5];
  v.back() = specials[seed % 5];
}

// Equal bit for bit, or both NaN.
bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, 4) == 0;
}

float max_nan(float a, float b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
float min_nan(float a, float b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }

float scalar_binary(simd::Binary op, float a, float b) {
  switch (op) {
    case simd::kAdd: return a + b;
    case simd::kSub: return a - b;
    case simd::kMul: return a * b;
    case simd::kDiv: return a / b;
    case simd::kMax: return max_nan(a, b);
    case simd::kMin: return min_nan(a, b);
    case simd::kReluGrad: return b <= 0 ? 0.0f : a;
    default: return NAN;
  }
}

}  // namespace

TEST(SimdKernels, EveryBuildHasItsVectorWidth) {
  for (const simd::Table* t : runnable_tables()) {
    const std::string isa = t->isa;
    EXPECT_EQ(t->lanes, isa == "avx512" ? 16 : isa == "avx2" ? 8 : 4) << isa;
  }
}

TEST(SimdKernels, BinaryOpsEqualScalarArithmeticAtEveryLength) {
  for (const simd::Table* t : runnable_tables()) {
    for (int64_t n : lengths(t->lanes)) {
      std::vector<float> x = random_floats(n, 1 + n), y = random_floats(n, 2 + n, 0.5f, 2);
      add_specials(x, static_cast<uint32_t>(n));
      add_specials(y, static_cast<uint32_t>(n + 3));
      // a guard after the end: no kernel writes past n
      std::vector<float> o(n + 1, 7.0f);
      for (int op = 0; op < simd::kNumBinary; ++op) {
        const auto b = static_cast<simd::Binary>(op);
        t->binary_vv[op](o.data(), x.data(), y.data(), n);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_TRUE(same(o[i], scalar_binary(b, x[i], y[i]))) << t->isa << " op " << op << " n=" << n << " i=" << i;
        // -0.0: a scalar broadcast as an add to +0.0 made -0.0 + -0.0 come out +0.0
        for (float s : {1.5f, NAN, -1.0f, -0.0f}) {
          t->binary_vs[op](o.data(), x.data(), s, n);
          for (int64_t i = 0; i < n; ++i)
            ASSERT_TRUE(same(o[i], scalar_binary(b, x[i], s))) << t->isa << " vs op " << op << " n=" << n << " i=" << i;
          t->binary_sv[op](o.data(), s, y.data(), n);
          for (int64_t i = 0; i < n; ++i)
            ASSERT_TRUE(same(o[i], scalar_binary(b, s, y[i]))) << t->isa << " sv op " << op << " n=" << n << " i=" << i;
        }
        ASSERT_EQ(o[n], 7.0f) << t->isa << " wrote past the end, op " << op << " n=" << n;
      }
      // relu's backward where the second operand has negative values too (x has)
      t->binary_vv[simd::kReluGrad](o.data(), y.data(), x.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_TRUE(same(o[i], x[i] <= 0 ? 0.0f : y[i])) << t->isa << " relu grad n=" << n << " i=" << i;
      // in place: o == x
      std::vector<float> z = x;
      t->binary_vv[simd::kMul](z.data(), z.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same(z[i], x[i] * y[i])) << t->isa << " in place n=" << n;
    }
  }
}

TEST(SimdKernels, UnaryOpsAtEveryLength) {
  struct Exact {
    simd::Unary op;
    float (*ref)(float);
  };
  const Exact exact[] = {
      {simd::kNeg, [](float v) { return -v; }},
      {simd::kAbs, [](float v) { return std::fabs(v); }},
      {simd::kSquare, [](float v) { return v * v; }},
      {simd::kRelu, [](float v) { return v > 0 || v != v ? v : 0.0f; }},  // NaN propagates, relu(-0) = +0
      {simd::kSqrt, [](float v) { return std::sqrt(v); }},
  };
  struct Approx {
    simd::Unary op;
    float (*ref)(float);
    int64_t max_ulp;
  };
  const Approx approx[] = {
      {simd::kExp, [](float v) { return std::exp(v); }, 1},
      {simd::kLog, [](float v) { return std::log(v); }, 1},
      {simd::kTanh, [](float v) { return std::tanh(v); }, 2},
      {simd::kSigmoid, ref_sigmoid, 2},
  };
  for (const simd::Table* t : runnable_tables()) {
    for (int64_t n : lengths(t->lanes)) {
      std::vector<float> x = random_floats(n, 10 + n, -20, 20);
      add_specials(x, static_cast<uint32_t>(n));
      std::vector<float> o(n + 1, 7.0f);
      for (const Exact& c : exact) {
        t->unary[c.op](o.data(), x.data(), n);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_TRUE(same(o[i], c.ref(x[i]))) << t->isa << " op " << c.op << " n=" << n << " x=" << x[i];
        ASSERT_EQ(o[n], 7.0f) << t->isa << " op " << c.op << " wrote past the end, n=" << n;
      }
      for (const Approx& c : approx) {
        t->unary[c.op](o.data(), x.data(), n);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_LE(ulp_distance(o[i], c.ref(x[i])), c.max_ulp) << t->isa << " op " << c.op << " n=" << n << " x=" << x[i];
        ASSERT_EQ(o[n], 7.0f) << t->isa << " op " << c.op << " wrote past the end, n=" << n;
      }
    }
  }
}

TEST(SimdKernels, SumMaxMinAtEveryLengthWithNaNAnywhere) {
  for (const simd::Table* t : runnable_tables()) {
    for (int64_t n : lengths(t->lanes)) {
      const std::vector<float> x = random_floats(n, 20 + n);
      double s = 0;
      float mx = -INFINITY, mn = INFINITY;
      for (float v : x) {
        s += v;
        mx = std::max(mx, v);
        mn = std::min(mn, v);
      }
      EXPECT_NEAR(t->sum(x.data(), n), s, 1e-6 * std::max<double>(1, n)) << t->isa << " n=" << n;
      if (n == 0) continue;
      EXPECT_EQ(t->max(x.data(), n), mx) << t->isa << " n=" << n;
      EXPECT_EQ(t->min(x.data(), n), mn) << t->isa << " n=" << n;
      // a NaN at any position (body, tail) wins; an infinity is an ordinary extremum
      for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
        std::vector<float> v = x;
        v[at] = NAN;
        EXPECT_TRUE(std::isnan(t->max(v.data(), n))) << t->isa << " n=" << n << " NaN at " << at;
        EXPECT_TRUE(std::isnan(t->min(v.data(), n))) << t->isa << " n=" << n << " NaN at " << at;
        EXPECT_TRUE(std::isnan(t->sum(v.data(), n))) << t->isa << " n=" << n << " NaN at " << at;
        v[at] = INFINITY;
        EXPECT_EQ(t->max(v.data(), n), INFINITY) << t->isa << " n=" << n;
        v[at] = -INFINITY;
        EXPECT_EQ(t->min(v.data(), n), -INFINITY) << t->isa << " n=" << n;
      }
      const std::vector<float> all_ninf(n, -INFINITY);
      EXPECT_EQ(t->max(all_ninf.data(), n), -INFINITY) << t->isa << " n=" << n;
    }
  }
}

TEST(SimdKernels, SumRowsIntoAddsColumns) {
  for (const simd::Table* t : runnable_tables()) {
    for (int64_t n : lengths(t->lanes)) {
      for (int64_t rows : {0, 1, 3, 4, 5, 8, 9, 13, 17}) {
        const int64_t ld = n + 3;
        const std::vector<float> x = random_floats(rows * ld, static_cast<uint32_t>(30 + n + rows));
        std::vector<float> acc = random_floats(n + 1, 31);
        const std::vector<float> acc0 = acc;
        t->sum_rows_into(acc.data(), x.data(), rows, ld, n);
        for (int64_t j = 0; j < n; ++j) {
          double s = acc0[j];
          for (int64_t r = 0; r < rows; ++r) s += x[r * ld + j];
          ASSERT_NEAR(acc[j], s, 1e-5 * (rows + 1)) << t->isa << " n=" << n << " rows=" << rows << " j=" << j;
        }
        ASSERT_EQ(acc[n], acc0[n]) << t->isa << " wrote past the end";
      }
    }
  }
}

// The blocked max pooling's kernel: the running max of rows (a NaN wins and stays; of equal
// values, +0 and -0 included, the first is kept), bitwise the scalar rule, body and tail.
TEST(SimdKernels, MaxRowsIntoKeepsTheFirstMaxAndNaN) {
  auto take = [](float a, float v) { return (v > a || v != v) ? v : a; };
  for (const simd::Table* t : runnable_tables()) {
    for (int64_t n : lengths(t->lanes)) {
      for (int64_t rows : {0, 1, 3, 7}) {
        const int64_t ld = n + 2;
        std::vector<float> x = random_floats(rows * ld, static_cast<uint32_t>(50 + n + rows), -2, 2);
        std::vector<float> acc = random_floats(n + 1, 51, -2, 2);
        for (int64_t j = 0; j < n; ++j) {
          if (rows > 1 && j % 5 == 1) x[(rows - 1) * ld + j] = NAN;  // a NaN in the last row
          if (rows > 1 && j % 5 == 2) x[j] = NAN, x[ld + j] = 3.0f;  // a NaN, then a larger value
          if (rows > 0 && j % 5 == 3) acc[j] = 0.0f, x[j] = -0.0f;   // equal: acc's +0 stays
          if (rows > 1 && j % 5 == 4) acc[j] = -5.0f, x[j] = -0.0f, x[ld + j] = 0.0f;  // first of equals
        }
        std::vector<float> want = acc;
        for (int64_t j = 0; j < n; ++j)
          for (int64_t r = 0; r < rows; ++r) want[j] = take(want[j], x[r * ld + j]);
        t->max_rows_into(acc.data(), x.data(), rows, ld, n);
        for (int64_t j = 0; j <= n; ++j) {
          if (std::isnan(want[j])) {
            ASSERT_TRUE(std::isnan(acc[j])) << t->isa << " n=" << n << " rows=" << rows << " j=" << j;
          } else {
            ASSERT_EQ(acc[j], want[j]) << t->isa << " n=" << n << " rows=" << rows << " j=" << j;
            ASSERT_EQ(std::signbit(acc[j]), std::signbit(want[j])) << t->isa << " n=" << n << " j=" << j;
          }
        }
      }
    }
  }
}

TEST(SimdKernels, SoftmaxRowsAtEveryLength) {
  for (const simd::Table* t : runnable_tables()) {
    for (int64_t n : lengths(t->lanes)) {
      if (n == 0) continue;
      const int64_t rows = 3;
      std::vector<float> x = random_floats(rows * n, static_cast<uint32_t>(40 + n), -10, 10);
      if (n > 2) {
        x[n + n / 2] = -INFINITY;  // row 1: a masked entry
        x[2 * n + n - 1] = NAN;    // row 2: a NaN in the last (tail) position
      }
      for (bool log : {false, true}) {
        std::vector<float> y(rows * n + 1, 7.0f);
        t->softmax_rows(y.data(), x.data(), rows, n, log);
        for (int64_t r = 0; r < rows; ++r) {
          const float* xr = x.data() + r * n;
          double m = -INFINITY, s = 0;
          bool nan = false;
          for (int64_t i = 0; i < n; ++i) {
            nan |= std::isnan(xr[i]);
            m = std::max<double>(m, xr[i]);
          }
          for (int64_t i = 0; i < n; ++i) s += std::exp(xr[i] - m);
          for (int64_t i = 0; i < n; ++i) {
            const float got = y[r * n + i];
            if (nan) {
              ASSERT_TRUE(std::isnan(got)) << t->isa << " n=" << n << " row " << r;
              continue;
            }
            const double want = log ? (xr[i] - m) - std::log(s) : std::exp(xr[i] - m) / s;
            if (std::isinf(want)) {
              ASSERT_EQ(got, want) << t->isa << " n=" << n;
              continue;
            }
            ASSERT_NEAR(got, want, 1e-6 + 1e-5 * std::fabs(want)) << t->isa << " n=" << n << (log ? " log" : "");
          }
        }
        ASSERT_EQ(y[rows * n], 7.0f) << t->isa << " wrote past the end";
      }
    }
  }
}

namespace {

// The max-pooling rules, written out: windows in scan order (kernel row, then column); a
// larger value or a NaN takes over; the index starts at the window's first in-plane
// position (-1 when it has none) and the value at -inf.
void ref_max_pool(std::vector<float>& y, std::vector<int64_t>& idx, const std::vector<float>& x,
                  const simd::PoolGeometry& g) {
  y.assign(g.ho * g.wo, 0);
  idx.assign(g.ho * g.wo, 0);
  for (int64_t oh = 0; oh < g.ho; ++oh)
    for (int64_t ow = 0; ow < g.wo; ++ow) {
      float best = -INFINITY;
      int64_t arg = -1;
      for (int64_t ki = 0; ki < g.kh; ++ki)
        for (int64_t kj = 0; kj < g.kw; ++kj) {
          const int64_t ih = oh * g.sh - g.ph + ki * g.dh, iw = ow * g.sw - g.pw + kj * g.dw;
          if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
          const int64_t at = ih * g.w + iw;
          const float v = x[at];
          if (arg < 0) arg = at;
          if (v > best || v != v) {
            best = v;
            arg = at;
          }
        }
      y[oh * g.wo + ow] = best;
      idx[oh * g.wo + ow] = arg;
    }
}

std::vector<float> pool_input(int64_t n, uint32_t seed) {
  // few distinct values: ties; and NaN / -inf here and there
  std::mt19937 rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& f : x) {
    const uint32_t r = rng() % 40;
    f = r == 0 ? NAN : r == 1 ? -INFINITY : static_cast<float>(static_cast<int>(r % 7) - 3);
  }
  return x;
}

}  // namespace

TEST(SimdKernels, MaxPoolKernelsFollowTheScanOrderRules) {
  for (const simd::Table* t : runnable_tables()) {
    const int64_t W = t->lanes;
    // 2x2 / stride 2: output widths around the vector width (the kernel's blocks)
    for (int64_t wo : {int64_t{1}, W - 1, W, W + 1, 2 * W + 3}) {
      if (wo < 1) continue;
      for (int64_t extra_w : {0, 1}) {
        const int64_t ho = 3, h = 2 * ho + 1, w = 2 * wo + extra_w;
        const std::vector<float> x = pool_input(h * w, static_cast<uint32_t>(wo * 7 + extra_w));
        const simd::PoolGeometry g{h, w, ho, wo, 2, 2, 2, 2, 0, 0, 1, 1};
        std::vector<float> want;
        std::vector<int64_t> want_idx;
        ref_max_pool(want, want_idx, x, g);
        std::vector<float> y(ho * wo + 1, 7.0f);
        std::vector<int64_t> i64(ho * wo + 1, 7);
        std::vector<int32_t> i32(ho * wo + 1, 7);
        t->max_pool_2x2(y.data(), {i64.data(), nullptr}, x.data(), ho, w, wo);
        t->max_pool_2x2(y.data(), {nullptr, i32.data()}, x.data(), ho, w, wo);
        for (int64_t k = 0; k < ho * wo; ++k) {
          ASSERT_TRUE(same(y[k], want[k])) << t->isa << " 2x2 wo=" << wo << " k=" << k;
          ASSERT_EQ(i64[k], want_idx[k]) << t->isa << " 2x2 wo=" << wo << " k=" << k;
          ASSERT_EQ(i32[k], want_idx[k]) << t->isa << " 2x2 wo=" << wo << " k=" << k;
        }
        std::vector<float> y2(ho * wo + 1, 7.0f);
        t->max_pool_2x2(y2.data(), {}, x.data(), ho, w, wo);
        for (int64_t k = 0; k < ho * wo; ++k) ASSERT_TRUE(same(y2[k], want[k])) << t->isa << " 2x2 no index";
        ASSERT_EQ(y[ho * wo], 7.0f);
        ASSERT_EQ(y2[ho * wo], 7.0f);
        ASSERT_EQ(i64[ho * wo], 7);
        ASSERT_EQ(i32[ho * wo], 7);
      }
    }
    // any geometry: strides 1, 2 (contiguous loads) and 3 (gathers), padding, dilation
    struct G {
      int64_t h, w, k, s, p, d;
    };
    for (const G& c : std::vector<G>{{5, 1, 1, 1, 0, 1}, {6, W - 1, 3, 1, 1, 1}, {7, W + 1, 2, 2, 1, 1},
                                     {9, 2 * W + 5, 3, 2, 1, 2}, {8, 3 * W + 1, 3, 3, 1, 1}, {6, W + 3, 2, 1, 1, 3}}) {
      if (c.w < 1) continue;
      const int64_t ho = (c.h + 2 * c.p - c.d * (c.k - 1) - 1) / c.s + 1, wo = (c.w + 2 * c.p - c.d * (c.k - 1) - 1) / c.s + 1;
      if (ho < 1 || wo < 1) continue;
      const simd::PoolGeometry g{c.h, c.w, ho, wo, c.k, c.k, c.s, c.s, c.p, c.p, c.d, c.d};
      const std::vector<float> x = pool_input(c.h * c.w, static_cast<uint32_t>(c.w * 13 + c.k));
      std::vector<float> want;
      std::vector<int64_t> want_idx;
      ref_max_pool(want, want_idx, x, g);
      std::vector<float> scratch(simd::pool_scratch_size(g));
      std::vector<float> y(ho * wo + 1, 7.0f), y2(ho * wo + 1, 7.0f);
      std::vector<int64_t> i64(ho * wo + 1, 7);
      std::vector<int32_t> i32(ho * wo + 1, 7);
      t->max_pool_any(y.data(), {i64.data(), nullptr}, x.data(), g, scratch.data());
      t->max_pool_any(y.data(), {nullptr, i32.data()}, x.data(), g, scratch.data());
      t->max_pool_any(y2.data(), {}, x.data(), g, scratch.data());
      const std::string what = std::string(t->isa) + " h" + std::to_string(c.h) + " w" + std::to_string(c.w) + " k" +
                               std::to_string(c.k) + " s" + std::to_string(c.s) + " p" + std::to_string(c.p) + " d" +
                               std::to_string(c.d);
      for (int64_t k = 0; k < ho * wo; ++k) {
        ASSERT_TRUE(same(y[k], want[k])) << what << " k=" << k;
        ASSERT_TRUE(same(y2[k], want[k])) << what << " (no index) k=" << k;
        ASSERT_EQ(i64[k], want_idx[k]) << what << " k=" << k;
        ASSERT_EQ(i32[k], want_idx[k]) << what << " k=" << k;
      }
      ASSERT_EQ(y[ho * wo], 7.0f) << what;
      ASSERT_EQ(y2[ho * wo], 7.0f) << what;
      ASSERT_EQ(i64[ho * wo], 7) << what;
      ASSERT_EQ(i32[ho * wo], 7) << what;
    }
  }
}

TEST(SimdKernels, LayerNormAndBatchNormKernelsMatchFloat64) {
  for (const simd::Table* t : runnable_tables()) {
    for (int64_t n : lengths(t->lanes)) {
      if (n == 0) continue;
      const int64_t rows = 3;
      const std::vector<float> x = random_floats(rows * n, static_cast<uint32_t>(50 + n), 3, 5);  // an offset
      const std::vector<float> w = random_floats(n, 51), b = random_floats(n, 52), g = random_floats(rows * n, 53);
      std::vector<float> y(rows * n + 1, 7.0f), mean(rows), rstd(rows);
      t->layer_norm_rows(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, n, 1e-5);
      std::vector<float> gx(rows * n + 1, 7.0f), gw(n + 1, 0.0f), gb(n + 1, 0.0f);
      t->layer_norm_backward_rows(gx.data(), gw.data(), gb.data(), g.data(), x.data(), mean.data(), rstd.data(), w.data(),
                                  rows, n);
      std::vector<double> gw_ref(n, 0.0), gb_ref(n, 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x.data() + r * n;
        const float* gr = g.data() + r * n;
        double m = 0, v = 0;
        for (int64_t i = 0; i < n; ++i) m += xr[i];
        m /= n;
        for (int64_t i = 0; i < n; ++i) v += (xr[i] - m) * (xr[i] - m);
        v /= n;
        const double rs = 1 / std::sqrt(v + 1e-5);
        EXPECT_NEAR(mean[r], m, 1e-5) << t->isa << " n=" << n;
        EXPECT_NEAR(rstd[r], rs, 1e-4 * rs) << t->isa << " n=" << n;
        double mgh = 0, mghx = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double xh = (xr[i] - m) * rs, gh = static_cast<double>(gr[i]) * w[i];
          ASSERT_NEAR(y[r * n + i], xh * w[i] + b[i], 2e-4) << t->isa << " n=" << n << " i=" << i;
          mgh += gh / n;
          mghx += gh * xh / n;
          gw_ref[i] += gr[i] * xh;
          gb_ref[i] += gr[i];
        }
        for (int64_t i = 0; i < n; ++i) {
          const double xh = (xr[i] - m) * rs, gh = static_cast<double>(gr[i]) * w[i];
          ASSERT_NEAR(gx[r * n + i], rs * (gh - mgh - xh * mghx), 2e-3) << t->isa << " n=" << n << " i=" << i;
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(gw[i], gw_ref[i], 1e-3) << t->isa << " n=" << n;
        ASSERT_NEAR(gb[i], gb_ref[i], 1e-5) << t->isa << " n=" << n;
      }
      EXPECT_EQ(y[rows * n], 7.0f);
      EXPECT_EQ(gx[rows * n], 7.0f);
      EXPECT_EQ(gw[n], 0.0f);
      EXPECT_EQ(gb[n], 0.0f);

      // batch norm: sums of x - m, (x - m)^2, g and g (x - m), accumulated into s
      const float m = 4.0f;
      double s[2] = {1, 2}, sg[2] = {3, 4}, r1 = 1, r2 = 2, q1 = 3, q2 = 4;
      t->centred_sums(x.data(), n, m, s);
      t->grad_sums(x.data(), g.data(), n, m, sg);
      for (int64_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(x[i]) - m;
        r1 += d;
        r2 += d * d;
        q1 += g[i];
        q2 += g[i] * d;
      }
      EXPECT_NEAR(s[0], r1, 1e-5 * n) << t->isa << " n=" << n;
      EXPECT_NEAR(s[1], r2, 1e-5 * n) << t->isa << " n=" << n;
      EXPECT_NEAR(sg[0], q1, 1e-5 * n) << t->isa << " n=" << n;
      EXPECT_NEAR(sg[1], q2, 1e-5 * n) << t->isa << " n=" << n;

      // batch norm's output and input-gradient passes, against float64 (a sentinel past the end)
      std::vector<float> bn_y(n + 1, 7.0f), bn_gx(n + 1, 7.0f);
      const float a = 1.7f, shift = -0.3f, k1 = 0.9f, k2 = 0.05f, k3 = 0.02f;
      t->scale_shift(bn_y.data(), x.data(), n, a, shift);
      t->batch_norm_input_grad(bn_gx.data(), g.data(), x.data(), n, k1, k2, m, k3);
      for (int64_t i = 0; i < n; ++i) {
        const double xi = x[i], gi = g[i];
        ASSERT_NEAR(bn_y[i], xi * a + shift, 1e-6 * (std::fabs(xi * a) + 1)) << t->isa << " n=" << n << " i=" << i;
        ASSERT_NEAR(bn_gx[i], gi * k1 - k2 - (xi - m) * k3, 1e-6 * (std::fabs(gi) + std::fabs(xi) + 1))
            << t->isa << " n=" << n << " i=" << i;
      }
      EXPECT_EQ(bn_y[n], 7.0f);
      EXPECT_EQ(bn_gx[n], 7.0f);
    }
  }
}

TEST(SimdKernels, AdamStepMatchesFloat64AtEveryLevelAndLength) {
  // Adam with L2 decay and AMSGrad, and AdamW's decoupled decay without: every option the
  // kernel specializes on, at lengths around the vector width (the tail included).
  struct Case {
    float decay, l2;
    bool ams;
  };
  for (const simd::Table* t : runnable_tables()) {
    for (const Case& c : {Case{1.0f, 0.1f, true}, Case{0.999f, 0.0f, false}, Case{1.0f, 0.0f, false}}) {
      for (int64_t n : lengths(t->lanes)) {
        std::vector<float> p = random_floats(n + 1, static_cast<uint32_t>(60 + n)), g = random_floats(n + 1, 61);
        std::vector<float> m = random_floats(n + 1, 62), v(n + 1), vmax(n + 1);
        const std::vector<float> v0 = random_floats(n + 1, 63);
        for (int64_t i = 0; i <= n; ++i) v[i] = v0[i] * v0[i], vmax[i] = v[i] * (i % 2 ? 0.5f : 2.0f);
        const std::vector<float> p0 = p, m0 = m, vm0 = vmax;
        const std::vector<float> vin = v;
        const simd::AdamArgs a{c.decay, c.l2, 0.9f, 0.1f, 0.999f, 0.001f, -0.01f / 0.19f, std::sqrt(1 - 0.999f * 0.999f), 1e-8f};
        t->adam(p.data(), g.data(), m.data(), v.data(), c.ams ? vmax.data() : nullptr, n, a);
        for (int64_t i = 0; i < n; ++i) {
          const double pi = static_cast<double>(p0[i]) * c.decay, gi = g[i] + static_cast<double>(c.l2) * pi;
          const double mi = m0[i] * 0.9 + 0.1 * gi, vi = vin[i] * 0.999 + 0.001 * gi * gi;
          const double vv = c.ams ? std::max<double>(vm0[i], vi) : vi;
          const double pe = pi + (a.neg_step * mi) / (std::sqrt(vv) / a.bc2 + 1e-8);
          ASSERT_NEAR(m[i], mi, 1e-6) << t->isa << " n=" << n << " i=" << i;
          ASSERT_NEAR(v[i], vi, 1e-6) << t->isa << " n=" << n << " i=" << i;
          if (c.ams) ASSERT_NEAR(vmax[i], vv, 1e-6) << t->isa << " n=" << n << " i=" << i;
          ASSERT_NEAR(p[i], pe, 1e-5) << t->isa << " n=" << n << " i=" << i;
        }
        // nothing past n is touched
        EXPECT_EQ(p[n], p0[n]);
        EXPECT_EQ(m[n], m0[n]);
        EXPECT_EQ(v[n], vin[n]);
        EXPECT_EQ(vmax[n], vm0[n]);
      }
    }
  }
}

// Winograd F(2x2, 3x3) and F(4x4, 3x3) through both transforms at every ISA level equal a
// direct 3x3 correlation of the patch (one input and one output channel per lane: the products
// are lane-wise, U = G g G^T of one filter), with padding positions, bias, residual and ReLU, and
// partial tiles (positions outside the image untouched), for block widths around the lane count.
TEST(SimdKernels, WinogradTransformsComputeA3x3Correlation) {
  const double G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  const double G4[6][3] = {{1, 0, 0},          {-1.0 / 3, 1.0 / 3, -1.0 / 3}, {1.0 / 3, 1.0 / 3, 1.0 / 3},
                           {-16.0 / 15, -8.0 / 15, -4.0 / 15}, {1.0 / 15, -2.0 / 15, 4.0 / 15}, {0, 0, 1}};
  for (int tile : {2, 4}) {
    const int a = tile + 2, np = a * a, no = tile * tile;
    const double(*G)[3] = tile == 2 ? G2 : G4;
    for (const simd::Table* t : runnable_tables())
      for (int64_t b : {int64_t{1}, int64_t{t->lanes}, int64_t{t->lanes + 3}}) {
        const std::string what = std::string(t->isa) + " F(" + std::to_string(tile) + "x" + std::to_string(tile) + ") b=" + std::to_string(b);
        std::vector<float> patch = random_floats(np * b, static_cast<uint32_t>(70 + b), -1, 1);
        std::vector<float> filt = random_floats(9 * b, static_cast<uint32_t>(71 + b), -1, 1);
        std::vector<float> bias = random_floats(b, 72, -1, 1);
        std::vector<const float*> d(static_cast<size_t>(np));
        for (int p = 0; p < np; ++p) d[p] = p == 5 || p == 12 || p == np - 2 ? nullptr : patch.data() + p * b;  // padded
        std::vector<float> v(np * b), m(np * b);
        (tile == 2 ? t->winograd_f2_input : t->winograd_f4_input)(v.data(), b, d.data(), b);
        for (int64_t l = 0; l < b; ++l) {  // U = G g G^T per lane, then the lane-wise product
          double gg[6][3];
          for (int r = 0; r < a; ++r)
            for (int q = 0; q < 3; ++q)
              gg[r][q] = G[r][0] * filt[(0 * 3 + q) * b + l] + G[r][1] * filt[(1 * 3 + q) * b + l] +
                         G[r][2] * filt[(2 * 3 + q) * b + l];
          for (int r = 0; r < a; ++r)
            for (int q = 0; q < a; ++q)
              m[(r * a + q) * b + l] =
                  static_cast<float>(v[(r * a + q) * b + l] * (gg[r][0] * G[q][0] + gg[r][1] * G[q][1] + gg[r][2] * G[q][2]));
        }
        for (bool sum : {false, true}) {
          std::vector<float> out = random_floats(no * b, 73, -1, 1), before = out;
          std::vector<float*> o(static_cast<size_t>(no));
          for (int i = 0; i < no; ++i) o[i] = i == no - 1 ? nullptr : out.data() + i * b;  // the last outside
          (tile == 2 ? t->winograd_f2_output : t->winograd_f4_output)(o.data(), m.data(), b, bias.data(), sum, true, b);
          for (int64_t l = 0; l < b; ++l)
            for (int r = 0; r < tile; ++r)
              for (int q = 0; q < tile; ++q) {
                double y = bias[l] + (sum ? before[(r * tile + q) * b + l] : 0.0);
                for (int i = 0; i < 3; ++i)
                  for (int j = 0; j < 3; ++j) {
                    const int p = (r + i) * a + (q + j);
                    y += (d[p] ? patch[p * b + l] : 0.0) * filt[(i * 3 + j) * b + l];
                  }
                y = y > 0 ? y : 0;
                const float got = out[(r * tile + q) * b + l];
                if (r * tile + q == no - 1) {
                  ASSERT_EQ(got, before[(no - 1) * b + l]) << what;  // outside: unchanged
                } else {
                  ASSERT_NEAR(got, y, 1e-5 * (1 + std::abs(y))) << what << " lane " << l << " at " << r << "," << q;
                }
              }
        }
      }
  }
}

TEST(SimdKernels, TransposeAtEveryShapeAndStride) {
  for (const simd::Table* t : runnable_tables()) {
    const int64_t w = t->lanes;
    for (int64_t rows = 0; rows <= 2 * w + 3; ++rows)
      for (int64_t cols = 0; cols <= 2 * w + 3; ++cols) {
        const int64_t lds = cols + 5, ldd = rows + 3;
        std::vector<float> src(static_cast<size_t>(std::max<int64_t>(rows * lds, 1)));
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) + 0.5f;
        // a guard value everywhere: what the transpose must not write stays
        std::vector<float> dst(static_cast<size_t>(std::max<int64_t>(cols * ldd, 1)), -7.0f);
        t->transpose(dst.data(), ldd, src.data(), lds, rows, cols);
        for (int64_t c = 0; c < cols; ++c)
          for (int64_t r = 0; r < ldd; ++r) {
            const float want = r < rows ? src[static_cast<size_t>(r * lds + c)] : -7.0f;
            ASSERT_EQ(dst[static_cast<size_t>(c * ldd + r)], want) << t->isa << " rows " << rows << " cols " << cols << " at " << r << ", " << c;
          }
      }
  }
}
