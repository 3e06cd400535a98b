// NumPy broadcasting: shapes align from the right; sizes must match or be 1.
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/memory.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/reduction.h>

#include "unit/common/core_test_util.h"
#include "unit/ops/ops_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::iota;
using loom_test::values;

TEST(Broadcasting, ShapeRules) {
  EXPECT_EQ(broadcast_shapes({2, 3}, {3}), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({3}, {2, 3}), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({4, 1, 5}, {3, 1}), (Shape{4, 3, 5}));
  EXPECT_EQ(broadcast_shapes({}, {2, 2}), (Shape{2, 2}));
  EXPECT_EQ(broadcast_shapes({}, {}), Shape{});
  EXPECT_EQ(broadcast_shapes({1}, {1}), (Shape{1}));
  EXPECT_EQ(broadcast_shapes({0, 3}, {1, 3}), (Shape{0, 3}));
  EXPECT_EQ(broadcast_shapes({0}, {1}), (Shape{0}));
  EXPECT_EQ(broadcast_shapes({1, 1}, {5}), (Shape{1, 5}));
  EXPECT_THROW(broadcast_shapes({0}, {2}), ShapeError);
  EXPECT_THROW(broadcast_shapes({2, 3}, {2}), ShapeError);
  EXPECT_THROW(broadcast_shapes({4, 3}, {2, 4, 2}), ShapeError);
}

TEST(Broadcasting, ErrorNamesOpShapesAndRule) {
  std::string msg = error_message<ShapeError>([] { add(zeros({2, 3}), zeros({4})); });
  EXPECT_TRUE(contains_all(msg, {"add", "(2, 3)", "(4,)", "1"}));
  msg = error_message<ShapeError>([] { multiply(zeros({5, 2}), zeros({3, 1, 3})); });
  EXPECT_TRUE(contains_all(msg, {"multiply", "(5, 2)", "(3, 1, 3)"}));
}

TEST(Broadcasting, ValuesOfRowPlusColumn) {
  Tensor col = iota({3, 1});        // 0, 1, 2
  Tensor row = iota({4}) * 10.0f;   // 0, 10, 20, 30
  Tensor y = col + row;
  ASSERT_EQ(y.shape(), (Shape{3, 4}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(y.at({i, j}), i + 10.0 * j);
  Tensor d = row - col;
  EXPECT_EQ(d.at({2, 1}), 8.0);
  EXPECT_EQ(values(greater(row, col * 10.0f).astype(Int32).sum({1})), (std::vector<double>{3, 2, 1}));
}

TEST(Broadcasting, ZeroDimensionalBroadcastsEverywhere) {
  Tensor s = scalar_tensor(2.0);
  Tensor x = iota({2, 2, 2});
  EXPECT_EQ(values(x * s), values(x + x));
  EXPECT_EQ(values(s * x), values(x + x));
  EXPECT_EQ((s + s).shape(), Shape{});
}

TEST(Broadcasting, LeadingAndInnerOnes) {
  Tensor a = iota({2, 1, 3});
  Tensor b = iota({4, 1});
  Tensor y = a + b;
  ASSERT_EQ(y.shape(), (Shape{2, 4, 3}));
  EXPECT_EQ(y.at({1, 3, 2}), 5.0 + 3.0);
  EXPECT_EQ(y.at({0, 2, 1}), 1.0 + 2.0);
}

TEST(Broadcasting, EmptyAxesBroadcast) {
  Tensor e = zeros({0, 3});
  Tensor y = e + iota({1, 3});
  EXPECT_EQ(y.shape(), (Shape{0, 3}));
  EXPECT_EQ(y.numel(), 0);
  EXPECT_THROW(e + iota({2, 3}), ShapeError);
}

TEST(Broadcasting, WhereBroadcastsAllThree) {
  Tensor c = tensor<bool>({true, false, true});
  Tensor a = iota({2, 1});
  Tensor y = where(c, a, scalar_tensor(-1.0f));
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(y), (std::vector<double>{0, -1, 0, 1, -1, 1}));
  EXPECT_EQ(values(where(c, 5.0f, iota({3}))), (std::vector<double>{5, 1, 5}));
}

TEST(Broadcasting, BroadcastedOperandsAreNotMaterialised) {
  // a (1000, 1) tensor against (1, 1000) makes a 10^6 result without copying the operands
  reset_peak_memory();
  Tensor a = ones({1000, 1}), b = ones({1, 1000});
  const int64_t before = memory_stats().current_bytes;
  reset_peak_memory();
  Tensor y = a + b;
  const MemoryStats s = memory_stats();
  EXPECT_LE(s.peak_bytes - before, 4'000'000 + 64 * 1024);  // only the output
  EXPECT_EQ(y.at({999, 999}), 2.0);
}

TEST(Broadcasting, InPlaceTargetDoesNotGrow) {
  Tensor a = zeros({2, 3});
  a += iota({3});
  EXPECT_EQ(values(a), (std::vector<double>{0, 1, 2, 0, 1, 2}));
  Tensor small = zeros({3});
  EXPECT_THROW(small += zeros({2, 3}), ShapeError);
  EXPECT_EQ(values(small), (std::vector<double>{0, 0, 0}));
}

TEST(Broadcasting, ReduceGradientToOperandShape) {
  Tensor a = iota({3, 1});
  Tensor b = iota({4});
  a.requires_grad_();
  b.requires_grad_();
  sum(a * b).backward();
  EXPECT_EQ(a.grad().shape(), (Shape{3, 1}));
  EXPECT_EQ(b.grad().shape(), (Shape{4}));
  EXPECT_EQ(values(a.grad()), (std::vector<double>{6, 6, 6}));  // sum of b
  EXPECT_EQ(values(b.grad()), (std::vector<double>{3, 3, 3, 3}));  // sum of a
}
