// The public batch-norm parts (loom/ops/normalization.h) that synchronized batch norm is built
// from: composed without replicas they are batch_norm in training mode; bad operands are
// ValueErrors naming the part.
#include <gtest/gtest.h>
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/normalization.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;

TEST(BatchNormParts, ComposedTheyAreTrainingBatchNorm) {
  for (DType dt : {Float32, Float64}) {
    Generator gen(3);
    const Tensor x = normal({5, 3, 4, 2}, 0, 1, dt, default_device(), &gen) * 2.0 + 1.0;
    const Tensor w = normal({3}, 0, 1, dt, default_device(), &gen), b = normal({3}, 0, 1, dt, default_device(), &gen);
    const Tensor g = normal({5, 3, 4, 2}, 0, 1, dt, default_device(), &gen);
    ASSERT_TRUE(batch_norm_parts_supported(x, w, b));
    const double eps = 1e-5, tol = dt == Float32 ? 1e-5 : 1e-12;
    const BatchNormStats st = batch_norm_stats(batch_norm_sums(x));
    EXPECT_EQ(st.count, 40.0);
    const Tensor y = batch_norm_apply(x, st.mean, st.var, w, b, eps);
    // against batch_norm (training) and its gradient
    Tensor xr = x.copy().requires_grad_();
    const Tensor yr = batch_norm(xr, Tensor(), Tensor(), w, b, true, 0.1, eps);
    EXPECT_TRUE(allclose(y, yr.detach(), tol, tol));
    sum(yr * g).backward();
    const Tensor gx = batch_norm_input_grad(g, x, st.mean, st.var, w, batch_norm_grad_sums(g, x, st.mean), st.count, eps);
    EXPECT_TRUE(allclose(gx, xr.grad(), tol, tol));
    // the running statistics as batch_norm moves them
    Tensor rm = zeros({3}, dt), rv = ones({3}, dt), rm2 = zeros({3}, dt), rv2 = ones({3}, dt);
    batch_norm_update_running(rm, rv, st.mean, st.var, 0.1, st.count);
    {
      NoGrad off;
      batch_norm(x, rm2, rv2, w, b, true, 0.1, eps);
    }
    EXPECT_TRUE(allclose(rm, rm2, tol, tol));
    EXPECT_TRUE(allclose(rv, rv2, tol, tol));
  }
}

TEST(BatchNormParts, BadOperandsNameThePart) {
  const Tensor xi = zeros({2, 3}, Int64), x = zeros({2, 3}, Float32);
  EXPECT_FALSE(batch_norm_parts_supported(xi));
  EXPECT_FALSE(batch_norm_parts_supported(x, zeros({3}, Float64)));
  std::string msg = error_message<ValueError>([&] { batch_norm_sums(xi); });
  EXPECT_TRUE(contains_all(msg, {"batch_norm_sums", "int64 (2, 3)"}));
  msg = error_message<ValueError>([&] { batch_norm_apply(x, zeros({2}, Float64), zeros({3}, Float64), Tensor(), Tensor(), 1e-5); });
  EXPECT_TRUE(contains_all(msg, {"batch_norm_apply", "mean", "(3,)", "float64 (2,)"}));
  msg = error_message<ValueError>([&] { batch_norm_stats(zeros({4}, Float64)); });
  EXPECT_TRUE(contains_all(msg, {"batch_norm_stats", "(2C + 1,)"}));
  msg = error_message<ValueError>([&] { batch_norm_grad_sums(zeros({2, 2}, Float32), x, zeros({3}, Float64)); });
  EXPECT_TRUE(contains_all(msg, {"batch_norm_grad_sums", "float32 (2, 2)"}));
}
