// The float32 oneDNN paths split the batch over Loom's pool (src/ops/cpu/onednn.h): with 1, 2
// and 3 threads and batches that split unevenly (or are smaller than the thread count), the
// convolution (forward, input and weight gradients, bias, groups, the blocked-layout and the
// plain-layout channel counts) and average pooling equal the float64 reference path.
#include <gtest/gtest.h>
#include <loom/autograd/autograd.h>
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/conv.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/pooling.h>
#include <loom/ops/random.h>

#include <string>

#include "unit/common/core_test_util.h"

using namespace loom;

namespace {

using loom_test::ThreadsScope;

struct Grads {
  Tensor y, gx, gw, gb;
};

Grads conv_grads(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& gy, int64_t stride, int64_t pad,
                 int64_t groups) {
  Tensor xl = x.detach().requires_grad_(true), wl = w.detach().requires_grad_(true), bl = b.detach().requires_grad_(true);
  Tensor y = conv2d(xl, wl, bl, stride, pad, 1, groups);
  backward(y, gy);
  return {y.detach(), xl.grad(), wl.grad(), bl.grad()};
}

void expect_close(const Tensor& f32, const Tensor& f64, const char* what) {
  EXPECT_TRUE(allclose(f32.astype(Float64), f64, 1e-4, 1e-4)) << what;
}

TEST(OneDnnSlices, ConvolutionMatchesFloat64ForAnyThreadCountAndBatch) {
  struct Case {
    int64_t n, cin, cout, hw, k, stride, pad, groups;
  };
  const Case cases[] = {
      {5, 16, 32, 9, 3, 1, 1, 1},  // blocked layouts; 5 = 2 + 3 / 1 + 2 + 2
      {7, 3, 8, 10, 3, 2, 1, 1},   // few input channels: plain layouts
      {1, 16, 16, 6, 3, 1, 1, 1},  // a batch smaller than the thread count
      {4, 16, 32, 7, 1, 1, 0, 2},  // 1x1, groups
  };
  for (const Case& c : cases) {
    Generator g(c.n * 100 + c.cin);
    Tensor x = uniform({c.n, c.cin, c.hw, c.hw}, -1, 1, Float64, Device::cpu(), &g);
    Tensor w = uniform({c.cout, c.cin / c.groups, c.k, c.k}, -1, 1, Float64, Device::cpu(), &g);
    Tensor b = uniform({c.cout}, -1, 1, Float64, Device::cpu(), &g);
    const int64_t ho = (c.hw + 2 * c.pad - c.k) / c.stride + 1;
    Tensor gy = uniform({c.n, c.cout, ho, ho}, -1, 1, Float64, Device::cpu(), &g);
    const Grads ref = conv_grads(x, w, b, gy, c.stride, c.pad, c.groups);  // float64: the reference loops
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE("n " + std::to_string(c.n) + " cin " + std::to_string(c.cin) + " threads " + std::to_string(threads));
      ThreadsScope scope(threads);
      const Grads got = conv_grads(x.astype(Float32), w.astype(Float32), b.astype(Float32), gy.astype(Float32), c.stride,
                                   c.pad, c.groups);
      expect_close(got.y, ref.y, "output");
      expect_close(got.gx, ref.gx, "input gradient");
      expect_close(got.gw, ref.gw, "weight gradient");
      expect_close(got.gb, ref.gb, "bias gradient");
    }
  }
}

TEST(OneDnnSlices, AveragePoolingMatchesFloat64ForAnyThreadCountAndBatch) {
  for (int64_t n : {1, 3, 5}) {
    Generator g(n);
    Tensor x = uniform({n, 4, 9, 9}, -1, 1, Float64, Device::cpu(), &g);
    Tensor gy = uniform({n, 4, 5, 5}, -1, 1, Float64, Device::cpu(), &g);
    Tensor xr = x.detach().requires_grad_(true);
    Tensor yr = avg_pool2d(xr, 3, 2, 1);
    backward(yr, gy);
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE("n " + std::to_string(n) + " threads " + std::to_string(threads));
      ThreadsScope scope(threads);
      Tensor xf = x.astype(Float32).requires_grad_(true);
      Tensor yf = avg_pool2d(xf, 3, 2, 1);
      backward(yf, gy.astype(Float32));
      expect_close(yf, yr, "output");
      expect_close(xf.grad(), xr.grad(), "input gradient");
    }
  }
}

}  // namespace
