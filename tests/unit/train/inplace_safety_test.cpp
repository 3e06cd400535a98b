// In-place writes that would silently corrupt data or gradients are refused: writes into a
// view whose elements share memory (a broadcast view), and backward through an op whose saved
// tensor was changed in place afterwards (the storage version counter).
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/index.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/linalg.h>
#include <loom/ops/normalization.h>
#include <loom/ops/reduction.h>
#include <loom/train/optimizers.h>

#include "unit/common/core_test_util.h"
#include "unit/ops/ops_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::iota;
using loom_test::values;

TEST(InPlaceOverlap, EveryInPlaceEntryRefusesABroadcastTarget) {
  Tensor base = zeros({3});
  Tensor b = base.broadcast_to({2, 3});  // stride 0 on axis 0
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { b += 1.0; }),
                           {"operator+=", "same memory", "(2, 3)", "strides (0, 1)"}));
  EXPECT_THROW(b -= ones({2, 3}), ValueError);
  EXPECT_THROW(b *= 2.0, ValueError);
  EXPECT_THROW(b /= ones({3}), ValueError);
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { b.fill_(1.0); }), {"fill_", "same memory"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { b.copy_(iota({2, 3})); }), {"copy_", "same memory"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { b.index_put_({TensorIndex(0)}, 5.0); }), {"index_put_"}));
  EXPECT_EQ(values(base), (std::vector<double>{0, 0, 0}));  // nothing was written
  // equal strides on two axes overlap too
  Tensor diagonalish(base.storage(), {2, 2}, {1, 1}, 0, Float32);
  EXPECT_THROW(diagonalish.fill_(1.0), ValueError);
  // stride 0 on a size-1 axis, and an empty broadcast view, have no overlapping elements
  Tensor one = zeros({1}).broadcast_to({1, 1});
  one += 2.0;
  EXPECT_EQ(one.item<float>(), 2.0f);
  Tensor none = zeros({1}).broadcast_to({0, 4});
  EXPECT_NO_THROW(none.fill_(1.0));
  // reading a broadcast view stays allowed, and writing its source works
  Tensor src = zeros({3});
  Tensor view = src.broadcast_to({2, 3});
  src += 1.0;
  EXPECT_EQ(values(view), (std::vector<double>(6, 1.0)));
}

TEST(InPlaceOverlap, BatchNormRefusesBroadcastRunningStatistics) {
  Tensor x = iota({4, 3});
  Tensor mean_src = zeros({1}), var_src = ones({1});
  Tensor rm = mean_src.broadcast_to({3}), rv = var_src.broadcast_to({3});
  for (Tensor xi : {x, x.astype(Float16)}) {  // the fused kernel and the composite path
    EXPECT_TRUE(contains_all(error_message<ValueError>([&] { batch_norm(xi, rm, rv, Tensor(), Tensor(), true); }),
                             {"batch_norm", "running_mean", "same memory"}));
    EXPECT_EQ(values(mean_src), (std::vector<double>{0}));  // neither buffer was updated
    EXPECT_EQ(values(var_src), (std::vector<double>{1}));
  }
  Tensor rm_ok = zeros({3});
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { batch_norm(x, rm_ok, rv, Tensor(), Tensor(), true); }),
                           {"running_var"}));
  EXPECT_EQ(values(rm_ok), (std::vector<double>{0, 0, 0}));
  // evaluation only reads the statistics: broadcast buffers are fine there
  Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), false, 0.1, 0.0);
  EXPECT_EQ(values(y), values(x));
}

TEST(InPlaceOverlap, OptimizerRefusesABroadcastParameter) {
  Tensor p = zeros({1}).broadcast_to({3}).detach().requires_grad_();
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { train::SGD({p}); }), {"parameter 0", "share memory"}));
}

// ---------------------------------------------------------------- saved-tensor versions

TEST(SavedTensorVersion, InPlaceChangeOfASavedInputIsAnError) {
  Tensor x = tensor<float>({2}).requires_grad_();
  Tensor w = tensor<float>({2});
  Tensor y = multiply(x, w);  // saves w for x's gradient
  w += 1.0;                   // used to give dy/dx = 3 instead of 2
  EXPECT_TRUE(contains_all(error_message<AutogradError>([&] { y.backward(); }),
                           {"multiply", "modified by an in-place operation"}));
  EXPECT_FALSE(x.grad().defined());  // nothing accumulated
  // through a view of the saved tensor's storage, and through fill_ / copy_ / index_put_
  for (int how = 0; how < 4; ++how) {
    Tensor w2 = tensor<float>({2, 2});
    Tensor y2 = sum(multiply(x, w2));
    Tensor v = w2.index({Slice(0, 1)});
    if (how == 0) v *= 2.0;
    if (how == 1) v.fill_(0.0);
    if (how == 2) w2.copy_(ones({2}));
    if (how == 3) w2.index_put_({TensorIndex(1)}, 7.0);
    EXPECT_THROW(y2.backward(), AutogradError) << how;
  }
}

TEST(SavedTensorVersion, InPlaceChangeOfASavedOutputIsAnError) {
  Tensor x = tensor<float>({0.5, 1.0}).requires_grad_();
  Tensor y = exp(x);  // saves its output
  {
    NoGrad off;
    y *= 2.0;
  }
  EXPECT_TRUE(contains_all(error_message<AutogradError>([&] { sum(y).backward(); }), {"exp", "in-place"}));
}

TEST(SavedTensorVersion, OnlyTensorsTheGradientReadsAreChecked) {
  // add saves nothing; multiply reads x only for w's gradient, which nobody wants here
  Tensor x = tensor<float>({3}).requires_grad_();
  Tensor w = tensor<float>({2});
  Tensor y = add(multiply(x, w), w);
  {
    NoGrad off;
    x += 10.0;  // as an optimizer step between forward and backward would
  }
  y.backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2}));
  // and a later write after backward is harmless
  w += 1.0;
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2}));
}

TEST(SavedTensorVersion, MatmulAndReductionsCheckTheirOperands) {
  Tensor a = iota({2, 3}).requires_grad_();
  Tensor b = iota({3, 2});
  Tensor y = sum(matmul(a, b));
  b.index_put_({TensorIndex(0), TensorIndex(0)}, 5.0);
  EXPECT_TRUE(contains_all(error_message<AutogradError>([&] { y.backward(); }), {"matmul"}));
  Tensor p = tensor<float>({1, 2, 3}).requires_grad_();
  Tensor q = prod(p);
  {
    NoGrad off;
    p.fill_(1.0);
  }
  EXPECT_TRUE(contains_all(error_message<AutogradError>([&] { q.backward(); }), {"prod"}));
}
