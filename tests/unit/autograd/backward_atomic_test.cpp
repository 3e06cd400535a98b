// backward is all or nothing for the leaves' .grad(): new gradients are computed into fresh
// tensors during the pass and assigned only when the whole pass has succeeded.
#include <loom/autograd/autograd.h>
#include <loom/core/dim_vector.h>
#include <loom/core/error.h>
#include <loom/core/memory.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/reduction.h>

#include "unit/common/core_test_util.h"
#include "unit/ops/ops_test_util.h"

using namespace loom;
using loom_test::iota;
using loom_test::values;

namespace {
struct LimitGuard {  // removes the memory limit when the test ends, even on failure
  ~LimitGuard() { set_memory_limit(-1); }
};
}  // namespace

TEST(BackwardAllOrNothing, OutOfMemoryMidBackwardLeavesEveryGradUnchanged) {
  LimitGuard guard;
  // retain_graph: the pass frees no saved tensor on its way, so each of its allocations needs
  // more memory than the one before and the sweep below fails at every one of them; without
  // it (the default) the saved tensors freed on the way leave room for later allocations
  for (const bool retain : {true, false}) {
    SCOPED_TRACE(retain ? "retain_graph" : "saved tensors freed during the pass");
    Tensor a = iota({16}).requires_grad_(), b = iota({16}).requires_grad_(), c = iota({16}).requires_grad_();
    auto loss = [&] { return add(add(sum(multiply(a, a)), sum(exp(b * 0.01))), sum(multiply(c, b))); };
    loss().backward();  // every leaf holds a gradient now
    const auto ga = values(a.grad()), gb = values(b.grad()), gc = values(c.grad());
    // raise the limit one 64-byte block at a time: the pass runs out of memory at each of its
    // allocations in turn, after ever more leaves have received their part
    int failures = 0;
    bool succeeded = false;
    for (int64_t extra = 0; extra <= 64 * 512 && !succeeded; extra += 64) {
      Tensor l = loss();
      set_memory_limit(memory_stats().current_bytes + extra);
      try {
        backward(l, Tensor(), retain);
        succeeded = true;
      } catch (const OutOfMemoryError&) {
        ++failures;
      }
      set_memory_limit(-1);
      if (succeeded) break;
      ASSERT_EQ(values(a.grad()), ga) << "after running out of memory with " << extra << " bytes to spare";
      ASSERT_EQ(values(b.grad()), gb) << "after running out of memory with " << extra << " bytes to spare";
      ASSERT_EQ(values(c.grad()), gc) << "after running out of memory with " << extra << " bytes to spare";
    }
    ASSERT_TRUE(succeeded);
    // the limit was hit at many points of the pass, the leaves' sums included (a's two
    // contributions from a * a are summed in place, without an allocation)
    EXPECT_GE(failures, retain ? 5 : 3);
    // the successful pass accumulated exactly once
    for (size_t i = 0; i < ga.size(); ++i) {
      EXPECT_EQ(values(a.grad())[i], 2 * ga[i]);
      EXPECT_EQ(values(b.grad())[i], 2 * gb[i]);
      EXPECT_EQ(values(c.grad())[i], 2 * gc[i]);
    }
  }
}

TEST(BackwardAllOrNothing, AFailingRuleLeavesEveryGradUnchanged) {
  // the version check fails in the middle of the pass: leaves reached before keep their grads
  Tensor a = tensor<float>({1, 2}).requires_grad_();
  Tensor w = tensor<float>({3, 4});
  Tensor y = add(sum(a), sum(multiply(a, w)));
  w += 1.0;
  EXPECT_THROW(y.backward(), AutogradError);
  EXPECT_FALSE(a.grad().defined());
  Tensor z = add(sum(a), sum(a));
  z.backward();
  EXPECT_EQ(values(a.grad()), (std::vector<double>{2, 2}));
}
