// backward() frees the tensors each node saved once the pass has run it (PyTorch's default):
// activations do not outlive their use even while the output is still referenced, a second
// pass through the freed nodes is an AutogradError, and retain_graph keeps them.
#include <loom/autograd/autograd.h>
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/memory.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/conv.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/linalg.h>
#include <loom/ops/losses.h>
#include <loom/ops/normalization.h>
#include <loom/ops/pooling.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

#include <cmath>

#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::values;

namespace {

constexpr int64_t kMiB = 1 << 20;
int64_t current() { return memory_stats().current_bytes; }

// sum(exp(...exp(x))) with `depth` exps: each exp saves its 1 MiB output for its rule.
Tensor exp_chain(const Tensor& x, int depth) {
  Tensor h = x;
  for (int i = 0; i < depth; ++i) h = exp(h * 0.5);
  return sum(h);
}

}  // namespace

TEST(BackwardRelease, SavedTensorsAreFreedWhileTheOutputLives) {
  Tensor x = zeros({kMiB / 4}).requires_grad_();  // 1 MiB
  const int64_t base = current();
  constexpr int depth = 6;
  Tensor loss = exp_chain(x, depth);
  // the exps' outputs are alive only through the graph: at least one MiB per exp
  ASSERT_GE(current() - base, depth * kMiB);
  loss.backward();
  // `loss` still holds the graph, but its nodes have run and let go of what they saved: what is
  // left is x's gradient (1 MiB) and the one-element loss
  EXPECT_LE(current() - base, kMiB + 4096) << "saved activations outlived their backward rules";
  double h = 0, dh = 1;  // h_i = exp(h_{i-1} / 2) at x = 0 and its derivative
  for (int i = 0; i < depth; ++i) h = std::exp(h / 2), dh *= h / 2;
  EXPECT_NEAR(values(x.grad())[0], dh, 1e-4 * dh);
}

TEST(BackwardRelease, TheBackwardPeakReusesTheFreedActivations) {
  // Like a CNN's pooling: a large stage (exp of x, B bytes) reduced to a quarter (M = B / 4)
  // that a chain of 8 exps works on (8 M = 2 B saved). Backward runs the chain first, then
  // the large stage, whose gradients (the expanded gradient and exp's product, 2 B at most)
  // are allocated when the chain's saved outputs are already free.
  constexpr int64_t n = kMiB;  // 4 MiB of float
  const int64_t big = n * 4, quarter = big / 4;
  Tensor x = zeros({n}).requires_grad_();
  Tensor h = sum(exp(x).reshape({4, n / 4}), {0});
  for (int i = 0; i < 8; ++i) h = exp(h * 0.5);
  Tensor loss = sum(h);
  const int64_t start = current();
  reset_peak_memory();
  loss.backward();
  // kept until the end, the chain's outputs (2 B) would sit under the large stage's gradients
  EXPECT_LE(memory_stats().peak_bytes - start, quarter + 4096)
      << "backward allocated on top of saved tensors it no longer needed (B = " << big << ")";
}

TEST(BackwardRelease, AConvNetStepLeavesNoActivationBehind) {
  // conv - batch norm - relu - max pool - linear: once backward has run, the loss still holds
  // the graph but none of the activations its nodes saved.
  Generator gen(7);
  Tensor w = normal({8, 1, 3, 3}, 0.0, 0.3, Float32, Device::cpu(), &gen).requires_grad_();
  Tensor gamma = ones({8}).requires_grad_(), beta = zeros({8}).requires_grad_();
  Tensor fc = normal({8 * 16 * 16, 10}, 0.0, 0.01, Float32, Device::cpu(), &gen).requires_grad_();
  Tensor x = randn({32, 1, 32, 32}, Float32, Device::cpu(), &gen);
  Tensor y = randint(0, 10, {32}, Int64, Device::cpu(), &gen);
  auto step = [&] {
    Tensor rm = zeros({8}), rv = ones({8});
    Tensor h = conv2d(x, w, Tensor(), 1, 1);
    h = batch_norm(h, rm, rv, gamma, beta, true, 0.1, 1e-5);
    h = max_pool2d(relu(h), 2);
    Tensor loss = cross_entropy(matmul(h.reshape({32, -1}), fc), y);
    loss.backward();
    return loss;
  };
  step();  // warm: oneDNN's reordered weights and the grads exist
  const int64_t a = 32 * 8 * 32 * 32 * 4;  // bytes of one full-size activation (1 MiB)
  const int64_t before = current();
  reset_peak_memory();
  Tensor loss = step();
  const int64_t added = memory_stats().peak_bytes - before;
  // a sanity bound: the conv and relu outputs saved for their rules, the pool's indices and
  // output (a / 2 + a / 4 at most), batch norm's incoming gradient, its result and a scratch
  EXPECT_LE(added, 5 * a + a / 2) << "peak of the step above its live activations";
  EXPECT_LE(current() - before, a / 8) << "the step's activations outlived backward";
}

TEST(BackwardRelease, ASecondPassThroughFreedNodesThrows) {
  Tensor x = tensor<float>({1, 2}).requires_grad_();
  Tensor y = sum(exp(x));
  y.backward();
  const std::string m = error_message<AutogradError>([&] { y.backward(); });
  EXPECT_TRUE(contains_all(m, {"retain_graph", "already"})) << m;
  EXPECT_NEAR(values(x.grad())[1], std::exp(2.0), 1e-5);  // the failed pass added nothing
}

TEST(BackwardRelease, RetainGraphAllowsAnotherPass) {
  Tensor x = tensor<float>({1, 2}).requires_grad_();
  Tensor y = sum(exp(x));
  backward(y, Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_NEAR(values(x.grad())[0], 2 * std::exp(1.0), 1e-5);
  EXPECT_NEAR(values(x.grad())[1], 2 * std::exp(2.0), 1e-5);
  // grad() keeps the graph too
  Tensor z = sum(exp(x));
  EXPECT_NEAR(values(grad(z, {x})[0])[0], std::exp(1.0), 1e-5);
  EXPECT_NEAR(values(grad(z, {x})[0])[0], std::exp(1.0), 1e-5);
}
