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

TEST(Layers, ShapeAndEncodingLayers) {
  nn::Input img(Shape{-1, 2, 3}, Float32, "img");
  nn::Flatten flat(img);
  EXPECT_EQ(flat.shape(), (Shape{-1, 6}));
  nn::Transpose tr(img, {1, 0});
  EXPECT_EQ(tr.shape(), (Shape{-1, 3, 2}));
  EXPECT_THROW(nn::Reshape(img, {4}), ShapeError);
  Tensor v = arange(0, 12, 1).reshape({2, 2, 3});
  img.set_value(v);
  EXPECT_TRUE(array_equal(flat(), v.reshape({2, 6})));
  EXPECT_TRUE(array_equal(tr(), v.transpose({0, 2, 1})));

  nn::Input ids(Shape{-1, 3}, Int64, "ids");
  ids.set_value(from_vector<int64_t>({1, 0, 1, 2, 2, 0}, {2, 3}));
  nn::OneHot oh(ids, 3);
  EXPECT_EQ(oh.shape(), (Shape{-1, 3, 3}));
  Tensor o = oh();
  EXPECT_EQ(o.at({0, 0, 1}), 1.0);
  EXPECT_EQ(sum(o).item<double>(), 6.0);

  nn::Lookup emb(ids, 5, 4, {.padding_id = 0}, "emb");
  EXPECT_EQ(emb.shape(), (Shape{-1, 3, 4}));
  Tensor e = emb();
  EXPECT_EQ(sum(abs(e.index({0, 1}))).item<double>(), 0.0);  // id 0 is padding
  sum(e).backward();
  Tensor g = emb.state().param("weights").grad();
  // id 1 appears twice, id 2 twice, padding id 0 gets nothing
  EXPECT_EQ(g.at({1, 0}), 2.0);
  EXPECT_EQ(g.at({2, 3}), 2.0);
  EXPECT_EQ(g.at({0, 0}), 0.0);
  EXPECT_EQ(g.at({3, 0}), 0.0);
}

TEST(Layers, ResidualProjectsWhenUnitsDiffer) {
  nn::Input x(3, Float32, "x");
  nn::Linear h(x, 5);
  nn::Residual r(x, h);
  EXPECT_EQ(r.parameters().size(), 1u);  // the projection
  nn::Linear h3(x, 3);
  nn::Residual r3(x, h3);
  EXPECT_TRUE(r3.parameters().empty());
  x.set_value(ones({2, 3}));
  EXPECT_TRUE(allclose(r3(), x.value() + h3()));
  Graph g = Graph::build({r}, {x});
  Graph back = graph_from_json(graph_to_json(g));
  copy_state(g, back);
  Tensor in = uniform({2, 3});
  EXPECT_TRUE(allclose(g.compile()(in), back.compile()(in)));
}

TEST(Layers, MergeModesAndOperators) {
  nn::Input a(3, Float32, "a"), b(3, Float32, "b");
  a.set_value(ones({2, 3}) * 2.0);
  b.set_value(ones({2, 3}) * 5.0);
  EXPECT_EQ(nn::Merge({a, b}, nn::MergeMode::Sum)().at({0, 0}), 7.0);
  EXPECT_EQ(nn::Merge({a, b}, nn::MergeMode::Mean)().at({1, 2}), 3.5);
  EXPECT_EQ(nn::Merge({a, b}, nn::MergeMode::Multiply)().at({0, 1}), 10.0);
  EXPECT_EQ(nn::Merge({a, b}, nn::MergeMode::Subtract)().at({0, 1}), -3.0);
  nn::Merge cat({a, b}, nn::MergeMode::Concat);
  EXPECT_EQ(cat.shape(), (Shape{-1, 6}));
  EXPECT_EQ((a + b)().at({0, 0}), 7.0);
  EXPECT_EQ((a - b)().at({0, 0}), -3.0);
  EXPECT_EQ((a * b)().at({0, 0}), 10.0);
  EXPECT_EQ((a * 2.0)().at({0, 0}), 4.0);
  EXPECT_EQ((a + 1.0)().at({0, 0}), 3.0);
  nn::Input c(4, Float32, "c4");
  try {
    nn::Add bad(a, c, "bad_add");
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("c4"), std::string::npos) << e.what();
  }
  try {
    nn::Input ints(3, Int64, "ints");
    nn::Linear l(ints, 2);
    FAIL();
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("ints"), std::string::npos) << e.what();
  }
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

// RMSNorm and SwiGLU, the blocks of Llama: values as their formulas (rms_norm and silu are checked
// against PyTorch in tests/reference), parameters and their gradients, shapes, bad arguments.
TEST(Layers, RMSNormAndSwiGLUComputeTheirFormulas) {
  manual_seed(11);
  nn::Input x(Shape{-1, 3, 8}, Float32, "x");
  nn::RMSNorm norm(x, 1e-5, "norm");
  nn::SwiGLU mlp(norm, 12, nn::Init::glorot_uniform(), "mlp");
  EXPECT_EQ(norm.shape(), (Shape{-1, 3, 8}));
  EXPECT_EQ(mlp.shape(), (Shape{-1, 3, 8}));
  EXPECT_EQ(std::string(norm.kind()), "RMSNorm");
  EXPECT_EQ(norm.parameters().size(), 1u);  // the weight, no bias
  const std::vector<Tensor> p = mlp.parameters();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].shape(), (Shape{8, 12}));  // gate
  EXPECT_EQ(p[2].shape(), (Shape{12, 8}));  // down
  Tensor w = norm.parameters()[0];
  {
    NoGrad set;
    w.copy_(uniform({8}, 0.5, 1.5));  // not the initial ones
  }
  const Tensor v = uniform({2, 3, 8}, -2, 2);
  x.set_value(v);
  const Tensor want_norm = v / sqrt(mean(v * v, {-1}, true) + 1e-5) * w;
  EXPECT_TRUE(allclose(norm(), want_norm, 1e-5, 1e-6));
  const Tensor g = matmul(want_norm, p[0]), u = matmul(want_norm, p[1]);
  const Tensor want = matmul(g * (1.0 / (1.0 + exp(negative(g)))) * u, p[2]);
  EXPECT_TRUE(allclose(mlp(), want, 1e-5, 1e-6));

  // gradients reach the norm's weight and the three matrices
  const Plan plan = Graph::build({mlp}, {x}).compile();
  sum(plan(v)).backward();
  EXPECT_TRUE(w.grad().defined());
  for (const Tensor& t : p) EXPECT_GT(max(abs(t.grad())).item(), 0.0);

  EXPECT_THROW(nn::RMSNorm(x, -1.0), ValueError);
  EXPECT_THROW(nn::SwiGLU(x, 0), ValueError);
  nn::Input ids(Shape{-1, 4}, Int64, "ids");
  EXPECT_THROW(nn::SwiGLU(ids, 4), DTypeError);
}

// AxisSlice takes a range of one axis after the batch axis, as NumPy's x[:, ..., start:stop:step]:
// values and shapes for plain, negative, clamped and stepped bounds, the gradient (zeros outside
// the range), and bad arguments named.
TEST(Layers, AxisSliceTakesARangeOfOneAxis) {
  nn::Input img(Shape{-1, 6, 3, 4}, Float32, "img");
  const Tensor v = arange(0, 144, 1).astype(Float32).reshape({2, 6, 3, 4});
  img.set_value(v);
  nn::AxisSlice first(img, 0, 0, 3, 1, "first");  // x.chunk(2, dim=1)[0]
  nn::AxisSlice second(img, 0, 3);                // to the end
  nn::AxisSlice tail(img, 2, -3, -1);             // x[..., -3:-1]
  nn::AxisSlice stepped(img, 0, 1, 100, 2);       // clamped stop, every other channel
  nn::AxisSlice empty(img, 1, 2, 1);              // stop before start: empty
  EXPECT_EQ(first.shape(), (Shape{-1, 3, 3, 4}));
  EXPECT_EQ(tail.shape(), (Shape{-1, 6, 3, 2}));
  EXPECT_EQ(stepped.shape(), (Shape{-1, 3, 3, 4}));
  EXPECT_EQ(empty.shape(), (Shape{-1, 6, 0, 4}));
  EXPECT_TRUE(array_equal(first(), slice(v, 1, 0, 3)));
  EXPECT_TRUE(array_equal(second(), slice(v, 1, 3, 6)));
  EXPECT_TRUE(array_equal(tail(), slice(v, 3, 1, 3)));
  EXPECT_TRUE(array_equal(stepped(), slice(v, 1, 1, 6, 2)));
  EXPECT_EQ(stepped().at({0, 1, 0, 0}), 36.0);  // channel 3 of sample 0
  EXPECT_EQ(empty().numel(), 0);
  EXPECT_THROW(nn::AxisSlice(img, 3, 0, 1), ValueError);   // only 3 axes after the batch axis
  EXPECT_THROW(nn::AxisSlice(img, -1, 0, 1), ValueError);
  EXPECT_THROW(nn::AxisSlice(img, 0, 0, 1, 0), ValueError);  // step 0
  EXPECT_THROW(nn::AxisSlice(img, 0, 0, 1, -1), ValueError);  // reversing is Flip's

  // gradient: d sum(w * x[:, 1:6:2]) / dx is w in the taken channels and 0 elsewhere
  Tensor x = uniform({2, 6, 3, 4}).requires_grad_(true);
  const Tensor w = uniform({2, 3, 3, 4});
  nn::Input xi(Shape{-1, 6, 3, 4}, Float32, "xi");
  const Plan p = Graph::build({nn::AxisSlice(xi, 0, 1, 6, 2, "s")}, {xi}).compile();
  sum(p(x) * w).backward();
  Tensor want = zeros({2, 6, 3, 4});
  slice(want, 1, 1, 6, 2) = w;  // writes through the view
  EXPECT_TRUE(array_equal(x.grad(), want));
}

// Flip reverses the given axes after the batch axis: values as flip(), gradients through it, the
// shape kept, bad axes named; a network applied to an image and its mirror image through one
// Module (test-time augmentation, as the main job) gives the mean of the two direct calls.
TEST(Layers, FlipMirrorsAndAveragesThroughAModule) {
  nn::Input img(Shape{-1, 2, 3, 4}, Float32, "img");
  nn::Flip mirror(img, {2}, "mirror");
  nn::Flip both(img, {0, 2});
  EXPECT_EQ(mirror.shape(), img.shape());
  const Tensor v = arange(0, 48, 1).astype(Float32).reshape({2, 2, 3, 4});
  img.set_value(v);
  EXPECT_TRUE(array_equal(mirror(), flip(v, {3})));
  EXPECT_TRUE(array_equal(both(), flip(v, {1, 3})));
  EXPECT_EQ(mirror().at({0, 0, 0, 0}), 3.0);
  EXPECT_THROW(nn::Flip(img, {}), ValueError);
  EXPECT_THROW(nn::Flip(img, {3}), ValueError);     // only 3 axes after the batch axis
  EXPECT_THROW(nn::Flip(img, {1, 1}), ValueError);  // repeated
  EXPECT_THROW(nn::Flip(img, {-1}), ValueError);

  // gradient: flipping twice is the identity, so d sum(w * flip(x)) / dx = flip(w)
  Tensor x = uniform({2, 2, 3, 4}).requires_grad_(true);
  const Tensor w = uniform({2, 2, 3, 4});
  nn::Input xi(Shape{-1, 2, 3, 4}, Float32, "xi");
  const Plan p = Graph::build({nn::Flip(xi, {2}, "f")}, {xi}).compile();
  sum(p(x) * w).backward();
  EXPECT_TRUE(array_equal(x.grad(), flip(w, {3})));

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
