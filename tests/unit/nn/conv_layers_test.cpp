#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/nn/activation.h>
#include <loom/nn/attention.h>
#include <loom/nn/conv.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/mode.h>
#include <loom/nn/normalization.h>
#include <loom/nn/pooling.h>
#include <loom/nn/state.h>
#include <loom/ops/conv.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/pooling.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

using namespace loom;

TEST(ConvLayers, ShapesAndParameterCounts) {
  nn::Input img(Shape{-1, 3, 32, 32}, Float32, "img");
  nn::Conv2D c1(img, 16, 3, {.padding = "same"});
  EXPECT_EQ(c1.shape(), (Shape{-1, 16, 32, 32}));
  EXPECT_EQ(c1.state().param("weights").shape(), (Shape{16, 3, 3, 3}));
  nn::Conv2D c2(c1, 32, {3, 5}, {.stride = 2, .padding = {1, 2}, .groups = 4, .bias = false});
  EXPECT_EQ(c2.shape(), (Shape{-1, 32, 16, 16}));
  EXPECT_EQ(c2.parameters().size(), 1u);
  EXPECT_EQ(c2.state().param("weights").shape(), (Shape{32, 4, 3, 5}));
  nn::MaxPool2D p(c2, 2);
  EXPECT_EQ(p.shape(), (Shape{-1, 32, 8, 8}));
  nn::AvgPool2D ap(c2, 3, {.stride = 2, .padding = 1});
  EXPECT_EQ(ap.shape(), (Shape{-1, 32, 8, 8}));
  nn::Conv2DTranspose up(p, 8, 2, {.stride = 2});
  EXPECT_EQ(up.shape(), (Shape{-1, 8, 16, 16}));
  EXPECT_EQ(up.state().param("weights").shape(), (Shape{32, 8, 2, 2}));
  nn::GlobalPool g(up);
  EXPECT_EQ(g.shape(), (Shape{-1, 8}));
  img.set_value(uniform({2, 3, 32, 32}));
  EXPECT_EQ(g().shape(), (Shape{2, 8}));
  EXPECT_EQ(ap().shape(), (Shape{2, 32, 8, 8}));

  nn::Input seq(Shape{-1, 4, 20}, Float32, "seq");
  nn::Conv1D c1d(seq, 6, 5, {.stride = 3, .dilation = 2});
  EXPECT_EQ(c1d.shape(), (Shape{-1, 6, 4}));  // (20 - 2*4 - 1) / 3 + 1
  seq.set_value(uniform({1, 4, 20}));
  EXPECT_EQ(c1d().shape(), (Shape{1, 6, 4}));

  EXPECT_THROW(nn::Conv2D(img, 10, 3, {.groups = 4}), ValueError);
  EXPECT_THROW(nn::Conv2D(seq, 4, 3), ShapeError);
  EXPECT_THROW(nn::Conv2D(img, 4, 3, {.stride = 2, .padding = "same"}), ValueError);
}

TEST(ConvLayers, BatchNormTrainAndEval) {
  nn::Input x(Shape{-1, 3, 4, 4}, Float32, "x");
  nn::BatchNorm bn(x);
  Tensor v = uniform({8, 3, 4, 4}) * 4.0 + 2.0;
  x.set_value(v);
  Tensor rm_before = bn.state().buffer("running_mean").copy();
  Tensor train_out;
  {
    nn::ModeScope train(nn::Mode::Train);
    train_out = bn();
  }
  // training normalizes with batch statistics: per-channel mean ~0, variance ~1
  EXPECT_LT(abs(mean(train_out, {0, 2, 3})).max().item<double>(), 1e-4);
  EXPECT_NEAR(var(train_out, {0, 2, 3}).mean().item<double>(), 1.0, 1e-3);
  // and moves the running mean 10% towards the batch mean
  Tensor expected_rm = rm_before * 0.9 + mean(v, {0, 2, 3}) * 0.1;
  EXPECT_TRUE(allclose(bn.state().buffer("running_mean"), expected_rm, 1e-5, 1e-6));
  // eval uses the running statistics and leaves them alone
  Tensor rm = bn.state().buffer("running_mean").copy();
  Tensor eval_out = bn();
  EXPECT_TRUE(array_equal(bn.state().buffer("running_mean"), rm));
  Tensor manual = (v - rm.reshape({1, 3, 1, 1})) / sqrt(bn.state().buffer("running_var").reshape({1, 3, 1, 1}) + 1e-5);
  EXPECT_TRUE(allclose(eval_out, manual, 1e-4, 1e-5));

  nn::Input f(16, Float32, "f");
  nn::LayerNorm ln(f);
  f.set_value(uniform({5, 16}) * 3.0);
  EXPECT_LT(abs(mean(ln(), {-1})).max().item<double>(), 1e-5);
}

// One shape rule for ops and layers: conv_output_size / pool_output_size agree with what the
// ops compute and the layers declare over a grid of sizes, and stay exact at int64's edges.
TEST(ConvLayers, ExportedShapeRulesAreTheOpsAndTheLayers) {
  for (int64_t in : {3, 4, 5, 7, 8})
    for (int64_t k : {1, 2, 3})
      for (int64_t s : {1, 2, 3})
        for (int64_t p = 0; p <= k / 2; ++p) {
          const Tensor x = zeros({1, 1, in, in});
          const int64_t c = conv_output_size(in, k, s, p, p);
          nn::Input img(Shape{1, 1, in, in}, Float32);
          nn::Conv2D conv(img, 1, k, {.stride = s, .padding = p});
          EXPECT_EQ(conv.shape()[2], c);
          EXPECT_EQ(conv2d(x, zeros({1, 1, k, k}), Tensor(), s, p).shape()[2], c);
          for (bool ceil : {false, true}) {
            const int64_t o = pool_output_size(in, k, s, p, 1, ceil);
            ASSERT_GE(o, 1);
            EXPECT_EQ(max_pool2d(x, k, s, p, 1, ceil).shape()[2], o) << in << " " << k << " " << s << " " << p << " " << ceil;
            EXPECT_EQ(nn::MaxPool2D(img, k, {.stride = s, .padding = p, .ceil_mode = ceil}).shape()[2], o);
          }
        }
  EXPECT_EQ(conv_output_size(2, 5), 0);                       // the kernel does not fit
  EXPECT_EQ(conv_output_size(INT64_MAX, 1, 1, 10, 10), INT64_MAX);  // saturates, no overflow
  EXPECT_EQ(conv_output_size(INT64_MAX, INT64_MAX, 1, 0, 0, INT64_MAX), 0);
  EXPECT_EQ(pool_output_size(INT64_MAX, 2, 1, 1), INT64_MAX);
  EXPECT_LE(pool_output_size(1, 3, 1), 0);
}

// The layers' padding is the ops' rule (loom::conv_padding), refusals named by the layer's kind.
TEST(ConvLayers, PaddingIsTheOpsRule) {
  nn::Input img(Shape{-1, 3, 8, 8}, Float32, "img");
  nn::Conv2D even(img, 2, 4, {.padding = "same"});
  EXPECT_EQ(even.shape(), (Shape{-1, 2, 8, 8}));  // 3 zeros: 1 before, 2 after, as conv2d
  Tensor x = uniform({1, 3, 8, 8});
  img.set_value(x);
  EXPECT_TRUE(allclose(even(), conv2d(x, even.state().param("weights"), even.state().param("bias"), 1, "same")));
  EXPECT_THROW(nn::Conv2D(img, 2, 3, {.stride = 2, .padding = "same"}), ValueError);
  EXPECT_THROW(nn::Conv2D(img, 2, 3, {.padding = int64_t{1} << 40}), ValueError);
}
