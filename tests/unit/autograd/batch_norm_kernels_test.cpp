// The float32 batch-norm kernels (vector sums folded into double, src/ops/cpu/batch_norm.cpp)
// against the float64 path, which the reference suite compares with PyTorch: outputs, running
// statistics and all three gradients, on planes longer than one float run (4096 values) with
// odd tails, on channels far from zero, and the same bits for 1 and 2 threads.
#include <gtest/gtest.h>
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

#include <string>
#include <vector>

using namespace loom;

namespace {

struct Result {
  Tensor y, running_mean, running_var, gx, gw, gb;
};

Result run(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& gy) {
  const int64_t c = x.shape()[1];
  Result r;
  r.running_mean = zeros({c}, x.dtype());
  r.running_var = ones({c}, x.dtype());
  Tensor xl = x.detach().requires_grad_(true), wl = w.detach().requires_grad_(true), bl = b.detach().requires_grad_(true);
  r.y = batch_norm(xl, r.running_mean, r.running_var, wl, bl, true, 0.1, 1e-5);
  backward(r.y, gy);
  r.y = r.y.detach();
  r.gx = xl.grad();
  r.gw = wl.grad();
  r.gb = bl.grad();
  return r;
}

void expect_close(const Tensor& f32, const Tensor& f64, double rtol, double atol, const std::string& what) {
  EXPECT_TRUE(allclose(f32.astype(Float64), f64, rtol, atol)) << what;
}

TEST(BatchNormKernels, Float32EqualsFloat64OnLongPlanesAndLargeMeans) {
  for (double offset : {0.0, 1000.0}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    Generator g(static_cast<uint64_t>(offset) + 1);
    const Shape shape{3, 4, 71, 73};  // 5183 values per plane: a full float run and a tail
    Tensor x64 = randn(shape, Float64, Device::cpu(), &g) * 2.0 + offset;
    Tensor w64 = uniform({4}, 0.5, 1.5, Float64, Device::cpu(), &g), b64 = uniform({4}, -1, 1, Float64, Device::cpu(), &g);
    Tensor gy64 = randn(shape, Float64, Device::cpu(), &g);
    // the float32 input as float64, so that both sides normalise the same numbers
    Tensor x32 = x64.astype(Float32);
    const Result ref = run(x32.astype(Float64), w64, b64, gy64);
    const Result got = run(x32, w64.astype(Float32), b64.astype(Float32), gy64.astype(Float32));
    expect_close(got.y, ref.y, 1e-4, 1e-4, "output");
    expect_close(got.running_mean, ref.running_mean, 1e-6, 1e-4, "running mean");
    expect_close(got.running_var, ref.running_var, 1e-4, 1e-5, "running variance");
    expect_close(got.gx, ref.gx, 1e-3, 1e-4, "input gradient");
    expect_close(got.gw, ref.gw, 1e-3, 1e-2, "weight gradient");
    expect_close(got.gb, ref.gb, 1e-4, 1e-3, "bias gradient");
  }
}

TEST(BatchNormKernels, BitwiseIdenticalForOneAndTwoThreads) {
  const int before = get_num_threads();
  Generator g(5);
  Tensor x = randn({8, 6, 33, 35}, Float32, Device::cpu(), &g), w = ones({6}), b = zeros({6});
  Tensor gy = randn({8, 6, 33, 35}, Float32, Device::cpu(), &g);
  set_num_threads(1);
  const Result one = run(x, w, b, gy);
  set_num_threads(2);
  const Result two = run(x, w, b, gy);
  set_num_threads(before);
  EXPECT_TRUE(array_equal(one.y, two.y));
  EXPECT_TRUE(array_equal(one.running_var, two.running_var));
  EXPECT_TRUE(array_equal(one.gx, two.gx));
  EXPECT_TRUE(array_equal(one.gw, two.gw));
}

}  // namespace
