#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/pooling.h>
#include <loom/ops/conv.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

#include <cmath>

using namespace loom;

namespace {

// torch.nn.AdaptiveAvgPool2d by its definition: bin i spans [floor(i*in/out), ceil((i+1)*in/out)).
int64_t start_of(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
int64_t end_of(int64_t i, int64_t in, int64_t out) { return static_cast<int64_t>(std::ceil(double((i + 1) * in) / double(out))); }

std::vector<double> brute_force(const Tensor& x, int64_t oh, int64_t ow) {
  const auto v = x.contiguous().to_vector<double>();
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  std::vector<double> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double s = 0;
          int64_t cnt = 0;
          for (int64_t h = start_of(i, H, oh); h < end_of(i, H, oh); ++h)
            for (int64_t w = start_of(j, W, ow); w < end_of(j, W, ow); ++w, ++cnt) s += v[((n * C + c) * H + h) * W + w];
          out.push_back(s / double(cnt));
        }
  return out;
}

}  // namespace

TEST(AdaptiveAvgPool2D, MatchesPyTorchIndexFormula) {
  const std::vector<std::array<int64_t, 4>> cases = {
      {5, 7, 3, 4}, {1, 1, 7, 7}, {14, 14, 7, 7}, {6, 6, 4, 4}, {3, 10, 5, 3}, {8, 8, 1, 1}, {7, 7, 7, 7}, {2, 3, 7, 7}};
  for (const auto& [H, W, oh, ow] : cases) {
    Tensor x = normal({2, 3, H, W}, 0, 1, Float64);
    Tensor y = nn::adaptive_avg_pool2d(x, {oh, ow});
    ASSERT_EQ(y.shape(), (Shape{2, 3, oh, ow})) << H << "x" << W << " -> " << oh << "x" << ow;
    const auto expect = brute_force(x, oh, ow);
    const auto got = y.contiguous().to_vector<double>();
    for (size_t k = 0; k < expect.size(); ++k) ASSERT_NEAR(got[k], expect[k], 1e-12) << H << "x" << W << " -> " << oh << "x" << ow;
  }
  // PyTorch's values for arange(25).view(1, 1, 5, 5) pooled to 3x3
  Tensor a = arange(0, 25, 1, Float32).reshape({1, 1, 5, 5});
  const std::vector<float> torch_ref = {3, 4.5, 6, 10.5, 12, 13.5, 18, 19.5, 21};
  EXPECT_EQ(nn::adaptive_avg_pool2d(a, 3).to_vector<float>(), torch_ref);
  // (C, H, W) inputs work too
  EXPECT_EQ(nn::adaptive_avg_pool2d(ones({4, 5, 5}), 2).shape(), (Shape{4, 2, 2}));
  EXPECT_THROW(nn::adaptive_avg_pool2d(ones({5, 5}), 2), ShapeError);
  EXPECT_THROW(nn::adaptive_avg_pool2d(ones({1, 1, 5, 5}), {0, 2}), ValueError);
}

TEST(AdaptiveAvgPool2D, GradientSpreadsOverOverlappingBins) {
  for (const auto& [H, W, oh, ow] : std::vector<std::array<int64_t, 4>>{{5, 7, 3, 4}, {1, 2, 7, 7}, {6, 6, 3, 3}}) {
    Tensor x = normal({1, 2, H, W}, 0, 1, Float64).requires_grad_();
    Tensor wts = normal({1, 2, oh, ow}, 0, 1, Float64);
    sum(nn::adaptive_avg_pool2d(x, {oh, ow}) * wts).backward();
    // d/dx[h, w] = sum over the bins holding (h, w) of weight / bin area
    const auto wv = wts.to_vector<double>();
    const auto g = x.grad().contiguous().to_vector<double>();
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          double e = 0;
          for (int64_t i = 0; i < oh; ++i)
            for (int64_t j = 0; j < ow; ++j) {
              const int64_t h0 = start_of(i, H, oh), h1 = end_of(i, H, oh), w0 = start_of(j, W, ow), w1 = end_of(j, W, ow);
              if (h >= h0 && h < h1 && w >= w0 && w < w1) e += wv[(c * oh + i) * ow + j] / double((h1 - h0) * (w1 - w0));
            }
          ASSERT_NEAR(g[(c * H + h) * W + w], e, 1e-12);
        }
  }
}

TEST(AdaptiveAvgPool2D, LayerShapes) {
  nn::Input img(Shape{-1, 8, -1, -1}, Float32, "img");
  nn::AdaptiveAvgPool2D p(img, {7, 7}, "pool");
  EXPECT_EQ(p.shape(), (Shape{-1, 8, 7, 7}));
  EXPECT_STREQ(p.kind(), "AdaptiveAvgPool2D");
  nn::AdaptiveAvgPool2D sq(img, 3);
  EXPECT_EQ(sq.shape(), (Shape{-1, 8, 3, 3}));
  Tensor x = uniform({2, 8, 9, 5});
  img.set_value(x);
  EXPECT_EQ(p().shape(), (Shape{2, 8, 7, 7}));
  EXPECT_THROW(nn::AdaptiveAvgPool2D(nn::Input(4), 2), ShapeError);
}
