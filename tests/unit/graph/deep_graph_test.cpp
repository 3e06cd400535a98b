// Graphs as deep as they are long (issue 46): a chain of a million layers or a million recorded
// ops is built, traced, compiled, run, differentiated, written and destroyed without recursion
// on its depth. Recursion of one frame per layer overflowed the 8 MiB main-thread stack at
// about 30,000 layers (Graph::build) and in the destructors of a long chain, so these chains
// would crash the test binary, not fail an assertion.
#include <gtest/gtest.h>
#include <loom/core/grad_mode.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/graph/serialize.h>
#include <loom/nn/activation.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/mode.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/reduction.h>

#include <chrono>
#include <cstdio>

using namespace loom;

namespace {

constexpr int64_t kMillion = 1'000'000;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// x -> relu -> relu -> ... (n layers): the output, the input
nn::Layer relu_chain(const nn::Input& x, int64_t n) {
  nn::Layer h = x;
  for (int64_t k = 0; k < n; ++k) h = nn::Activation(h, nn::relu);
  return h;
}

}  // namespace

// Traced (Graph::build), compiled (every pass), run, summarized and drawn, then destroyed.
TEST(DeepGraph, MillionLayerChainBuildsCompilesRunsAndIsDestroyed) {
  auto t0 = std::chrono::steady_clock::now();
  {
    nn::Input x(Shape{-1, 3}, Float32, "x");
    Graph g = Graph::build({relu_chain(x, kMillion)}, {x});
    ASSERT_EQ(g.nodes().size(), static_cast<size_t>(kMillion + 1));
    EXPECT_EQ(g.nodes().front(), x);
    const double built = seconds_since(t0);
    const Plan plan = g.compile({{2, 3}});
    EXPECT_EQ(plan.output_shapes().at(0), (Shape{2, 3}));
    const Tensor in = from_vector<float>({-1, 2, -3, 4, -5, 6}, {2, 3});
    const Tensor y = plan(in);
    EXPECT_TRUE(allclose(y, relu(in)));
    // unfused too: a million steps one by one
    CompileOptions one_by_one{{{2, 3}}};
    one_by_one.fuse_elementwise = false;
    EXPECT_TRUE(allclose(g.compile(one_by_one)(in), relu(in)));
    EXPECT_GT(g.summary().size(), static_cast<size_t>(kMillion));
    EXPECT_GT(g.to_dot().size(), static_cast<size_t>(kMillion));
    std::printf("a chain of 1,000,000 layers: built and traced in %.1f s, all in %.1f s\n", built, seconds_since(t0));
  }
  std::printf("... and destroyed: %.1f s in all\n", seconds_since(t0));
}

// The last handle to a long chain dropped with no graph around it: the layers go one by one.
TEST(DeepGraph, MillionLayerChainWithoutGraphIsDestroyed) {
  nn::Input x(Shape{-1, 3}, Float32, "x");
  nn::Layer h = relu_chain(x, kMillion);
  EXPECT_EQ(h.inputs().size(), 1u);
  h = nn::Layer();
  EXPECT_EQ(x.impl().use_count(), 1);  // the first layer of the chain is gone too
}

// A deep graph written as JSON and read back (graph_from_json re-traces it).
TEST(DeepGraph, DeepChainThroughJson) {
  constexpr int64_t n = 200'000;  // the JSON text is ~100 bytes a layer
  nn::Input x(Shape{-1, 3}, Float32, "x");
  const Graph g = Graph::build({relu_chain(x, n)}, {x});
  const Graph back = graph_from_json(graph_to_json(g));
  ASSERT_EQ(back.nodes().size(), static_cast<size_t>(n + 1));
  const Tensor in = from_vector<float>({-1, 2, -3, 4, -5, 6}, {2, 3});
  EXPECT_TRUE(allclose(back.compile()(in), relu(in)));
}

// A cycle in a deep graph is still found, and named.
TEST(DeepGraph, CycleFoundIterativelyAndNamed) {
  nn::Input x(Shape{-1, 3}, Float32, "x");
  nn::Layer first = nn::Activation(x, nn::relu, "first");
  nn::Layer h = first;
  for (int k = 0; k < 1000; ++k) h = nn::Activation(h, nn::relu);
  nn::Layer last = nn::Activation(h, nn::relu, "last");
  first.impl()->inputs = {last};  // close the loop behind the API's back
  try {
    Graph::build({last}, {});
    ADD_FAILURE() << "a cycle was accepted";
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("has a cycle: last -> "), std::string::npos) << msg.substr(0, 200);
    EXPECT_NE(msg.find("first -> "), std::string::npos);
  }
  first.impl()->inputs = {x};  // so that the chain can be freed
}

// backward through a million recorded ops, and the recorded graph freed (after the pass, and
// without one).
TEST(DeepGraph, BackwardThroughMillionOpChain) {
  const auto t0 = std::chrono::steady_clock::now();
  Tensor x = from_vector<float>({1, -2, 3}, {3}).requires_grad_();
  {
    Tensor y = x;
    for (int64_t k = 0; k < kMillion; ++k) y = negative(y);  // an even count: y == x
    sum(y * from_vector<float>({1, 2, 3}, {3})).backward();
  }
  EXPECT_TRUE(allclose(x.grad(), from_vector<float>({1, 2, 3}, {3})));
  {
    Tensor y = x;
    for (int64_t k = 0; k < kMillion; ++k) y = negative(y);
  }  // dropped without backward: a million nodes, each holding the next
  std::printf("backward through 1,000,000 ops and two chains freed: %.1f s\n", seconds_since(t0));
}
