#include <gtest/gtest.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/reduction.h>

using namespace loom;

TEST(Smoke, AddAndBackward) {
  Tensor a = tensor({1.0f, 2.0f, 3.0f});
  Tensor b = tensor({4.0f, 5.0f, 6.0f});
  a.requires_grad_();
  Tensor y = sum(a * b);
  EXPECT_EQ(y.item<float>(), 32.0f);
  y.backward();
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{4, 5, 6}));
}
