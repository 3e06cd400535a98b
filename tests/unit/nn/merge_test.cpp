// The merge layers (nn/merge.h): Merge's modes, the operators on layers, Residual's projection;
// their JSON round trips are graph's (tests/unit/graph/layer_json_test.cpp).
#include <gtest/gtest.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/nn/merge.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>

#include <string>

using namespace loom;

TEST(MergeLayers, ModesAndOperators) {
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

TEST(MergeLayers, ResidualProjectsWhenUnitsDiffer) {
  nn::Input x(3, Float32, "x");
  nn::Linear h(x, 5);
  nn::Residual r(x, h);
  EXPECT_EQ(r.parameters().size(), 1u);  // the projection
  nn::Linear h3(x, 3);
  nn::Residual r3(x, h3);
  EXPECT_TRUE(r3.parameters().empty());
  x.set_value(ones({2, 3}));
  EXPECT_TRUE(allclose(r3(), x.value() + h3()));
}
