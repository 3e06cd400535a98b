// The TensorGraph README's examples written with Loom layers, with their results asserted.
#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/nn/activation.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/nn/merge.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

using namespace loom;

namespace {

void sgd_step(const std::vector<Tensor>& params, double lr) {
  NoGrad ng;
  for (Tensor p : params) {
    if (!p.grad().defined()) continue;
    p -= p.grad() * lr;
    p.zero_grad();
  }
}

std::vector<Tensor> params_of(const Graph& g) {
  std::vector<Tensor> out;
  for (const auto& l : g.nodes())
    for (const Tensor& p : l.parameters()) {
      bool seen = false;
      for (const Tensor& q : out) seen = seen || q.impl() == p.impl();
      if (!seen) out.push_back(p);
    }
  return out;
}

}  // namespace

// Graph(start=[s1, s2], end=[e1, e2]) and the sub-path Graph(start=[s2], end=[e1]).
TEST(TensorGraph, TwoStartsTwoEndsAndSubPath) {
  const int64_t y1_dim = 50, y2_dim = 100;
  nn::Input s1(y1_dim, Float32, "s1"), s2(y2_dim, Float32, "s2");
  nn::Activation h1(nn::Linear(nn::Concat({s1, s2}), y2_dim), nn::relu, "h1");
  nn::Activation h2(nn::Linear(s2, y2_dim), nn::relu, "h2");
  nn::Activation h3(nn::Linear(nn::Concat({h1, h2}), y1_dim), nn::relu, "h3");
  Graph whole = Graph::build({h3, h2}, {s1, s2});
  Tensor x1 = uniform({32, y1_dim}), x2 = uniform({32, y2_dim});
  auto outs = whole.compile().run({x1, x2});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].shape(), (Shape{32, y1_dim}));
  EXPECT_EQ(outs[1].shape(), (Shape{32, y2_dim}));

  // from s2 only to e1: s1 is outside the path and must hold a value
  try {
    Graph::build({h3}, {s2});
    FAIL() << "s1 holds no value";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("s1"), std::string::npos) << e.what();
  }
  s1.set_value(x1);
  Graph sub = Graph::build({h3}, {s2});
  EXPECT_TRUE(allclose(sub.compile()(x2), outs[0]));

  // a path that starts at hidden layers: h3 as a function of (h1, h2)
  Graph mid = Graph::build({h3}, {h1, h2});
  EXPECT_EQ(mid.inputs().size(), 2u);
  s2.set_value(x2);
  EXPECT_TRUE(allclose(mid.compile().run({h1(), h2()})[0], outs[0]));
}

// Hierarchical softmax: each level conditioned on the ones above, merged by Sum.
TEST(TensorGraph, HierarchicalSoftmaxTrains) {
  manual_seed(3);
  const int64_t x_dim = 50, c = 100;
  nn::Input x(x_dim, Float32, "x");
  nn::Activation h1(nn::Linear(x, c), nn::softmax, "h1");
  nn::Activation h2(nn::Linear(h1, c), nn::softmax, "h2");
  nn::Activation h3(nn::Linear(h2, c), nn::softmax, "h3");
  nn::Layer e1 = h1;
  nn::Add e2({h1, h2}, "e2");
  nn::Add e3({h1, h2, h3}, "e3");
  Graph g = Graph::build({e1, e2, e3}, {x});
  Plan plan = g.compile();
  Tensor xs = uniform({32, x_dim});
  Tensor y1 = softmax(uniform({32, c}) * 4.0), y2 = y1 * 2.0, y3 = y1 * 3.0;
  auto loss_of = [&] {
    auto o = plan.run({xs});
    return mean(square(o[0] - y1)) + mean(square(o[1] - y2)) + mean(square(o[2] - y3));
  };
  const double before = loss_of().item<double>();
  double prev = before;
  for (int step = 0; step < 20; ++step) {
    Tensor loss = loss_of();
    EXPECT_LE(loss.item<double>(), prev + 1e-9) << "step " << step;  // gradient descent never goes up
    prev = loss.item<double>();
    loss.backward();
    sgd_step(params_of(g), 1.0);
  }
  EXPECT_LT(loss_of().item<double>(), before);
}

// Transfer learning: two modalities merged by Sum into a shared representation; the
// modality-1 branch is then reused in a new single-modality model that shares its weights.
TEST(TensorGraph, TransferLearningSharesRepresentation) {
  manual_seed(5);
  const int64_t x1_dim = 50, x2_dim = 100, shared = 200, y_dim = 100;
  nn::Input s1(x1_dim, Float32, "s1"), s2(x2_dim, Float32, "s2");
  nn::Linear l1(s1, shared, {}, "l1");
  nn::Activation h1(l1, nn::relu, "h1");
  nn::Activation h2(nn::Linear(s2, shared), nn::relu, "h2");
  nn::Linear head(nn::Add(h1, h2), y_dim, {}, "head");
  nn::Activation e1(head, nn::softmax, "e1");
  Graph g = Graph::build({e1}, {s1, s2});
  Tensor a = uniform({32, x1_dim}), b = uniform({32, x2_dim}), y = softmax(uniform({32, y_dim}) * 5.0);
  Plan plan = g.compile();
  const double before = mean(square(plan(a, b) - y)).item<double>();
  for (int step = 0; step < 20; ++step) {
    mean(square(plan(a, b) - y)).backward();
    sgd_step(params_of(g), 200.0);
  }
  EXPECT_LT(mean(square(plan(a, b) - y)).item<double>(), before);

  // new model for modality 1 alone, on the trained shared branch
  nn::Input t1(x1_dim, Float32, "t1");
  nn::Layer branch = l1.reuse_with(t1);
  nn::Activation rep(branch, nn::relu);
  nn::Linear new_head(rep, 10, {}, "new_head");
  EXPECT_EQ(branch.shared_state(), l1.shared_state());
  t1.set_value(a);
  s1.set_value(a);
  EXPECT_TRUE(allclose(rep(), h1()));
  EXPECT_EQ(new_head().shape(), (Shape{32, 10}));
}
