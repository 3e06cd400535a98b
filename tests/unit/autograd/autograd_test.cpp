// Reverse-mode autograd semantics: accumulation, broadcasting, seeds, grad modes, the
// functional API, and the tie rule of max/min.
#include <atomic>
#include <barrier>
#include <thread>

#include <loom/autograd/autograd.h>
#include <loom/autograd/hooks.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/index.h>
#include <loom/core/memory.h>
#include <loom/core/node.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/linalg.h>
#include <loom/ops/nn.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::values;

namespace {
Tensor leaf(std::vector<float> v, Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  Tensor t = from_vector(v, shape);
  t.requires_grad_();
  return t;
}
}  // namespace

TEST(Autograd, RecordsOnlyWhenAnInputRequiresGrad) {
  Tensor x = leaf({1, 2});
  Tensor c = ones({2});
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(x.grad().defined());
  Tensor y = x * c;
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  ASSERT_TRUE(y.grad_fn() != nullptr);
  EXPECT_STREQ(y.grad_fn()->name(), "multiply");
  Tensor z = c * c;
  EXPECT_FALSE(z.requires_grad());
  EXPECT_TRUE(z.grad_fn() == nullptr);
}

TEST(Autograd, GradientAccumulatesWhenATensorIsUsedTwice) {
  Tensor x = leaf({1, 2, 3});
  Tensor y = sum(x * x + x);  // dy/dx = 2x + 1
  y.backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{3, 5, 7}));
  // a diamond: a = 2x used by both factors of a * (a + a) = 2 a^2 -> dy/dx = 8 a = 16 x
  Tensor w = leaf({1, -2});
  Tensor a = w * 2.0;
  sum(a * (a + a)).backward();
  EXPECT_EQ(values(w.grad()), (std::vector<double>{16, -32}));
}

TEST(Autograd, BackwardCallsAccumulateIntoGrad) {
  Tensor x = leaf({1, 2});
  sum(x * 3.0).backward();
  sum(x * x).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{3 + 2, 3 + 4}));
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
  sum(x).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 1}));
}

// Threads recording ops on the same leaves at once (a model's weights shared by requests that
// run without NoGrad) all reach each leaf's one sink node, and a backward through any of their
// graphs reaches the leaf.
TEST(Autograd, ThreadsRecordingOnOneLeafShareItsSink) {
  constexpr int kThreads = 8, kLeaves = 4000;
  std::vector<Tensor> leaves;
  for (int i = 0; i < kLeaves; ++i) leaves.push_back(leaf({1, 2}));
  std::vector<std::vector<Tensor>> outs(kThreads);
  std::barrier rounds(kThreads);  // all threads start each round of 8 leaves together
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kLeaves; ++i) {
        if (i % 8 == 0) rounds.arrive_and_wait();
        outs[t].push_back(leaves[i] * 2.0);
      }
    });
  for (std::thread& th : threads) th.join();
  for (int i = 0; i < kLeaves; ++i) {
    const std::shared_ptr<Node> sink = outs[0][i].grad_fn()->next.at(0);
    ASSERT_NE(dynamic_cast<AccumulateGrad*>(sink.get()), nullptr) << "leaf " << i;
    for (int t = 1; t < kThreads; ++t) ASSERT_EQ(outs[t][i].grad_fn()->next.at(0), sink) << "leaf " << i << ", thread " << t;
  }
  sum(outs[3][7]).backward();
  EXPECT_EQ(values(leaves[7].grad()), (std::vector<double>{2, 2}));
}

// Backward passes of several threads into the same leaves at once (Hogwild-style training,
// workers sharing weights) sum every pass's gradient into .grad(): none is lost, whether the
// pass replaces .grad() (the first one; a leaf with a hook, which sums it during the pass from
// the .grad() it then saw) or adds into it. The threads start each pass together, so that their
// assignments overlap.
TEST(Autograd, ConcurrentBackwardPassesIntoSharedLeavesLoseNoGradient) {
  constexpr int kThreads = 4, kPasses = 200;
  constexpr int64_t kSize = 1 << 15;  // adds long enough to overlap
  Tensor w = ones({kSize}, Float32), h = ones({kSize}, Float32);
  w.requires_grad_();
  h.requires_grad_();
  std::atomic<int> hook_calls{0};
  GradHookHandle hook = on_grad_accumulated(h, [&](const Tensor&) { ++hook_calls; });
  std::barrier rounds(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int p = 0; p < kPasses; ++p) {
        Tensor loss = sum(w * 1.0 + h * 2.0);
        rounds.arrive_and_wait();
        loss.backward();
      }
    });
  for (std::thread& th : threads) th.join();
  const double passes = kThreads * kPasses;
  EXPECT_EQ(hook_calls.load(), kThreads * kPasses);
  EXPECT_EQ(max(w.grad()).item<double>(), passes);
  EXPECT_EQ(min(w.grad()).item<double>(), passes) << "a pass's gradient was lost";
  EXPECT_EQ(max(h.grad()).item<double>(), 2 * passes);
  EXPECT_EQ(min(h.grad()).item<double>(), 2 * passes) << "a pass's gradient was lost";
}

TEST(Autograd, GradIsNotAnAliasOfTheSeedOrTheLeaf) {
  Tensor x = leaf({1, 2});
  Tensor seed = ones({2});
  (x * 1.0).backward(seed);
  EXPECT_FALSE(x.grad().shares_storage_with(seed));
  EXPECT_FALSE(x.grad().shares_storage_with(x));
  seed.fill_(100.0);
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 1}));
}

TEST(Autograd, BroadcastGradientsReduceToOperandShape) {
  Tensor a = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = leaf({10, 20, 30});
  Tensor c = leaf({100, 200}, {2, 1});
  Tensor s = scalar_tensor(2.0f);
  s.requires_grad_();
  Tensor y = sum((a + b) * c * s);
  y.backward();
  EXPECT_EQ(b.grad().shape(), (Shape{3}));
  EXPECT_EQ(c.grad().shape(), (Shape{2, 1}));
  EXPECT_EQ(s.grad().shape(), Shape{});
  EXPECT_EQ(values(a.grad()), (std::vector<double>{200, 200, 200, 400, 400, 400}));
  EXPECT_EQ(values(b.grad()), (std::vector<double>{600, 600, 600}));
  // dy/dc[i] = s * sum_j (a[i, j] + b[j]) = 2 * (6 + 60), 2 * (15 + 60)
  EXPECT_EQ(values(c.grad()), (std::vector<double>{132, 150}));
  EXPECT_EQ(s.grad().item<double>(), 100 * 66 + 200 * 75);
}

TEST(Autograd, NonScalarOutputNeedsASeed) {
  Tensor x = leaf({1, 2, 3, 4}, {2, 2});
  Tensor y = x * 2.0;
  std::string m = error_message<AutogradError>([&] { y.backward(); });
  EXPECT_TRUE(contains_all(m, {"backward", "(2, 2)", "seed"}));
  m = error_message<ShapeError>([&] { y.backward(ones({4})); });
  EXPECT_TRUE(contains_all(m, {"backward", "(4,)", "(2, 2)"}));
  EXPECT_FALSE(x.grad().defined());
  y.backward(from_vector<float>({1, 0, 0, 2}, {2, 2}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 0, 0, 4}));
  // a one-element non-0-d output needs no seed
  Tensor z = leaf({5});
  (z * z).backward();
  EXPECT_EQ(values(z.grad()), (std::vector<double>{10}));
  m = error_message<AutogradError>([] { sum(ones({2})).backward(); });
  EXPECT_TRUE(contains_all(m, {"backward", "does not require grad"}));
}

TEST(Autograd, NoGradScope) {
  Tensor x = leaf({1, 2});
  EXPECT_TRUE(grad_enabled());
  {
    NoGrad no_grad;
    EXPECT_FALSE(grad_enabled());
    Tensor y = x * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.grad_fn() == nullptr);
    {
      GradModeScope on(true);
      EXPECT_TRUE((x * 2.0).requires_grad());
    }
    EXPECT_FALSE(grad_enabled());
    // in-place updates of parameters are allowed here
    x -= 0.5;
  }
  EXPECT_TRUE(grad_enabled());
  EXPECT_EQ(values(x), (std::vector<double>{0.5, 1.5}));
  EXPECT_TRUE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
}

TEST(Autograd, DetachStopsGradients) {
  Tensor x = leaf({1, 2});
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_TRUE(d.shares_storage_with(x));
  Tensor y = sum(x * d);  // d is a constant: dy/dx = d
  y.backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 2}));
  Tensor z = (x * 3.0).detach();
  EXPECT_FALSE(z.requires_grad());
  EXPECT_TRUE(z.grad_fn() == nullptr);
}

TEST(Autograd, FunctionalGradLeavesGradUntouched) {
  Tensor x = from_vector<float>({1, 2, 3}, {3});
  auto f = [](const std::vector<Tensor>& in) { return sum(in[0] * in[0] * in[1]); };
  Tensor y = from_vector<float>({2, 2, 2}, {3});
  std::vector<Tensor> g = grad(f, {x, y});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(values(g[0]), (std::vector<double>{4, 8, 12}));  // 2 x y
  EXPECT_EQ(values(g[1]), (std::vector<double>{1, 4, 9}));   // x^2
  EXPECT_FALSE(x.requires_grad());
  // works under NoGrad too (f is run with recording on)
  {
    NoGrad no_grad;
    EXPECT_EQ(values(grad(f, {x, y})[0]), (std::vector<double>{4, 8, 12}));
  }
  // the leaves passed in keep their .grad()
  Tensor p = leaf({1, 2, 3});
  sum(p).backward();
  std::vector<Tensor> gp = grad(f, {p, y});
  EXPECT_EQ(values(gp[0]), (std::vector<double>{4, 8, 12}));
  EXPECT_EQ(values(p.grad()), (std::vector<double>{1, 1, 1}));
}

TEST(Autograd, GradOfOutputDoesNotTouchGrad) {
  Tensor x = leaf({1, 2, 3});
  Tensor unused = leaf({1, 1});
  Tensor h = x * x;
  Tensor out = sum(h * 2.0);
  std::vector<Tensor> g = grad(out, {x, unused});
  EXPECT_EQ(values(g[0]), (std::vector<double>{4, 8, 12}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{0, 0}));  // not used: zeros
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(unused.grad().defined());
  // with respect to an intermediate tensor
  std::vector<Tensor> gh = grad(out, {h});
  EXPECT_EQ(values(gh[0]), (std::vector<double>{2, 2, 2}));
  EXPECT_FALSE(x.grad().defined());
  // non-scalar output with a seed
  std::vector<Tensor> gs = grad(h, {x}, from_vector<float>({1, 0, 1}, {3}));
  EXPECT_EQ(values(gs[0]), (std::vector<double>{2, 0, 6}));
  EXPECT_THROW(grad(h, {x}), AutogradError);
  std::string m = error_message<AutogradError>([&] { grad(out, {ones({2})}); });
  EXPECT_TRUE(contains_all(m, {"grad", "(2,)", "does not require grad"}));
  // afterwards backward still works and fills .grad()
  out.backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{4, 8, 12}));
}

TEST(Autograd, RequiresGradOnNonLeafErrors) {
  Tensor x = leaf({1});
  Tensor y = exp(x);
  EXPECT_THROW(y.requires_grad_(), AutogradError);
  EXPECT_THROW(y.requires_grad_(false), AutogradError);
  EXPECT_TRUE(y.requires_grad());
  Tensor fresh = y.detach().requires_grad_();
  EXPECT_TRUE(fresh.is_leaf());
  x.requires_grad_(false);
  EXPECT_FALSE(x.requires_grad());
}

TEST(Autograd, MaxMinTiesSplitEqually) {
  Tensor x = leaf({1, 3, 3, 2});
  max(x).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 0.5, 0.5, 0}));
  Tensor m = leaf({1, 1, 1, 4, 0, 4}, {2, 3});
  min(m, {1}).backward(ones({2}));
  const double third = 1.0 / 3.0;
  std::vector<double> gm = values(m.grad());
  std::vector<double> expect = {third, third, third, 0, 1, 0};
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(gm[i], expect[i], 1e-7);
  Tensor k = leaf({5, 7, 5, 1}, {2, 2});
  max(k, {0}, true).backward(ones({1, 2}));
  EXPECT_EQ(values(k.grad()), (std::vector<double>{0.5, 1, 0.5, 0}));
  // elementwise maximum/minimum: ties split between the operands
  Tensor a = leaf({1, 2, 3}), b = leaf({3, 2, 1});
  sum(maximum(a, b)).backward();
  EXPECT_EQ(values(a.grad()), (std::vector<double>{0, 0.5, 1}));
  EXPECT_EQ(values(b.grad()), (std::vector<double>{1, 0.5, 0}));
  a.zero_grad();
  b.zero_grad();
  sum(minimum(a, b)).backward();
  EXPECT_EQ(values(a.grad()), (std::vector<double>{1, 0.5, 0}));
  EXPECT_EQ(values(b.grad()), (std::vector<double>{0, 0.5, 1}));
}

TEST(Autograd, IntermediateTensorsDoNotAccumulate) {
  Tensor x = leaf({1, 2});
  Tensor h = x * 2.0;
  sum(h).backward();
  EXPECT_FALSE(h.grad().defined());
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 2}));
}

TEST(Autograd, DtypeOfGradientMatchesTheLeaf) {
  Tensor x = leaf({1, 2});
  sum(x.astype(Float64) * 3.0).backward();
  EXPECT_EQ(x.grad().dtype(), Float32);
  EXPECT_EQ(values(x.grad()), (std::vector<double>{3, 3}));
  Tensor h = ones({2}, Float16);
  h.requires_grad_();
  sum(h * h).backward();
  EXPECT_EQ(h.grad().dtype(), Float16);
  EXPECT_EQ(values(h.grad()), (std::vector<double>{2, 2}));
}

TEST(Autograd, ViewsPassGradientsThrough) {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = x.T().reshape({6}).index({Slice(None, None, 2)});  // x[0,0], x[0,1]... transposed order
  // x.T() flattened: 1 4 2 5 3 6 -> [::2] = 1, 2, 3  (x[0, :])
  EXPECT_EQ(values(y), (std::vector<double>{1, 2, 3}));
  sum(y * y).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 4, 6, 0, 0, 0}));
}

// ---------------------------------------------------------------- summing contributions
// The engine sums a node's gradient contributions in place when it alone holds the first one;
// the sums are bitwise the out-of-place ones, also where a rule's gradient aliases another.
namespace {
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ac = a.copy(), bc = b.copy();
  return std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.nbytes()) == 0;
}
Tensor leaf(const Tensor& t) { return t.detach().copy().requires_grad_(); }
}  // namespace

TEST(GradientSum, SeveralConsumersAreBitwiseTheSeparateSums) {
  manual_seed(21);
  const Tensor xv = randn({6, 5}), c = randn({6, 5});
  {  // add passes one gradient to both inputs; u also reaches s through v
    Tensor x = leaf(xv);
    Tensor u = exp(x);
    Tensor s = u + u * 3.0;
    sum(s * c).backward();
    NoGrad off;
    const Tensor g = c;  // d loss / d s
    EXPECT_TRUE(same_bits(x.grad(), (g + g * 3.0) * exp(xv)));
  }
  {  // a tensor used twice in one op
    Tensor x = leaf(xv);
    Tensor u = x * 1.0;
    sum((u * u) * c).backward();
    NoGrad off;
    const Tensor uv = xv * 1.0;
    EXPECT_TRUE(same_bits(x.grad(), c * uv + c * uv));
  }
  {  // three contributions to one node (small integers: exact in any order)
    const Tensor xi = randint(-4, 5, {6, 5}).astype(Float32), ci = randint(-4, 5, {6, 5}).astype(Float32);
    Tensor x = leaf(xi);
    Tensor u = x * 1.0;
    sum((u * u) * ci + u * 3.0).backward();
    NoGrad off;
    EXPECT_TRUE(same_bits(x.grad(), ci * xi * 2.0 + 3.0));
  }
  {  // an input of add() that is also the other input's source: a + exp(a)
    Tensor x = leaf(xv);
    Tensor a = x * 2.0;
    sum((a + exp(a)) * c).backward();
    NoGrad off;
    const Tensor av = xv * 2.0;
    EXPECT_TRUE(same_bits(x.grad(), (c + c * exp(av)) * 2.0));
  }
}

TEST(GradientSum, EmbeddingUsedTwiceOnOneTable) {
  manual_seed(22);
  // small integers: the sums are exact in any order, so bitwise equality holds whichever
  // lookup's rows reach the table first; ids repeat within and across the lookups
  Tensor w = leaf(randint(-3, 4, {1000, 64}).astype(Float32));
  const Tensor ids1 = randint(0, 12, {8}), ids2 = randint(0, 12, {3, 8});
  const Tensor c1 = randint(-4, 5, {8, 64}).astype(Float32), c2 = randint(-4, 5, {3, 8, 64}).astype(Float32);
  const std::vector<Tensor> g1 = grad(sum(embedding(w, ids1) * c1), {w});
  const std::vector<Tensor> g2 = grad(sum(embedding(w, ids2) * c2), {w});
  Tensor loss = sum(embedding(w, ids1) * c1) + sum(embedding(w, ids2) * c2);
  const int64_t table = 1000 * 64 * 4;
  const int64_t before = memory_stats().current_bytes;
  reset_peak_memory();
  loss.backward();
  // one table: the second lookup's rows are added into the first's (Node::add_into), where a
  // whole second table and then a third for their sum were built before
  EXPECT_LT(memory_stats().peak_bytes - before, table + table / 2);
  {
    NoGrad off;
    EXPECT_TRUE(same_bits(w.grad(), g1[0] + g2[0]));
  }
  // a second backward into an existing .grad stays out of place: the first is unchanged
  Tensor first = leaf(randn({3}));
  sum(first * 2.0).backward();
  const Tensor kept = first.grad();
  const Tensor kept_copy = kept.copy();
  sum(first * 3.0).backward();
  EXPECT_TRUE(same_bits(kept, kept_copy));
  EXPECT_TRUE(same_bits(first.grad(), kept_copy + full({3}, 3.0f)));
}

TEST(GradientSum, EmbeddingAddsIntoTiedDenseGradientsAndKeepsPaddingRows) {
  manual_seed(24);
  const Tensor wv = randn({50, 16}), h = randn({4, 16});
  const Tensor ids = tensor<int64_t>({3, 0, 3, 7, 0, 9}).reshape({2, 3}), c = randn({2, 3, 16});
  // a tied table: an output projection (dense gradient) and two lookups, one with padding id 0
  auto f = [&](const Tensor& w) {
    return sum(matmul(h, w.T()) * 0.5) + sum(embedding(w, ids, 0) * c) + sum(embedding(w, ids) * c * 2.0);
  };
  Tensor w = leaf(wv);
  f(w).backward();
  // reference: each term's gradient alone, summed (rounding may differ: rows are added in place)
  Tensor w1 = leaf(wv), w2 = leaf(wv), w3 = leaf(wv);
  sum(matmul(h, w1.T()) * 0.5).backward();
  sum(embedding(w2, ids, 0) * c).backward();
  sum(embedding(w3, ids) * c * 2.0).backward();
  NoGrad off;
  const Tensor expected = w1.grad() + w2.grad() + w3.grad();
  EXPECT_TRUE(allclose(w.grad(), expected, 1e-5, 1e-6));
  // row 0 gets the padded lookup's nothing and the other lookup's rows
  EXPECT_TRUE(allclose(w.grad()[0], w1.grad()[0] + w3.grad()[0], 1e-5, 1e-6));
}

TEST(GradientSum, EmbeddingIntoASumIsRepeatableWithRetainedGraphAndCapture) {
  manual_seed(25);
  Tensor w = leaf(randint(-3, 4, {20, 8}).astype(Float32));
  const Tensor ids = randint(0, 20, {10}), c = randint(-2, 3, {10, 8}).astype(Float32);
  Tensor loss = sum(embedding(w, ids) * c) + sum(embedding(w, ids) * c * 3.0);
  backward(loss, Tensor(), /*retain_graph=*/true);
  const Tensor once = w.grad().copy();
  backward(loss);  // the saved ids and rules are used again: twice the gradient
  NoGrad off;
  EXPECT_TRUE(same_bits(w.grad(), once * 2.0));
  // grad() captures the summed gradient at the table without touching .grad()
  Tensor v = leaf(randint(-3, 4, {20, 8}).astype(Float32));
  std::vector<Tensor> g;
  {
    GradModeScope on(true);
    g = grad(sum(embedding(v, ids) * c) + sum(embedding(v, ids) * c * 3.0), {v});
  }
  EXPECT_TRUE(same_bits(g[0], once));
  EXPECT_FALSE(v.grad().defined());
}

TEST(GradientSum, AnUnsharedLeafGradTakesTheNextPassInPlace) {
  manual_seed(23);
  Tensor w = leaf(randn({1000, 64}));
  const Tensor c1 = randn({1000, 64}), c2 = randn({1000, 64});
  sum(w * c1).backward();
  const void* storage = w.grad().data_ptr();
  const Tensor g1 = w.grad().copy();
  Tensor loss = sum(w * c2);
  const int64_t table = 1000 * 64 * 4;
  const int64_t before = memory_stats().current_bytes;
  reset_peak_memory();
  loss.backward();
  // the pass's gradient only (out of place: it and the sum)
  EXPECT_LT(memory_stats().peak_bytes - before, table + table / 2);
  EXPECT_EQ(w.grad().data_ptr(), storage);
  NoGrad off;
  EXPECT_TRUE(same_bits(w.grad(), g1 + c2));
}
