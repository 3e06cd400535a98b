// Graph::layer(name), unique layer names at build, Graph::parameters(), summary() and the
// stream operators of Layer and Graph.
#include <gtest/gtest.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/graph/module.h>
#include <loom/nn/activation.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/nn/merge.h>
#include <loom/nn/state.h>
#include <loom/train/losses.h>
#include <loom/train/metrics.h>
#include <loom/train/model.h>
#include <loom/train/optimizers.h>
#include <loom/train/regularizers.h>
#include <loom/train/train_step.h>
#include <loom/zoo/architectures.h>

#include <sstream>

#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;

namespace {

// x -> h (Linear 8) -> a (relu) -> h2 (Linear 8) -> h3 (h2 reused: shared state)
struct Small {
  nn::Input x{4, Float32, "x"};
  nn::Linear h{x, 8, {}, "h"};
  nn::Activation a{h, nn::relu, "a"};
  nn::Linear h2{a, 8, {}, "h2"};
  nn::Layer h3 = h2.reuse_with(h2, "h3");
  Graph g = Graph::build({h3}, {x});
};

}  // namespace

TEST(GraphApi, LayerByName) {
  Small s;
  EXPECT_EQ(s.g.layer("h2"), s.h2);
  EXPECT_EQ(s.g.layer("x"), s.x);
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { s.g.layer("h4"); }),
                           {"Graph::layer", "'h4'", "'x', 'h', 'a', 'h2', 'h3'"}));
}

TEST(GraphApi, DuplicateNamesAreRefusedAtBuild) {
  nn::Input x(4, Float32, "x");
  nn::Linear a(x, 3, {}, "dense");
  nn::Linear b(x, 3, {}, "dense");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { Graph::build({nn::Add(a, b, "sum")}, {x}); }),
                           {"Graph::build", "'dense'", "unique"}));
  // an output named like an input
  nn::Activation y(x, nn::relu, "x");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { Graph::build({y}); }), {"'x'", "kinds Input and Activation"}));
  // the same layer reached twice is one node, not a duplicate
  EXPECT_EQ(Graph::build({nn::Add(a, a, "twice")}, {x}).nodes().size(), 3u);
}

TEST(GraphApi, ParametersOnceEachIncludingModulesAndTiedWeights) {
  Small s;
  const auto p = s.g.parameters();
  ASSERT_EQ(p.size(), 4u);  // h's and h2's weights and bias; h3 shares h2's
  EXPECT_EQ(p[0].impl(), s.h.state().param("weights").impl());
  EXPECT_EQ(p[3].impl(), s.h2.state().param("bias").impl());

  nn::Input in(4, Float32, "in");
  nn::Module block({in}, nn::Linear(in, 4, {}, "inner"), "block");
  nn::Input x(4, Float32, "x");
  nn::Layer first = block.reuse_with(x, "first");
  nn::Linear tied(first, 4, {.bias = false, .shared_weights = block.state().all_params()[0].second, .transpose_weights = true}, "tied");
  Graph g = Graph::build({tied}, {x});
  const auto q = g.parameters();
  ASSERT_EQ(q.size(), 2u);  // the module's inner weights and bias; tied adds none
  EXPECT_EQ(zoo::parameter_count(g), 4 * 4 + 4);
  // train::parameters(layers) is each listed layer's own
  EXPECT_EQ(train::parameters({s.h}).size(), 2u);
}

TEST(GraphApi, SummaryTable) {
  Small s;
  const std::string expected =
      "Layer  Kind        Output shape  Params  Shares state with\n"
      "==========================================================\n"
      "x      Input       (-1, 4)            0\n"
      "h      Linear      (-1, 8)           40\n"
      "a      Activation  (-1, 8)            0\n"
      "h2     Linear      (-1, 8)           72\n"
      "h3     Linear      (-1, 8)           72  h2\n"
      "==========================================================\n"
      "Total params: 112\n"
      "Trainable params: 112\n"
      "Non-trainable params: 0\n";
  EXPECT_EQ(s.g.summary(), expected);
  std::ostringstream os;
  os << s.g;
  EXPECT_EQ(os.str(), expected);
  // a frozen tensor is not trainable
  s.h.state().param("bias").requires_grad_(false);
  EXPECT_NE(s.g.summary().find("Trainable params: 104\nNon-trainable params: 8\n"), std::string::npos) << s.g.summary();
}

TEST(GraphApi, LayerStreamOperator) {
  Small s;
  std::ostringstream os;
  os << s.h2 << "; " << nn::Layer() << "; " << s.x;
  EXPECT_EQ(os.str(), "Linear 'h2' (-1, 8); Layer(undefined); Input 'x' (-1, 4)");
}

TEST(GraphApi, ModelSummaryAddsOptimizerAndMetrics) {
  Small s;
  train::Model m(s.g, [](const Tensor& y, const Tensor& t) { return train::mse(y, t); },
                 std::make_shared<train::SGD>(s.g.parameters(), train::SGDOptions{.lr = 0.05}),
                 {std::make_shared<train::Accuracy>()});
  EXPECT_EQ(m.summary(), s.g.summary() + "Optimizer: SGD (lr 0.05) over 4 tensors, 112 values\nMetrics: accuracy\n");
}
