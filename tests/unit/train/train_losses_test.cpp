// Training losses: hand-computed values, float64 finite-difference gradients, errors. Parity
// with torch.nn.functional (values and gradients) is checked live by the
// train_reference_pytorch ctest (tests/train).
#include <gtest/gtest.h>
#include <loom/autograd/autograd.h>
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/losses.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/train/losses.h>

#include <cmath>
#include <functional>

#include "unit/common/core_test_util.h"

using namespace loom;
namespace tr = loom::train;
using loom_test::contains_all;
using loom_test::error_message;

namespace {

// Central differences of the scalar f at x (float64) against autograd.
void expect_gradcheck(const std::function<Tensor(const Tensor&)>& f, const Tensor& x0) {
  Tensor x = x0.copy().requires_grad_();
  Tensor g = grad(f(x), {x})[0];
  std::vector<double> base = x0.to_vector<double>();
  const double h = 1e-6;
  for (size_t i = 0; i < base.size(); ++i) {
    std::vector<double> up = base, dn = base;
    up[i] += h;
    dn[i] -= h;
    const double fu = f(from_vector(up, x0.shape())).item<double>(), fd = f(from_vector(dn, x0.shape())).item<double>();
    EXPECT_NEAR(g.to_vector<double>()[i], (fu - fd) / (2 * h), 1e-6) << "element " << i;
  }
}

}  // namespace

TEST(TrainLosses, RegressionValues) {
  Tensor p = tensor<double>({0.0, 2.0, -1.0, 0.5}), t = tensor<double>({1.0, 0.0, -1.0, 0.0});
  // d = -1, 2, 0, 0.5
  EXPECT_DOUBLE_EQ(tr::mse(p, t).item<double>(), (1 + 4 + 0 + 0.25) / 4);
  EXPECT_DOUBLE_EQ(tr::mse(p, t, Reduction::Sum).item<double>(), 5.25);
  EXPECT_DOUBLE_EQ(tr::mae(p, t).item<double>(), 3.5 / 4);
  // huber delta 1: 0.5 (|d| = 1 is outside: 1 * (1 - 0.5)), 1.5, 0, 0.125
  EXPECT_EQ(loom_test::values(tr::huber(p, t, 1.0, Reduction::None)), (std::vector<double>{0.5, 1.5, 0, 0.125}));
  EXPECT_EQ(tr::mse(p, t, Reduction::None).shape(), (Shape{4}));
  // integer targets are read as floats
  EXPECT_DOUBLE_EQ(tr::mse(p, tensor<int64_t>({1, 0, -1, 0})).item<double>(), 5.25 / 4);
}

TEST(TrainLosses, ClassificationValues) {
  Tensor logits = tensor<double>({0.0, 0.0}).reshape({1, 2});
  EXPECT_NEAR(tr::cross_entropy(logits, tensor<int64_t>({1}), Tensor(), Reduction::Mean).item<double>(), std::log(2.0), 1e-15);
  // one-hot probability targets give the same as class ids
  Tensor l = tensor<double>({1.0, 2.0, 0.5, -1.0, 0.0, 3.0}).reshape({2, 3});
  Tensor ids = tensor<int64_t>({1, 2});
  Tensor onehot = tensor<double>({0, 1, 0, 0, 0, 1}).reshape({2, 3});
  EXPECT_NEAR(tr::cross_entropy(l, ids, Tensor(), Reduction::Sum, -100, 0.1).item<double>(),
              tr::cross_entropy(l, onehot, Tensor(), Reduction::Sum, -100, 0.1).item<double>(), 1e-14);
  EXPECT_NEAR(tr::nll_loss(log_softmax(l, 1), ids).item<double>(), tr::cross_entropy(l, ids).item<double>(), 1e-15);
  // bce: -log(0.8), -log(0.75); clamped at -100 for p = 0
  Tensor bce = tr::binary_cross_entropy(tensor<double>({0.8, 0.25, 0.0}), tensor<double>({1, 0, 1}), Reduction::None);
  EXPECT_NEAR(bce.at({0}), -std::log(0.8), 1e-15);
  EXPECT_NEAR(bce.at({1}), -std::log(0.75), 1e-15);
  EXPECT_EQ(bce.at({2}), 100.0);
  Tensor x = tensor<double>({-2.0, 0.5}), y = tensor<double>({0, 1});
  EXPECT_NEAR(tr::binary_cross_entropy_with_logits(x, y, Tensor(), Tensor(), Reduction::Sum).item<double>(),
              tr::binary_cross_entropy(sigmoid(x), y, Reduction::Sum).item<double>(), 1e-14);
}

TEST(TrainLosses, KlAndCosineValues) {
  Tensor p = tensor<double>({0.5, 0.5, 0.0, 1.0}).reshape({2, 2});
  Tensor q = tensor<double>({0.25, 0.75, 0.5, 0.5}).reshape({2, 2});
  const double kl0 = 0.5 * std::log(0.5 / 0.25) + 0.5 * std::log(0.5 / 0.75);
  const double kl1 = 1.0 * std::log(1.0 / 0.5);
  EXPECT_NEAR(tr::kl_divergence(log(q), p).item<double>(), (kl0 + kl1) / 2, 1e-15);  // batchmean
  EXPECT_NEAR(tr::kl_divergence(log(q), p, tr::KLReduction::Sum).item<double>(), kl0 + kl1, 1e-15);
  EXPECT_NEAR(tr::kl_divergence(log(q), p, tr::KLReduction::Mean).item<double>(), (kl0 + kl1) / 4, 1e-15);
  EXPECT_NEAR(tr::kl_divergence(log(q), log(tensor<double>({0.5, 0.5, 1e-300, 1.0}).reshape({2, 2})),
                                tr::KLReduction::Sum, true)
                  .item<double>(),
              kl0 + kl1, 1e-12);
  Tensor a = tensor<double>({1, 0, 1, 1}).reshape({2, 2}), b = tensor<double>({0, 1, 2, 2}).reshape({2, 2});
  EXPECT_EQ(loom_test::values(tr::cosine(a, b, Reduction::None)), (std::vector<double>{1.0, 0.0}));
  Tensor e = tr::cosine_embedding(a, b, tensor<int64_t>({-1, -1}), 0.5, Reduction::None);
  EXPECT_NEAR(e.at({0}), 0.0, 1e-12);
  EXPECT_NEAR(e.at({1}), 0.5, 1e-6);
}

TEST(TrainLosses, GradientsMatchFiniteDifferences) {
  Generator g(11);
  Tensor x = normal({3, 4}, 0, 1.5, Float64, Device::cpu(), &g);
  Tensor t = normal({3, 4}, 0, 1, Float64, Device::cpu(), &g);
  Tensor probs = uniform({3, 4}, 0.05, 0.95, Float64, Device::cpu(), &g);
  Tensor labels = uniform({3, 4}, 0, 1, Float64, Device::cpu(), &g);
  expect_gradcheck([&](const Tensor& v) { return tr::mse(v, t); }, x);
  expect_gradcheck([&](const Tensor& v) { return tr::huber(v, t, 0.7, Reduction::Sum); }, x);
  expect_gradcheck([&](const Tensor& v) { return tr::binary_cross_entropy(v, labels); }, probs);
  expect_gradcheck([&](const Tensor& v) { return tr::cosine(v, t); }, x);
  expect_gradcheck([&](const Tensor& v) { return tr::kl_divergence(log_softmax(v, 1), softmax(t, 1)); }, x);
  expect_gradcheck([&](const Tensor& v) { return tr::cosine_embedding(v, t, tensor<int64_t>({1, -1, -1}), 0.1); }, x);
}

TEST(TrainLosses, Errors) {
  EXPECT_TRUE(contains_all(error_message<DTypeError>([] { tr::mse(zeros({2}, Int64), zeros({2})); }), {"mse", "int64"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { tr::binary_cross_entropy(tensor<float>({1.5f}), ones({1})); }),
                           {"binary_cross_entropy", "[0, 1]"}));
  EXPECT_THROW(tr::huber(zeros({2}), zeros({2}), 0.0), ValueError);
  EXPECT_THROW(tr::cosine_embedding(zeros({2, 3}), zeros({2, 3}), zeros({3}, Int64)), ShapeError);
}

// Issue 36, silent trap 1: a (N, 1) prediction against an (N,) target broadcasts to (N, N) and
// used to give a plausible, wrong loss. Every loss of losses.h refuses shapes that broadcast
// to the shape of neither, naming both and the fix; a target that broadcasts into the
// prediction's shape (a scalar, one value per feature) still works.
TEST(TrainLosses, ShapesThatBroadcastToAThirdShapeAreRefused) {
  Tensor col = uniform({4, 1}, 0.1, 0.9, Float64), flat = uniform({4}, 0.1, 0.9, Float64);
  const std::vector<std::pair<const char*, std::function<void(const Tensor&, const Tensor&)>>> losses = {
      {"mse", [](const Tensor& p, const Tensor& t) { tr::mse(p, t); }},
      {"mae", [](const Tensor& p, const Tensor& t) { tr::mae(p, t); }},
      {"huber", [](const Tensor& p, const Tensor& t) { tr::huber(p, t); }},
      {"binary_cross_entropy", [](const Tensor& p, const Tensor& t) { tr::binary_cross_entropy(p, t); }},
      {"binary_cross_entropy_with_logits", [](const Tensor& p, const Tensor& t) { tr::binary_cross_entropy_with_logits(p, t); }},
      {"kl_divergence", [](const Tensor& p, const Tensor& t) { tr::kl_divergence(p, t); }},
      {"cosine_similarity", [](const Tensor& p, const Tensor& t) { tr::cosine_similarity(p, t); }},
      {"cosine_similarity", [](const Tensor& p, const Tensor& t) { tr::cosine(p, t); }},
      {"cosine_embedding", [](const Tensor& p, const Tensor& t) { tr::cosine_embedding(p, t, ones({4}, Int64)); }},
  };
  for (const auto& [name, f] : losses) {
    SCOPED_TRACE(name);
    for (const auto& pt : {std::pair{col, flat}, std::pair{flat, col}}) {
      // named captures: clang 14 (the sanitized build) cannot capture structured bindings
      const std::string msg = error_message<ShapeError>([&f = f, &p = pt.first, &t = pt.second] { f(p, t); });
      EXPECT_TRUE(contains_all(msg, {name, "(4, 1)", "(4,)"}));
      EXPECT_TRUE(msg.find("squeeze") != std::string::npos || msg.find("reshape") != std::string::npos) << msg;
    }
  }
  // class ids as a (N, 1) column
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { tr::cross_entropy(zeros({4, 3}), zeros({4, 1}, Int64)); }),
                           {"cross_entropy", "(4, 1)", "squeeze(target, -1)"}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { tr::nll_loss(zeros({4, 3}), zeros({4, 1}, Int64)); }),
                           {"nll_loss", "(4, 1)", "squeeze"}));
  // broadcasting into one operand's shape is kept: (4, 3) against (3,), and a scalar target
  Tensor p = tensor<double>({1, 2, 3, 4, 5, 6}).reshape({2, 3});
  EXPECT_DOUBLE_EQ(tr::mse(p, tensor<double>({1, 2, 3})).item<double>(), (0 + 0 + 0 + 9 + 9 + 9) / 6.0);
  EXPECT_DOUBLE_EQ(tr::mae(p, scalar_tensor(1.0, Float64)).item<double>(), (0 + 1 + 2 + 3 + 4 + 5) / 6.0);
}
