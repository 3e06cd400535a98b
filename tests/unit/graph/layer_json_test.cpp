// Layer kinds through JSON (graph_to_json, graph_from_json): the convolution layers with batch
// norm and a transformer encoder layer, the recurrent layers, adaptive pooling and a projecting
// Residual come back with the same outputs. Their shapes and values are nn's tests (tests/unit/nn).
#include <gtest/gtest.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/graph/serialize.h>
#include <loom/nn/activation.h>
#include <loom/nn/attention.h>
#include <loom/nn/conv.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/nn/merge.h>
#include <loom/nn/mode.h>
#include <loom/nn/normalization.h>
#include <loom/nn/pooling.h>
#include <loom/nn/recurrent.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

#include <optional>

using namespace loom;

TEST(ConvLayers, CnnSurvivesJson) {
  nn::Input img(Shape{-1, 1, 12, 12}, Float32, "img");
  nn::Conv2D c(img, 4, 3, {.padding = "same"}, "c");
  nn::BatchNorm bn(c, {}, "bn");
  nn::Activation r(bn, nn::relu, "r");
  nn::MaxPool2D p(r, 2, {}, "p");
  nn::Conv2DTranspose up(p, 2, 2, {.stride = 2}, "up");
  nn::GlobalPool gp(up, nn::GlobalPool::Mode::Max, "gp");
  nn::Input seq(Shape{-1, 3, 8}, Float32, "seq");
  nn::TransformerEncoderLayer enc(seq, 2, {.ff_units = 12, .dropout = 0.0}, std::nullopt, "enc");
  Graph g = Graph::build({gp, enc}, {img, seq});
  Tensor a = uniform({2, 1, 12, 12}), b = uniform({2, 3, 8});
  {
    nn::ModeScope train(nn::Mode::Train);  // moves the batch-norm running averages
    g.compile().run({a, b});
  }
  Graph back = graph_from_json(graph_to_json(g));
  copy_state(g, back);  // parameters and buffers
  auto x = g.compile().run({a, b}), y = back.compile().run({a, b});
  EXPECT_TRUE(allclose(x[0], y[0]));
  EXPECT_TRUE(allclose(x[1], y[1]));
}

TEST(Recurrent, JsonRoundTrip) {
  nn::Input seq(Shape{-1, 5, 3}, Float32, "seq");
  nn::RNN enc(seq, 4, {.cell = nn::CellKind::GRU, .bidirectional = true}, "enc");
  nn::RNN dec(enc, 2, {.cell = nn::CellKind::LSTM, .return_sequences = false}, "dec");
  Graph g = Graph::build({dec}, {seq});
  Graph r = graph_from_json(graph_to_json(g));
  copy_state(g, r);
  Tensor x = uniform({2, 5, 3});
  EXPECT_TRUE(allclose(g.compile()(x), r.compile()(x)));
}

TEST(AdaptiveAvgPool2D, Json) {
  nn::Input img(Shape{-1, 8, -1, -1}, Float32, "img");
  nn::AdaptiveAvgPool2D p(img, {7, 7}, "pool");
  Tensor x = uniform({2, 8, 9, 5});
  Graph g = Graph::build({p}, {img});
  Graph g2 = graph_from_json(graph_to_json(g));
  EXPECT_EQ(g2.nodes().back().shape(), (Shape{-1, 8, 7, 7}));
  EXPECT_TRUE(array_equal(g.compile()(x), g2.compile()(x)));
}

TEST(MergeLayers, ResidualSurvivesJson) {
  nn::Input x(3, Float32, "x");
  nn::Linear h(x, 5);
  nn::Residual r(x, h);  // projects x to h's 5 units
  Graph g = Graph::build({r}, {x});
  Graph back = graph_from_json(graph_to_json(g));
  copy_state(g, back);
  Tensor in = uniform({2, 3});
  EXPECT_TRUE(allclose(g.compile()(in), back.compile()(in)));
}
