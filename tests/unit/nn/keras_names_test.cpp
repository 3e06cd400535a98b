// Keras' and TensorX's names for what Loom already has (issue 46): nn::Dense is nn::Linear,
// layer.weights() is layer.parameters().
#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/nn/normalization.h>
#include <loom/nn/state.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/linalg.h>
#include <loom/ops/random.h>

#include <string>
#include <type_traits>
#include <vector>

using namespace loom;

// one layer kind under two names, not a second kind
static_assert(std::is_same_v<nn::Dense, nn::Linear>);

namespace {

// The same tensors, in the same order (handles naming one storage at one place).
void expect_same_tensors(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].impl(), b[i].impl()) << "tensor " << i;
  }
}

}  // namespace

TEST(KerasNames, DenseIsLinear) {
  nn::Input x(4);
  nn::Dense l1(x, 3);  // Keras: layers.Dense(3)(x)
  EXPECT_EQ(std::string(l1.kind()), "Linear");
  EXPECT_EQ(l1.shape(), (Shape{-1, 3}));
  EXPECT_EQ(l1.n_units(), 3);
  const Tensor v = uniform({2, 4});
  ASSERT_EQ(l1.parameters().size(), 2u);  // weights (4, 3) and bias (3)
  EXPECT_TRUE(allclose(l1.compute(v), matmul(v, l1.state().param("weights")) + l1.state().param("bias")));
  nn::Dense unbound(5);  // made without input, bound by its first call, as Keras' Dense(5)
  const nn::Layer h = unbound(l1);
  EXPECT_EQ(std::string(h.kind()), "Linear");
  EXPECT_EQ(h.shape(), (Shape{-1, 5}));
}

TEST(KerasNames, WeightsAreTheParameters) {
  nn::Input x(4);
  nn::Linear l1(x, 3);
  ASSERT_EQ(l1.weights().size(), 2u);
  expect_same_tensors(l1.weights(), l1.parameters());
  EXPECT_EQ(l1.weights()[0].impl(), l1.state().param("weights").impl());
  nn::Linear no_bias(x, 2, {.bias = false});
  expect_same_tensors(no_bias.weights(), no_bias.parameters());
  EXPECT_EQ(no_bias.weights().size(), 1u);
  // trainable tensors only: batch norm's running statistics are state, not weights()
  nn::BatchNorm bn(l1);
  expect_same_tensors(bn.weights(), bn.parameters());
  EXPECT_EQ(bn.weights().size(), 2u);
}
