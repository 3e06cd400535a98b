// A compiled plan's inference runs (no gradients: Model::predict and evaluate, the model
// server, Graph::as_function under NoGrad) compute batch-invariant products
// (include/loom/core/batch_invariance.h): a row's outputs have the same bits whatever rows
// ran with it. Runs natively and capped to AVX2 (determinism_avx2).
#include <loom/core/batch_invariance.h>
#include <loom/core/dtype.h>
#include <loom/core/grad_mode.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/core/parallel.h>
#include <loom/nn/activation.h>
#include <loom/nn/conv.h>
#include <loom/nn/normalization.h>
#include <loom/nn/pooling.h>
#include <loom/nn/shape.h>
#include <loom/nn/input.h>
#include <loom/nn/linear.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>

#include <algorithm>

#include "unit/common/core_test_util.h"

using namespace loom;

namespace {
Tensor rows_of(const Tensor& t, int64_t r0, int64_t r1) { return slice(t, 0, r0, r1).copy(); }
}  // namespace

// A compiled plan's inference run (no gradients) is batch-invariant; with gradients recorded
// (training) it leaves the mode off.
TEST(PlanBatchInvariance, InferenceRunsGiveEachRowTheSameBitsInAnyBatch) {
  manual_seed(5);
  nn::Input x(784, Float32, "x");
  nn::Linear h(x, 300, {}, "h");
  nn::Activation r(h, nn::relu);
  nn::Linear h2(r, 100, {.transpose_weights = true}, "h2");
  nn::Activation t(h2, nn::tanh);
  nn::Linear out(t, 10, {}, "out");
  const Graph graph = Graph::build({out}, {x});
  const Plan plan = graph.compile();
  Generator g(9);
  const Tensor batch = uniform({37, 784}, -1, 1, Float32, Device::cpu(), &g);
  NoGrad off;
  const Tensor whole = plan.run({batch})[0];
  for (int64_t r = 0; r < 37; ++r)
    ASSERT_TRUE(array_equal(plan.run({rows_of(batch, r, r + 1)})[0], slice(whole, 0, r, r + 1))) << "row " << r;
  for (int64_t r = 0; r + 8 <= 37; r += 8)
    ASSERT_TRUE(array_equal(plan.run({rows_of(batch, r, r + 8)})[0], slice(whole, 0, r, r + 8))) << "rows " << r;
  // the graph as a function: the same plan, the same bits
  EXPECT_TRUE(array_equal(graph.as_function()({batch})[0], whole));
}

// A small CNN (convolutions with padding, batch norm folded in Eval mode, ReLU, max pooling, a
// dense head): each image's logits with the same bits alone, in uneven batches and in the
// whole batch, at 1 and 2 threads (the batch slices shared out over the threads differ).
TEST(PlanBatchInvariance, ACnnGivesEachImageTheSameBitsInAnyBatch) {
  struct ThreadCountGuard {
    int saved = get_num_threads();
    ~ThreadCountGuard() { set_num_threads(saved); }
  } guard;
  manual_seed(8);
  nn::Input x(Shape{-1, 3, 16, 16}, Float32, "x");
  nn::Conv2D c1(x, 8, {3, 3}, {.padding = "same"}, "c1");
  nn::BatchNorm bn(c1, {}, "bn");
  nn::Activation r1(bn, nn::relu);
  nn::MaxPool2D p1(r1, {2, 2}, {}, "p1");
  nn::Conv2D c2(p1, 16, {3, 3}, {}, "c2");
  nn::Activation r2(c2, nn::relu);
  nn::Flatten f(r2, "f");
  nn::Linear out(f, 5, {}, "out");
  const Graph graph = Graph::build({out}, {x});
  const Plan plan = graph.compile();
  Generator g(4);
  const Tensor batch = uniform({11, 3, 16, 16}, -1, 1, Float32, Device::cpu(), &g);
  NoGrad off;
  set_num_threads(1);
  const Tensor whole = plan.run({batch})[0];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    ASSERT_TRUE(array_equal(plan.run({batch})[0], whole)) << threads << " threads";
    for (int64_t step : {int64_t{1}, int64_t{3}, int64_t{4}})
      for (int64_t r = 0; r < 11; r += step) {
        const int64_t r1 = std::min<int64_t>(11, r + step);
        ASSERT_TRUE(array_equal(plan.run({rows_of(batch, r, r1)})[0], slice(whole, 0, r, r1)))
            << "images " << r << ".." << r1 << ", " << threads << " threads";
      }
  }
}
