// Custom ops (loom/autograd/custom_op.h): gradients against float64 central differences,
// recording only where an input requires grad, composition with built-in ops, several outputs,
// absent inputs, NoGrad, saved-tensor checks and the errors for a wrong backward.
#include <gtest/gtest.h>
#include <loom/autograd/autograd.h>
#include <loom/autograd/custom_op.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/node.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

#include <cmath>
#include <string>
#include <vector>

#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;

namespace {

// y = a * sin(b) + c (c optional), written by hand: forward and backward.
CustomOp mul_sin() {
  return CustomOp{"mul_sin",
                  [](const std::vector<Tensor>& in, std::vector<Tensor>& saved) {
                    saved = {in[0], in[1]};
                    Tensor y = in[0] * sin(in[1]);
                    if (in[2].defined()) y = y + in[2];
                    return std::vector<Tensor>{y};
                  },
                  [](const CustomGrad& g) {
                    const Tensor& gy = g.output_grads[0];
                    const Tensor &a = g.saved[0], &b = g.saved[1];
                    std::vector<Tensor> gi(3);
                    if (g.needs_input_grad[0]) gi[0] = gy * sin(b);
                    if (g.needs_input_grad[1]) gi[1] = gy * a * cos(b);
                    if (g.needs_input_grad[2]) gi[2] = gy;
                    return gi;
                  }};
}

// Two outputs of one input: (x^2, exp(x)).
CustomOp square_and_exp() {
  return CustomOp{"square_and_exp",
                  [](const std::vector<Tensor>& in, std::vector<Tensor>& saved) {
                    const Tensor e = exp(in[0]);
                    saved = {in[0], e};
                    return std::vector<Tensor>{in[0] * in[0], e};
                  },
                  [](const CustomGrad& g) {
                    return std::vector<Tensor>{g.output_grads[0] * 2.0 * g.saved[0] + g.output_grads[1] * g.saved[1]};
                  }};
}

Tensor rand64(const Shape& s, uint64_t seed) {
  manual_seed(seed);
  return randn(s, Float64);
}

// d sum(f(x) * cot) / dx by central differences, element by element.
Tensor finite_difference(const std::function<Tensor()>& loss_of, Tensor x) {
  constexpr double eps = 1e-6;
  NoGrad off;
  Tensor g = zeros(x.shape(), Float64);
  Tensor flat = x.reshape({x.numel()});
  Tensor gflat = g.reshape({x.numel()});
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = flat[i].item<double>();
    flat[i].fill_(v + eps);
    const double up = loss_of().item<double>();
    flat[i].fill_(v - eps);
    const double down = loss_of().item<double>();
    flat[i].fill_(v);
    gflat[i].fill_((up - down) / (2 * eps));
  }
  return g;
}

}  // namespace

TEST(CustomOp, GradientsMatchFiniteDifferences) {
  const CustomOp op = mul_sin();
  Tensor a = rand64({3, 4}, 1), b = rand64({3, 4}, 2), c = rand64({3, 4}, 3), cot = rand64({3, 4}, 4);
  a.requires_grad_();
  b.requires_grad_();
  c.requires_grad_();
  const auto loss = [&] { return sum(op({a, b, c})[0] * cot); };
  const std::vector<Tensor> ad = grad(loss(), {a, b, c});
  EXPECT_TRUE(allclose(ad[0], finite_difference(loss, a), 1e-6, 1e-6));
  EXPECT_TRUE(allclose(ad[1], finite_difference(loss, b), 1e-6, 1e-6));
  EXPECT_TRUE(allclose(ad[2], finite_difference(loss, c), 1e-6, 1e-6));
}

TEST(CustomOp, GradientFlowsOnlyToInputsThatRequireIt) {
  const CustomOp op = mul_sin();
  Tensor a = rand64({5}, 1), b = rand64({5}, 2);
  b.requires_grad_();
  std::vector<bool> seen;
  const CustomOp spy{"spy", op.forward, [&](const CustomGrad& g) {
                       seen = g.needs_input_grad;
                       return op.backward(g);
                     }};
  Tensor y = spy({a, b, Tensor()})[0];  // an absent third input
  EXPECT_TRUE(y.requires_grad());
  sum(y).backward();
  EXPECT_EQ(seen, (std::vector<bool>{false, true, false}));
  EXPECT_FALSE(a.grad().defined());
  EXPECT_TRUE(allclose(b.grad(), a * cos(b)));
}

TEST(CustomOp, NoRecordingUnderNoGradOrWithoutGradInputs) {
  const CustomOp op = mul_sin();
  Tensor a = rand64({4}, 1), b = rand64({4}, 2);
  EXPECT_FALSE(op({a, b, Tensor()})[0].requires_grad());
  a.requires_grad_();
  {
    NoGrad off;
    EXPECT_FALSE(op({a, b, Tensor()})[0].requires_grad());
  }
  // the forward runs with recording off: its inner ops leave no nodes, the op leaves one
  Tensor y = op({a, b, Tensor()})[0];
  ASSERT_TRUE(y.grad_fn());
  EXPECT_STREQ(y.grad_fn()->name(), "mul_sin");
}

TEST(CustomOp, ComposesWithBuiltInOps) {
  const CustomOp op = mul_sin();
  Tensor a = rand64({2, 3}, 5), b = rand64({2, 3}, 6), c = rand64({3}, 7);
  a.requires_grad_();
  b.requires_grad_();
  // built-in ops before and after, the op's output used twice
  const auto loss = [&] {
    const Tensor y = op({exp(a), b * 2.0, Tensor()})[0];
    return sum(tanh(y) * y + c);
  };
  const std::vector<Tensor> ad = grad(loss(), {a, b});
  EXPECT_TRUE(allclose(ad[0], finite_difference(loss, a), 1e-6, 1e-6));
  EXPECT_TRUE(allclose(ad[1], finite_difference(loss, b), 1e-6, 1e-6));
  // the same function of built-in ops gives the same gradient
  Tensor a2 = a.detach().copy(), b2 = b.detach().copy();
  a2.requires_grad_();
  b2.requires_grad_();
  const Tensor y2 = exp(a2) * sin(b2 * 2.0);
  const std::vector<Tensor> ref = grad(sum(tanh(y2) * y2 + c), {a2, b2});
  EXPECT_TRUE(allclose(ad[0], ref[0], 1e-12, 1e-12));
  EXPECT_TRUE(allclose(ad[1], ref[1], 1e-12, 1e-12));
}

TEST(CustomOp, SeveralOutputs) {
  const CustomOp op = square_and_exp();
  Tensor x = rand64({3, 2}, 8), c0 = rand64({3, 2}, 9), c1 = rand64({3, 2}, 10);
  x.requires_grad_();
  const auto both = [&] {
    const auto ys = op({x});
    return sum(ys[0] * c0) + sum(ys[1] * c1);
  };
  EXPECT_TRUE(allclose(grad(both(), {x})[0], finite_difference(both, x), 1e-6, 1e-6));
  // one output used: the other's gradient is zero
  const auto first = [&] { return sum(op({x})[0] * c0); };
  EXPECT_TRUE(allclose(grad(first(), {x})[0], finite_difference(first, x), 1e-6, 1e-6));
  const auto second = [&] { return sum(op({x})[1] * c1); };
  EXPECT_TRUE(allclose(grad(second(), {x})[0], finite_difference(second, x), 1e-6, 1e-6));
}

TEST(CustomOp, Float32InputsGetFloat32Gradients) {
  const CustomOp op = mul_sin();
  Tensor a = astype(rand64({4}, 1), Float32), b = astype(rand64({4}, 2), Float32);
  a.requires_grad_();
  sum(op({a, b, Tensor()})[0]).backward();
  EXPECT_EQ(a.grad().dtype(), Float32);
  EXPECT_TRUE(allclose(a.grad(), sin(b)));
}

TEST(CustomOp, SavedTensorModifiedInPlaceIsAnError) {
  const CustomOp op = mul_sin();
  Tensor a = rand64({4}, 1), b = rand64({4}, 2);
  a.requires_grad_();
  Tensor y = op({a, b, Tensor()})[0];
  {
    NoGrad off;
    b += 1.0;
  }
  const std::string msg = error_message<AutogradError>([&] { sum(y).backward(); });
  EXPECT_TRUE(contains_all(msg, {"mul_sin", "modified"}));
}

TEST(CustomOp, WrongGradientCountShapeOrDtypeNamesTheOp) {
  Tensor x = rand64({2, 3}, 1);
  x.requires_grad_();
  const auto forward = [](const std::vector<Tensor>& in, std::vector<Tensor>&) { return std::vector<Tensor>{in[0] * 2.0}; };
  const CustomOp too_many{"too_many", forward, [](const CustomGrad& g) {
                            return std::vector<Tensor>{g.output_grads[0], g.output_grads[0]};
                          }};
  std::string msg = error_message<AutogradError>([&] { sum(too_many({x})[0]).backward(); });
  EXPECT_TRUE(contains_all(msg, {"custom op 'too_many'", "2 gradients for 1 input"}));
  const CustomOp bad_shape{"bad_shape", forward, [](const CustomGrad& g) {
                             return std::vector<Tensor>{reshape(g.output_grads[0], {3, 2})};
                           }};
  msg = error_message<ShapeError>([&] { sum(bad_shape({x})[0]).backward(); });
  EXPECT_TRUE(contains_all(msg, {"custom op 'bad_shape'", "(3, 2)", "(2, 3)", "input 0"}));
  const CustomOp bad_dtype{"bad_dtype", forward, [](const CustomGrad& g) {
                             return std::vector<Tensor>{astype(g.output_grads[0], Int64)};
                           }};
  msg = error_message<DTypeError>([&] { sum(bad_dtype({x})[0]).backward(); });
  EXPECT_TRUE(contains_all(msg, {"custom op 'bad_dtype'", "int64"}));
  const CustomOp no_output{"no_output", [](const std::vector<Tensor>&, std::vector<Tensor>&) { return std::vector<Tensor>{}; },
                           [](const CustomGrad&) { return std::vector<Tensor>{}; }};
  msg = error_message<ValueError>([&] { no_output({x}); });
  EXPECT_TRUE(contains_all(msg, {"custom op 'no_output'", "no outputs"}));
  const CustomOp no_backward{"no_backward", forward, nullptr};
  msg = error_message<ValueError>([&] { no_backward({x}); });
  EXPECT_TRUE(contains_all(msg, {"custom op 'no_backward'", "no backward"}));
}
