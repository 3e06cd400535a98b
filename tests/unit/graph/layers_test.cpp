#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/memory.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/graph/module.h>
#include <loom/graph/serialize.h>
#include <loom/nn/activation.h>
#include <loom/nn/conv.h>
#include <loom/nn/dropout.h>
#include <loom/nn/embedding.h>
#include <loom/nn/init.h>
#include <loom/nn/input.h>
#include <loom/nn/lambda.h>
#include <loom/nn/layer.h>
#include <loom/nn/layers.h>
#include <loom/nn/linear.h>
#include <loom/nn/merge.h>
#include <loom/nn/mode.h>
#include <loom/nn/shape.h>
#include <loom/nn/state.h>
#include <loom/ops/conv.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/linalg.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

using namespace loom;

// TensorX Figure 2: state sharing through reuse_with with a Dropout in between.
TEST(Layers, Figure2ReuseWithSharesState) {
  manual_seed(1);
  nn::Input x1(2);
  x1.set_value(uniform({2, 2}));
  nn::Linear l1(x1, 3);
  nn::Activation a1(l1, nn::relu);
  nn::Linear l2(a1, 4);
  nn::Dropout d1(a1, 0.4);
  nn::Layer l3 = l2.reuse_with(d1);

  EXPECT_EQ(l3.shared_state(), l2.shared_state());
  EXPECT_EQ(l3.shape(), (Shape{-1, 4}));
  // in eval mode dropout is the identity, so both paths agree
  EXPECT_TRUE(allclose(l2(), l3()));
  // in train mode they differ (some activations dropped)
  {
    nn::ModeScope train(nn::Mode::Train);
    Tensor t = l3();
    EXPECT_EQ(t.shape(), (Shape{2, 4}));
  }
  // one SGD step through l3 is seen by l2
  Tensor before = l2().detach().copy();
  Tensor loss = sum(l3());
  loss.backward();
  {
    NoGrad ng;
    Tensor& w = l3.state().param("weights");
    w -= w.grad() * 0.5;
  }
  EXPECT_FALSE(allclose(l2(), before));
}

// TensorX Figure 3: an RNN cell written as a Module, unrolled with reuse_with.
TEST(Layers, Figure3ModuleRnnCell) {
  nn::Input x(2, Float32, "x");
  nn::Input h(4, Float32, "h");
  nn::Linear w(x, 4, {}, "w");
  nn::Linear u(h, 4, {.bias = false}, "u");
  nn::Activation out(nn::Add(w, u), nn::tanh);
  nn::Module cell({x, h}, out, "rnn_cell");
  EXPECT_EQ(cell.parameters().size(), 3u);

  nn::Input x2(2);
  nn::Layer step2 = cell.reuse_with({x2, cell});
  x.set_value(ones({3, 2}));
  h.set_value(zeros({3, 4}));
  x2.set_value(ones({3, 2}) * 2.0);
  Tensor h1 = cell();
  Tensor h2 = step2();
  // the second step is the cell applied to (x2, h1) with the same weights
  Tensor expect = tanh(matmul(x2.value(), w.state().param("weights")) + w.state().param("bias") +
                       matmul(h1, u.state().param("weights")));
  EXPECT_TRUE(allclose(h2, expect, 1e-5, 1e-6));
  EXPECT_EQ(step2.shared_state(), cell.shared_state());
}

// TensorX Figure 4: a graph with two inputs compiled to a function.
TEST(Layers, Figure4GraphFunction) {
  nn::Input x1(2, Float32, "x1");
  nn::Input x2(4, Float32, "x2");
  nn::Linear l1(x1, 4, {}, "l1");
  nn::Add l2(l1, x2, "l2");
  nn::Linear l3(l2, 2, {}, "l3");
  Graph g = Graph::build({l3}, {x1, x2});
  ASSERT_EQ(g.nodes().size(), 5u);
  EXPECT_EQ(g.nodes().back(), l3);
  auto fn = g.as_function();
  Tensor a = uniform({3, 2}), b = uniform({3, 4});
  Tensor y = fn({a, b})[0];
  x1.set_value(a);
  x2.set_value(b);
  EXPECT_TRUE(allclose(y, l3()));
  Plan plan = g.compile();
  EXPECT_TRUE(allclose(plan(a, b), y));
  EXPECT_NE(g.to_dot().find("Linear"), std::string::npos);
}

// One output needs no braces (issue 46): Graph::build(l1, {x1}) is Graph::build({l1}, {x1}).
TEST(Layers, BuildWithOneOutputWithoutBraces) {
  nn::Input x1(2, Float32, "x1");
  nn::Linear l1(x1, 3, {}, "l1");
  nn::Activation a1(l1, nn::relu, "a1");
  const Graph g = Graph::build(a1, {x1});
  const Graph braced = Graph::build({a1}, {x1});
  EXPECT_EQ(g.nodes(), braced.nodes());
  EXPECT_EQ(g.inputs(), std::vector<nn::Layer>{x1});
  EXPECT_EQ(g.outputs(), std::vector<nn::Layer>{a1});
  const Graph sub = Graph::build(a1, {l1});  // a chosen start layer, as with braces
  EXPECT_EQ(sub.nodes().size(), 2u);
  EXPECT_EQ(Graph::build(l1).inputs(), std::vector<nn::Layer>{x1});  // every Input reached
  const Tensor v = uniform({4, 2});
  EXPECT_TRUE(allclose(g.compile()(v), braced.compile()(v)));
  // several outputs still take the list
  EXPECT_EQ(Graph::build({l1, a1}, {x1}).outputs().size(), 2u);
}

TEST(Layers, GraphValidationErrors) {
  nn::Input x(2, Float32, "xin");
  nn::Input y(3, Float32, "yin");
  nn::Linear l(x, 2, {}, "lin");
  try {
    Graph::build({l}, {y});
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("yin"), std::string::npos);
  }
  nn::Input z(2, Float32, "zin");
  nn::Add both(l, nn::Linear(z, 2), "both");
  try {
    Graph::build({both}, {x});
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("zin"), std::string::npos) << e.what();
  }
  try {
    x.set_value(ones({2, 3}));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("xin"), std::string::npos);
  }
  nn::Input empty(2, Float32, "empty_in");
  try {
    empty.value();
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("empty_in"), std::string::npos);
  }
}

TEST(Layers, JsonRoundTripGivesIdenticalOutputs) {
  manual_seed(7);
  nn::Input x(3, Float32, "x");
  nn::Linear l1(x, 5, {}, "l1");
  nn::Activation a1(l1, nn::relu, "a1");
  nn::Dropout d1(a1, 0.3, 11, "d1");
  nn::Layer l2 = l1.reuse_with(x, "l2");  // shares l1's state
  nn::Concat cat({d1, l2}, -1, "cat");
  nn::Linear out(cat, 2, {.bias = false, .weight_init = nn::Init::normal(0, 0.3)}, "out");
  Graph g = Graph::build({out}, {x});
  const std::string text = graph_to_json(g);
  Graph h = graph_from_json(text);
  EXPECT_EQ(graph_to_json(h), text);  // the architecture survives exactly
  ASSERT_EQ(h.nodes().size(), g.nodes().size());
  // l1 and l2 share state in the rebuilt graph too
  const nn::Layer& hl1 = h.nodes()[1];
  EXPECT_EQ(hl1.name(), "l1");
  int sharing = 0;
  for (const auto& n : h.nodes()) sharing += n.shared_state() == hl1.shared_state();
  EXPECT_EQ(sharing, 2);
  copy_state(g, h);
  Tensor in = uniform({4, 3});
  EXPECT_TRUE(array_equal(g.compile()(in), h.compile()(in)));
}

TEST(Layers, JsonRejectsBadText) {
  EXPECT_THROW(graph_from_json("not json"), ValueError);
  EXPECT_THROW(graph_from_json(R"({"format":"other"})"), ValueError);
  try {
    graph_from_json(R"({"format":"loom.graph","version":1,"inputs":[],"outputs":["a"],
      "layers":[{"name":"a","kind":"Linear","inputs":["missing"],"options":{},"state":0,"shape":[-1,2],"dtype":"float32"}]})");
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
}

TEST(Layers, ModuleSurvivesJson) {
  nn::Input x(2, Float32, "x");
  nn::Input h(3, Float32, "h");
  nn::Activation out(nn::Add(nn::Linear(x, 3, {}, "w"), nn::Linear(h, 3, {.bias = false}, "u"), "wu"), nn::tanh, "o");
  nn::Module cell({x, h}, out, "cell");
  nn::Input x2(2, Float32, "x2");
  nn::Layer step2 = cell.reuse_with({x2, cell}, "step2");
  Graph g = Graph::build({step2}, {x, h, x2});
  Graph r = graph_from_json(graph_to_json(g));
  copy_state(g, r);
  Tensor a = uniform({2, 2}), b = uniform({2, 3}), c = uniform({2, 2});
  EXPECT_TRUE(allclose(g.compile().run({a, b, c})[0], r.compile().run({a, b, c})[0]));
}

TEST(Layers, ParamNotifiesAndDrivesDropout) {
  nn::Param p(0.0, "p");
  std::vector<double> seen;
  p.observe([&](double v) { seen.push_back(v); });
  nn::Input x(1000, Float32, "x");
  x.set_value(ones({4, 1000}));
  nn::Dropout d(x, p, 9);
  nn::ModeScope train(nn::Mode::Train);
  EXPECT_TRUE(array_equal(d(), x.value()));  // probability 0 keeps everything
  p.set_value(0.5);
  EXPECT_EQ(seen, std::vector<double>{0.5});
  const double kept = mean(astype(d() != 0.0, Float32)).item<double>();
  EXPECT_NEAR(kept, 0.5, 0.03);
  EXPECT_NEAR(d().max().item<double>(), 2.0, 1e-6);  // inverted scaling by 1 / (1 - p)
}

TEST(Layers, PlanFreesIntermediatesAfterTheirLastConsumer) {
  // a chain of 12 layers, each making a fresh 4 MB tensor; only a few may be alive at once
  nn::Input x(Shape{1024, 1024}, Float32, "x");
  nn::Layer l = x;
  int64_t peak_live = 0;
  const int64_t base = memory_stats().current_bytes;
  for (int i = 0; i < 12; ++i)
    l = nn::Lambda({l}, [&](const std::vector<Tensor>& t) {
      peak_live = std::max(peak_live, memory_stats().current_bytes - base);
      return t[0] + 1.0;
    }, l.shape());
  Plan plan = Graph::build({l}, {x}).compile();
  Tensor in = zeros({1024, 1024});
  NoGrad ng;
  Tensor out = plan(in);
  EXPECT_EQ(out.at({0, 0}), 12.0);
  EXPECT_LE(peak_live, int64_t(3) * 4 * 1024 * 1024);  // input + one intermediate (+ slack)
}

TEST(Layers, DotHighlightsSharedState) {
  nn::Input x(2, Float32, "x");
  nn::Linear l1(x, 2, {}, "first");
  nn::Layer l2 = l1.reuse_with(l1, "second");
  const std::string dot = Graph::build({l2}, {x}).to_dot();
  EXPECT_NE(dot.find("shared"), std::string::npos);
  EXPECT_NE(dot.find("first"), std::string::npos);
  EXPECT_NE(dot.find("Linear"), std::string::npos);
  EXPECT_NE(dot.find("fillcolor=lightblue"), std::string::npos);
}

// A network applied to an image and its mirror image (nn::Flip, whose values are nn's test)
// through one Module, test-time augmentation as the main job does it, gives the mean of the two
// direct calls and holds the network's parameters once.
TEST(Layers, FlipAveragesThroughAModule) {
  manual_seed(4);
  nn::Input in(Shape{-1, 1, 4, 4}, Float32, "in");
  nn::Linear head(nn::Flatten(nn::Conv2D(in, 2, 3, {.padding = 1}, "conv")), 3, {}, "head");
  nn::Module net({in}, head, "net");
  nn::Input image(Shape{-1, 1, 4, 4}, Float32, "image");
  nn::Mean averaged({net.reuse_with(image, "seen"), net.reuse_with(nn::Flip(image, {2}, "flipped"), "mirrored")}, "avg");
  const Graph tta = Graph::build({averaged}, {image});
  EXPECT_EQ(tta.parameters().size(), 4u);  // the conv's and the head's, once
  const Tensor batch = uniform({5, 1, 4, 4});
  const Plan direct = Graph::build({head}, {in}).compile();
  NoGrad no_grad;
  const Tensor expected = (direct(batch) + direct(flip(batch, {3}))) / 2.0;
  EXPECT_TRUE(allclose(tta.compile()(batch), expected, 1e-6, 1e-6));
}
