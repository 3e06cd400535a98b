// The fused layer_norm kernels (src/ops/cpu/layer_norm.cpp; float32 rows in simd::Table):
// values and gradients equal the composite formula written out with Loom ops, rows with a
// large common offset keep their accuracy, and results are bitwise the same for 1 and 2
// threads.
#include <loom/autograd/autograd.h>
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/parallel.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/normalization.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

#include <cmath>
#include <cstring>

#include "unit/common/core_test_util.h"

using namespace loom;

namespace {

struct ThreadCountGuard {
  int saved = get_num_threads();
  ~ThreadCountGuard() { set_num_threads(saved); }
};

// The definition: biased variance over the last axis, then the optional affine.
Tensor composite(const Tensor& x, const Tensor& w, const Tensor& b, double eps = 1e-5) {
  Tensor c = subtract(x, mean(x, {-1}, true));
  Tensor y = multiply(c, rsqrt(mean(square(c), {-1}, true) + eps));
  if (w.defined()) y = multiply(y, w);
  if (b.defined()) y = add(y, b);
  return y;
}

struct Result {
  Tensor y;
  std::vector<Tensor> grads;  // x, then weight and bias when given
};

// y and the gradients for cotangent cot, through `f` (the fused op or the composite).
template <typename F>
Result run(F f, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& cot) {
  std::vector<Tensor> in{x.detach().requires_grad_(true)};
  Tensor wl = w.defined() ? w.detach().requires_grad_(true) : Tensor();
  Tensor bl = b.defined() ? b.detach().requires_grad_(true) : Tensor();
  if (wl.defined()) in.push_back(wl);
  if (bl.defined()) in.push_back(bl);
  Result r;
  r.y = f(in[0], wl, bl);
  r.grads = grad(r.y, in, cot);
  return r;
}

Tensor fused(const Tensor& x, const Tensor& w, const Tensor& b) { return layer_norm(x, {x.shape().back()}, w, b, 1e-5); }

// max |a - b| / (atol + rtol |b|) over all elements (<= 1 is within tolerance)
double worst(const Tensor& a, const Tensor& b, double rtol, double atol) {
  const std::vector<double> va = astype(a, Float64).to_vector<double>(), vb = astype(b, Float64).to_vector<double>();
  EXPECT_EQ(va.size(), vb.size());
  double w = 0;
  for (size_t i = 0; i < va.size() && i < vb.size(); ++i) w = std::max(w, std::abs(va[i] - vb[i]) / (atol + rtol * std::abs(vb[i])));
  return w;
}

template <typename T>
bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const std::vector<T> va = a.to_vector<T>(), vb = b.to_vector<T>();
  return va.size() == vb.size() && std::memcmp(va.data(), vb.data(), va.size() * sizeof(T)) == 0;
}

}  // namespace

TEST(LayerNormKernels, FusedEqualsCompositeFloat32AndFloat64) {
  for (DType dt : {Float32, Float64}) {
    const double rtol = dt == Float32 ? 2e-5 : 1e-12, atol = dt == Float32 ? 2e-6 : 1e-13;
    // 300 columns: full vectors and a tail; 37 rows: a partial block of the weight / bias sums
    Generator g(7);
    Tensor x = normal({37, 300}, 0.5, 2.0, dt, Device::cpu(), &g);
    Tensor w = normal({300}, 1.0, 0.5, dt, Device::cpu(), &g), b = normal({300}, 0.0, 0.5, dt, Device::cpu(), &g);
    Tensor cot = uniform({37, 300}, -1, 1, dt, Device::cpu(), &g);
    for (int mode = 0; mode < 4; ++mode) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " weight " + std::to_string(mode & 1) + " bias " + std::to_string(mode >> 1));
      const Tensor wm = mode & 1 ? w : Tensor(), bm = mode & 2 ? b : Tensor();
      const Result f = run(fused, x, wm, bm, cot);
      const Result c = run([](const Tensor& a, const Tensor& w_, const Tensor& b_) { return composite(a, w_, b_); }, x, wm, bm, cot);
      EXPECT_EQ(f.y.dtype(), dt);
      EXPECT_EQ(f.y.shape(), x.shape());
      EXPECT_LE(worst(f.y, c.y, rtol, atol), 1.0);
      ASSERT_EQ(f.grads.size(), c.grads.size());
      for (size_t k = 0; k < f.grads.size(); ++k) {
        SCOPED_TRACE("gradient " + std::to_string(k));
        EXPECT_EQ(f.grads[k].shape(), c.grads[k].shape());
        EXPECT_EQ(f.grads[k].dtype(), dt);
        // the weight / bias gradients sum 37 rows
        EXPECT_LE(worst(f.grads[k], c.grads[k], k ? 10 * rtol : rtol, k ? 10 * atol : atol), 1.0);
      }
    }
  }
}

TEST(LayerNormKernels, HigherDimensionalInputAndStridedView) {
  // normalised over the last two axes of a transposed (non-contiguous) view
  Generator g(11);
  Tensor base = normal({6, 5, 4}, 0, 1, Float64, Device::cpu(), &g);
  Tensor x = base.transpose({2, 1, 0});  // (4, 5, 6)
  Tensor w = normal({5, 6}, 1, 0.3, Float64, Device::cpu(), &g), b = normal({5, 6}, 0, 0.3, Float64, Device::cpu(), &g);
  Tensor cot = uniform({4, 5, 6}, -1, 1, Float64, Device::cpu(), &g);
  auto f = [](const Tensor& a, const Tensor& w_, const Tensor& b_) { return layer_norm(a, {5, 6}, w_, b_, 1e-5); };
  auto c = [](const Tensor& a, const Tensor& w_, const Tensor& b_) {
    Tensor m = mean(a, {1, 2}, true);
    Tensor d = subtract(a, m);
    return add(multiply(multiply(d, rsqrt(mean(square(d), {1, 2}, true) + 1e-5)), w_), b_);
  };
  const Result rf = run(f, x, w, b, cot), rc = run(c, x, w, b, cot);
  EXPECT_LE(worst(rf.y, rc.y, 1e-12, 1e-13), 1.0);
  for (size_t k = 0; k < 3; ++k) EXPECT_LE(worst(rf.grads[k], rc.grads[k], 1e-11, 1e-12), 1.0) << "gradient " << k;
}

TEST(LayerNormKernels, RowsWithALargeOffsetKeepFloat32Accuracy) {
  // values 1e4 + N(0, 1): the float32 kernel against the float64 composite on the same values
  Generator g(3);
  Tensor x = normal({16, 512}, 0, 1, Float32, Device::cpu(), &g) + 1e4f;
  Tensor w = normal({512}, 1, 0.5, Float32, Device::cpu(), &g), b = normal({512}, 0, 0.5, Float32, Device::cpu(), &g);
  Tensor cot = uniform({16, 512}, -1, 1, Float32, Device::cpu(), &g);
  const Result f = run(fused, x, w, b, cot);
  const Result ref = run([](const Tensor& a, const Tensor& w_, const Tensor& b_) { return composite(a, w_, b_); },
                      astype(x, Float64), astype(w, Float64), astype(b, Float64), astype(cot, Float64));
  // as close as for rows around 0 (measured: within 0.05 of this tolerance; the float32
  // composite is off by ~2e-3 here, 200 times the tolerance)
  for (size_t k = 0; k < 4; ++k) {
    const Tensor& got = k ? f.grads[k - 1] : f.y;
    const Tensor& want = k ? ref.grads[k - 1] : ref.y;
    EXPECT_LE(worst(got, want, 2e-6, 2e-6), 1.0) << (k ? "gradient " + std::to_string(k - 1) : "values");
  }
}

TEST(LayerNormKernels, OnlyTheWeightWantsAGradient) {
  // x and bias without requires_grad: the kernel skips the input gradient
  Generator g(9);
  Tensor x = normal({40, 70}, 0, 1, Float32, Device::cpu(), &g), b = normal({70}, 0, 1, Float32, Device::cpu(), &g);
  Tensor w = normal({70}, 1, 0.5, Float32, Device::cpu(), &g);
  Tensor cot = uniform({40, 70}, -1, 1, Float32, Device::cpu(), &g);
  Tensor wf = w.detach().requires_grad_(true), wc = w.detach().requires_grad_(true);
  const Tensor gf = grad(layer_norm(x, {70}, wf, b, 1e-5), {wf}, cot)[0];
  const Tensor gc = grad(composite(x, wc, b), {wc}, cot)[0];
  EXPECT_LE(worst(gf, gc, 2e-4, 2e-5), 1.0);
}

TEST(LayerNormKernels, EmptyBatch) {
  Tensor x = zeros({0, 8}), w = ones({8}), b = zeros({8});
  const Result r = run(fused, x, w, b, zeros({0, 8}));
  EXPECT_EQ(r.y.shape(), (Shape{0, 8}));
  EXPECT_EQ(r.grads[0].shape(), (Shape{0, 8}));
  EXPECT_EQ(r.grads[1].to_vector<float>(), std::vector<float>(8, 0.0f));
  EXPECT_EQ(r.grads[2].to_vector<float>(), std::vector<float>(8, 0.0f));
}

TEST(LayerNormKernels, BitwiseIdenticalForOneAndTwoThreads) {
  ThreadCountGuard guard;
  for (DType dt : {Float32, Float64}) {
    SCOPED_TRACE(dtype_name(dt));
    // 301 x 700: split over the pool forward, 10 blocks of weight / bias partial sums backward
    Generator g(5);
    Tensor x = normal({301, 700}, 0, 1, dt, Device::cpu(), &g);
    Tensor w = normal({700}, 1, 0.5, dt, Device::cpu(), &g), b = normal({700}, 0, 0.5, dt, Device::cpu(), &g);
    Tensor cot = uniform({301, 700}, -1, 1, dt, Device::cpu(), &g);
    set_num_threads(1);
    const Result one = run(fused, x, w, b, cot);
    set_num_threads(2);
    const Result two = run(fused, x, w, b, cot);
    const bool f32 = dt == Float32;
    EXPECT_TRUE(f32 ? bitwise_equal<float>(one.y, two.y) : bitwise_equal<double>(one.y, two.y));
    for (size_t k = 0; k < 3; ++k)
      EXPECT_TRUE(f32 ? bitwise_equal<float>(one.grads[k], two.grads[k]) : bitwise_equal<double>(one.grads[k], two.grads[k]))
          << "gradient " << k;
  }
}
