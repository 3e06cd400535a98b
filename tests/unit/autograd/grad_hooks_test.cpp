// Post-accumulate-grad hooks (on_grad_accumulated): once per leaf and pass, after the last
// contribution, with the final value; removed by their handle; a throwing hook leaves every
// .grad() as it was.
#include <algorithm>
#include <stdexcept>

#include "unit/common/core_test_util.h"
#include "loom/autograd/autograd.h"
#include "loom/autograd/hooks.h"
#include "loom/core/dim_vector.h"
#include "loom/core/error.h"
#include "loom/core/scalar.h"
#include "loom/core/shape.h"
#include "loom/core/tensor.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"

using namespace loom;
using loom_test::values;

namespace {
Tensor leaf(std::vector<float> v) {
  Tensor t = from_vector(v, {static_cast<int64_t>(v.size())});
  t.requires_grad_();
  return t;
}
}  // namespace

TEST(GradHooks, FireOnceAfterTheLastContributionWithTheFinalValue) {
  Tensor w = leaf({1, 2}), x = leaf({3, 4});
  std::vector<std::vector<float>> seen;
  std::vector<char> order;
  GradHookHandle hw = on_grad_accumulated(w, [&](const Tensor& g) {
    seen.push_back(values<float>(g));
    order.push_back('w');
  });
  GradHookHandle hx = on_grad_accumulated(x, [&](const Tensor&) { order.push_back('x'); });
  // w is used twice, on both sides of x's only use: the hook must wait for both contributions
  Tensor y = ((w * x) * w + w * 3.0).sum();
  y.backward();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<float>{2 * 1 * 3 + 3, 2 * 2 * 4 + 3}));  // d/dw (w^2 x + 3w)
  EXPECT_EQ(values<float>(w.grad()), seen[0]);
  EXPECT_EQ(std::count(order.begin(), order.end(), 'x'), 1);
  // a second pass: the hook sees the accumulated value (what .grad() then holds)
  ((w * x) * w + w * 3.0).sum().backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], (std::vector<float>{18, 38}));
  EXPECT_EQ(values<float>(w.grad()), seen[1]);
  // grad() does not accumulate: no hook
  grad((w * x).sum(), {w});
  EXPECT_EQ(seen.size(), 2u);
}

TEST(GradHooks, RemovedHooksDoNotFire) {
  Tensor w = leaf({1, 2});
  int a = 0, b = 0;
  GradHookHandle ha = on_grad_accumulated(w, [&](const Tensor&) { ++a; });
  {
    GradHookHandle hb = on_grad_accumulated(w, [&](const Tensor&) { ++b; });
    (w * w).sum().backward();
  }  // hb destroyed
  (w * w).sum().backward();
  EXPECT_EQ(a, 2);
  EXPECT_EQ(b, 1);
  GradHookHandle moved = std::move(ha);
  EXPECT_FALSE(ha.active());
  moved.remove();
  moved.remove();  // idempotent
  (w * w).sum().backward();
  EXPECT_EQ(a, 2);
  EXPECT_FALSE(moved.active());
}

TEST(GradHooks, AThrowingHookLeavesEveryGradUnchanged) {
  Tensor w = leaf({1, 2}), x = leaf({3, 4});
  (w * x).sum().backward();
  const auto w0 = values<float>(w.grad()), x0 = values<float>(x.grad());
  bool fail = true;
  int calls = 0;
  GradHookHandle h = on_grad_accumulated(w, [&](const Tensor&) {
    ++calls;
    if (fail) throw std::runtime_error("no room for this gradient");
  });
  try {
    (w * x).sum().backward();
    FAIL() << "backward should have thrown";
  } catch (const AutogradError& e) {
    EXPECT_NE(std::string(e.what()).find("no room for this gradient"), std::string::npos) << e.what();
  }
  EXPECT_EQ(values<float>(w.grad()), w0);
  EXPECT_EQ(values<float>(x.grad()), x0);
  // loom::Errors pass unchanged
  GradHookHandle h2 = on_grad_accumulated(x, [&](const Tensor&) { throw ShapeError("bad shape here"); });
  fail = false;
  EXPECT_THROW((w * x).sum().backward(), ShapeError);
  EXPECT_EQ(values<float>(w.grad()), w0);
  // state intact: with the throwing hook gone, backward works and hooks still fire
  h2.remove();
  const int before = calls;
  (w * x).sum().backward();
  EXPECT_EQ(values<float>(w.grad()), (std::vector<float>{6, 8}));
  EXPECT_EQ(calls, before + 1);
}

TEST(GradHooks, RejectNonLeavesAndEmptyHooks) {
  Tensor w = leaf({1});
  EXPECT_THROW((void)on_grad_accumulated(w * 2.0, [](const Tensor&) {}), AutogradError);
  EXPECT_THROW((void)on_grad_accumulated(ones({1}), [](const Tensor&) {}), AutogradError);
  EXPECT_THROW((void)on_grad_accumulated(w, nullptr), AutogradError);
}
