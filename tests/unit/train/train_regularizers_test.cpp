// L1 / L2 penalties over tensors and layers.
#include <gtest/gtest.h>
#include <loom/core/tensor.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/train/regularizers.h>

#include "unit/common/core_test_util.h"

using namespace loom;
namespace tr = loom::train;

TEST(TrainRegularizers, TensorPenaltiesAndGradients) {
  Tensor a = tensor<double>({1, -2}).requires_grad_(), b = tensor<double>({3}).requires_grad_();
  Tensor l1 = tr::l1_penalty({a, b}, 0.1);
  EXPECT_NEAR(l1.item<double>(), 0.6, 1e-15);
  Tensor l2 = tr::l2_penalty({a, b}, 0.5);
  EXPECT_DOUBLE_EQ(l2.item<double>(), 7.0);
  l2.backward();
  EXPECT_EQ(loom_test::values(a.grad()), (std::vector<double>{1, -2}));  // 2 * 0.5 * a
  EXPECT_EQ(tr::l1_penalty(std::vector<Tensor>{}, 1.0).item<double>(), 0.0);
  tr::Regularizer r({a, b}, 0.1, 0.5);
  EXPECT_NEAR(r().item<double>(), 7.6, 1e-15);
}

TEST(TrainRegularizers, LayersSharedStateCountedOnce) {
  manual_seed(1);
  nn::Input x(3);
  nn::Linear l1(x, 2);
  nn::Layer l1b = l1.reuse_with(x);
  nn::Linear l2(l1, 1);
  std::vector<Tensor> ps = tr::parameters({l1, l1b, l2});
  EXPECT_EQ(ps.size(), 4u);  // l1 (weight, bias) once, l2 (weight, bias)
  double expect = 0;
  for (const Tensor& p : ps) expect += sum(square(p)).item<double>();
  EXPECT_NEAR(tr::l2_penalty({l1, l1b, l2}, 1.0).item<double>(), expect, 1e-6);
  EXPECT_NEAR(tr::l1_penalty({l2}, 2.0).item<double>(), 2.0 * (sum(abs(ps[2])) + sum(abs(ps[3]))).item<double>(), 1e-6);
}
