// The per-ISA float32 vector kernels (src/ops/cpu/simd): every build the CPU can run is
// checked against the C library / scalar arithmetic, and the ops that use them (fused
// softmax, reductions, elementwise) against float64 composites.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "../../src/ops/cpu/simd/simd.h"
#include "loom/loom.h"

using namespace loom;
namespace simd = loom::cpu::simd;

namespace {

std::vector<const simd::Table*> runnable_tables() {
  std::vector<const simd::Table*> ts{&simd::baseline::get()};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) ts.push_back(&simd::avx2::get());
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw"))
    ts.push_back(&simd::avx512::get());
  return ts;
}

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
