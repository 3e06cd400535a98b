// The float32 pooling paths (vector max-pool kernels, oneDNN average pooling) against the
// float64 loops, which the reference suite checks against PyTorch: the same values, indices
// and gradients over many geometries, with ties, NaN and -inf in the max-pool inputs.
#include <gtest/gtest.h>
#include <loom/autograd/autograd.h>
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/parallel.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/conv.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/pooling.h>
#include <loom/ops/random.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace loom;

namespace {

struct Geometry {
  Shape shape;
  std::vector<int64_t> k, s, p, d;
  bool ceil;
  std::string str() const {
    auto l = [](const std::vector<int64_t>& v) { return "(" + std::to_string(v[0]) + "," + std::to_string(v[1]) + ")"; };
    return shape_str(shape) + " k" + l(k) + " s" + l(s) + " p" + l(p) + " d" + l(d) + (ceil ? " ceil" : "");
  }
};

// 2x2/2 (the dedicated kernel: widths below, at and above one 16-lane vector, odd sizes) and
// the general kernel (strides 1, 2, 3, padding, dilation, ceil_mode, rectangular windows).
std::vector<Geometry> geometries() {
  return {
      {{2, 3, 28, 28}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
      {{1, 2, 9, 71}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
      {{1, 1, 4, 64}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
      {{1, 2, 7, 33}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, true},
      {{2, 2, 56, 56}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
      {{1, 3, 13, 40}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false},
      {{1, 2, 11, 50}, {3, 2}, {3, 3}, {1, 0}, {1, 1}, true},
      {{1, 2, 12, 37}, {3, 3}, {2, 1}, {1, 1}, {2, 3}, false},
      {{1, 1, 10, 19}, {4, 5}, {1, 2}, {2, 2}, {1, 1}, true},
      {{1, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, false},
      // windows entirely in the padding (index -1, no gradient): rows, then columns
      {{1, 2, 1, 20}, {2, 3}, {1, 1}, {1, 1}, {2, 1}, false},
      {{1, 2, 6, 1}, {3, 2}, {1, 1}, {1, 1}, {1, 2}, false},
  };
}

// Values from a few levels (many ties), with NaN and -inf sprinkled in.
Tensor tricky_input(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  Tensor x = floor(uniform(shape, 0, 4, Float64, Device::cpu(), &g));
  Tensor u = uniform(shape, 0, 1, Float64, Device::cpu(), &g);
  x = where(less(u, full({}, 0.03, Float64)), std::numeric_limits<double>::quiet_NaN(), x);
  x = where(greater(u, full({}, 0.9, Float64)), -std::numeric_limits<double>::infinity(), x);
  return x;
}

bool same_values(const Tensor& a, const Tensor& b) { return allclose(a, b, 0, 0, true); }

TEST(PoolKernels, MaxPoolFloat32EqualsFloat64Loops) {
  uint64_t seed = 1;
  for (const Geometry& g : geometries()) {
    SCOPED_TRACE(g.str());
    Tensor x64 = tricky_input(g.shape, seed++);
    Tensor x32 = x64.astype(Float32);
    auto [y64, i64] = max_pool2d_with_indices(x64, IntList(g.k), IntList(g.s), IntList(g.p), IntList(g.d), g.ceil);
    auto [y32, i32] = max_pool2d_with_indices(x32, IntList(g.k), IntList(g.s), IntList(g.p), IntList(g.d), g.ceil);
    EXPECT_TRUE(same_values(y32.astype(Float64), y64));
    EXPECT_TRUE(array_equal(i32, i64));
    // the values-only path (no gradient wanted) gives the same values
    EXPECT_TRUE(same_values(max_pool2d(x32, IntList(g.k), IntList(g.s), IntList(g.p), IntList(g.d), g.ceil), y32));
    // gradients follow the indices
    Tensor xa = x32.detach().requires_grad_(true), xb = x64.detach().requires_grad_(true);
    Tensor gy = uniform(y64.shape(), -1, 1, Float64);
    backward(max_pool2d(xa, IntList(g.k), IntList(g.s), IntList(g.p), IntList(g.d), g.ceil), gy.astype(Float32));
    backward(max_pool2d(xb, IntList(g.k), IntList(g.s), IntList(g.p), IntList(g.d), g.ceil), gy);
    EXPECT_TRUE(allclose(xa.grad().astype(Float64), xb.grad(), 1e-6, 1e-6));
  }
}

TEST(PoolKernels, MaxPoolIsTheSameForOneAndTwoThreads) {
  const int before = get_num_threads();
  Tensor x = tricky_input({4, 8, 30, 30}, 7).astype(Float32);
  set_num_threads(1);
  auto [y1, i1] = max_pool2d_with_indices(x, 3, 2, 1);
  set_num_threads(2);
  auto [y2, i2] = max_pool2d_with_indices(x, 3, 2, 1);
  set_num_threads(before);
  EXPECT_TRUE(same_values(y1, y2));
  EXPECT_TRUE(array_equal(i1, i2));
}

TEST(PoolKernels, AvgPoolFloat32EqualsFloat64Loops) {
  uint64_t seed = 100;
  for (const Geometry& g : geometries()) {
    if (g.d[0] != 1 || g.d[1] != 1) continue;  // avg pooling has no dilation
    for (bool count_pad : {true, false}) {
      for (int64_t divisor : {0, 3}) {
        SCOPED_TRACE(g.str() + (count_pad ? " count_include_pad" : "") + " divisor " + std::to_string(divisor));
        Generator gen(seed++);
        Tensor x64 = uniform(g.shape, -2, 2, Float64, Device::cpu(), &gen);
        Tensor xa = x64.astype(Float32).requires_grad_(true), xb = x64.detach().requires_grad_(true);
        Tensor ya = avg_pool2d(xa, IntList(g.k), IntList(g.s), IntList(g.p), g.ceil, count_pad, divisor);
        Tensor yb = avg_pool2d(xb, IntList(g.k), IntList(g.s), IntList(g.p), g.ceil, count_pad, divisor);
        ASSERT_EQ(ya.shape(), yb.shape());
        EXPECT_TRUE(allclose(ya.astype(Float64), yb, 1e-5, 1e-6));
        Tensor gy = uniform(yb.shape(), -1, 1, Float64, Device::cpu(), &gen);
        backward(ya, gy.astype(Float32));
        backward(yb, gy);
        EXPECT_TRUE(allclose(xa.grad().astype(Float64), xb.grad(), 1e-5, 1e-6));
      }
    }
  }
}

}  // namespace
