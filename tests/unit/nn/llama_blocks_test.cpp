// The blocks of Llama as layers: RMSNorm (nn/normalization.h) and SwiGLU (nn/feed_forward.h).
#include <gtest/gtest.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/nn/feed_forward.h>
#include <loom/nn/init.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/normalization.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/linalg.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

#include <string>
#include <vector>

using namespace loom;

// RMSNorm and SwiGLU, the blocks of Llama: values as their formulas (rms_norm and silu are checked
// against PyTorch in tests/reference), parameters and their gradients, shapes, bad arguments.
TEST(LlamaBlocks, RMSNormAndSwiGLUComputeTheirFormulas) {
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
  sum(mlp()).backward();
  EXPECT_TRUE(w.grad().defined());
  for (const Tensor& t : p) EXPECT_GT(max(abs(t.grad())).item(), 0.0);

  EXPECT_THROW(nn::RMSNorm(x, -1.0), ValueError);
  EXPECT_THROW(nn::SwiGLU(x, 0), ValueError);
  nn::Input ids(Shape{-1, 4}, Int64, "ids");
  EXPECT_THROW(nn::SwiGLU(ids, 4), DTypeError);
}
