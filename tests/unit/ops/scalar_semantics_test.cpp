// 0-d and one-element tensors behave like numbers: item<T>(), comparisons with C++ numbers,
// explicit conversion to bool.
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/reduction.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "unit/common/core_test_util.h"

using namespace loom;

static_assert(!std::is_convertible_v<Tensor, bool>, "bool conversion must be explicit");
static_assert(std::is_constructible_v<bool, Tensor>, "explicit bool conversion exists");

TEST(ScalarSemantics, ItemConvertsToTheRequestedType) {
  EXPECT_EQ(scalar_tensor(2.75).item<float>(), 2.75f);
  EXPECT_EQ(scalar_tensor(2.75).item<double>(), 2.75);
  EXPECT_EQ(scalar_tensor(2.75).item<int>(), 2);
  EXPECT_EQ(scalar_tensor(-2.75, Float64).item<int64_t>(), -2);
  EXPECT_EQ(scalar_tensor(7, Int32).item<int32_t>(), 7);
  EXPECT_EQ(scalar_tensor(200, UInt8).item<uint8_t>(), 200);
  EXPECT_EQ(scalar_tensor(true).item<bool>(), true);
  EXPECT_EQ(scalar_tensor(0.0).item<bool>(), false);
  EXPECT_EQ(scalar_tensor(1.5, Float16).item<float>(), 1.5f);
  EXPECT_EQ(scalar_tensor(1.5, BFloat16).item<double>(), 1.5);
  // int64 values beyond 2^53 are read exactly
  const int64_t big = (int64_t(1) << 53) + 1;
  EXPECT_EQ(scalar_tensor(big).item<int64_t>(), big);
  EXPECT_EQ(tensor<int64_t>({big}).item<int64_t>(), big);
  EXPECT_EQ(tensor<int64_t>({std::numeric_limits<int64_t>::min()}).item<int64_t>(),
            std::numeric_limits<int64_t>::min());
}

TEST(ScalarSemantics, ItemOfAViewReadsTheRightElement) {
  Tensor x = arange(12).reshape({3, 4});
  EXPECT_EQ(x[1][2].item<int64_t>(), 6);
  EXPECT_EQ(x.T()[3][2].item<int64_t>(), 11);
  EXPECT_EQ(flip(x)[0][0].item<int64_t>(), 11);
  EXPECT_EQ(slice(x, 1, 3, 4)[2].item<int64_t>(), 11);  // one-element 1-d view
  EXPECT_EQ(sum(x).item<int64_t>(), 66);
}

TEST(ScalarSemantics, ComparisonWithCppNumbersInConditions) {
  Tensor t = scalar_tensor(0.05);
  bool taken = false;
  if (t < 0.1) taken = true;
  EXPECT_TRUE(taken);
  if (t > 0.1) ADD_FAILURE() << "0.05 > 0.1";
  EXPECT_TRUE(static_cast<bool>(t <= 0.05));
  EXPECT_TRUE(static_cast<bool>(t != 1));
  EXPECT_FALSE(static_cast<bool>(t == 0));
  Tensor loss = sum(ones({4}));
  EXPECT_TRUE(static_cast<bool>(loss >= 4));
  EXPECT_TRUE(static_cast<bool>(loss == 4.0));
  Tensor i = scalar_tensor(3);
  EXPECT_TRUE(static_cast<bool>(i == 3));
  EXPECT_TRUE(static_cast<bool>(i < 3.5));  // int tensor against a float: compared as floats
  EXPECT_FALSE(static_cast<bool>(i < 2.5));
  // a float32 tensor meets a C++ double as float32 (weak scalar): 0.1f is not < 0.1
  EXPECT_FALSE(static_cast<bool>(scalar_tensor(0.1f) < 0.1));
  EXPECT_TRUE(static_cast<bool>(scalar_tensor(0.1f) == 0.1));
  EXPECT_TRUE(static_cast<bool>(scalar_tensor(0.1, Float64) == 0.1));
  // results are 0-d bool tensors
  EXPECT_EQ((t < 0.1).dtype(), Bool);
  EXPECT_EQ((t < 0.1).ndim(), 0);
  EXPECT_EQ((0.1 * t).ndim(), 0);
}

TEST(ScalarSemantics, ExplicitBool) {
  EXPECT_FALSE(static_cast<bool>(scalar_tensor(0.0)));
  EXPECT_TRUE(static_cast<bool>(scalar_tensor(-0.5)));
  EXPECT_FALSE(static_cast<bool>(scalar_tensor(-0.0)));
  EXPECT_TRUE(static_cast<bool>(scalar_tensor(std::nan(""), Float64)));  // like bool(float("nan"))
  EXPECT_TRUE(static_cast<bool>(tensor<int32_t>({5})));                  // one element, rank 1
  EXPECT_TRUE(static_cast<bool>(ones({1, 1})));
  EXPECT_FALSE(static_cast<bool>(scalar_tensor(false)));
  EXPECT_TRUE(static_cast<bool>(!scalar_tensor(false)));
  EXPECT_TRUE(static_cast<bool>(all(ones({3}) > 0.5)));
  EXPECT_FALSE(static_cast<bool>(any(zeros({3}) > 0.5)));
  EXPECT_THROW((void)static_cast<bool>(ones({2})), ValueError);
}

TEST(ScalarSemantics, ArithmeticWithCppNumbers) {
  Tensor t = scalar_tensor(4.0);
  EXPECT_EQ((t + 1).item<float>(), 5.0f);
  EXPECT_EQ((1 - t).item<float>(), -3.0f);
  EXPECT_EQ((t * 0.5).item<float>(), 2.0f);
  EXPECT_EQ((2 / t).item<float>(), 0.5f);
  EXPECT_EQ((t / 8).item<float>(), 0.5f);
  EXPECT_EQ(power(t, 0.5).item<float>(), 2.0f);
  EXPECT_EQ(maximum(t, 10).item<float>(), 10.0f);
  EXPECT_EQ(minimum(t, 10).item<float>(), 4.0f);
  EXPECT_EQ((scalar_tensor(7) / 2).item<double>(), 3.5);  // true division
  EXPECT_EQ(floor_divide(scalar_tensor(-7), scalar_tensor(2)).item<int64_t>(), -4);
  EXPECT_EQ(mod(scalar_tensor(-7), scalar_tensor(3)).item<int64_t>(), 2);  // sign of the divisor
}

// numpy.allclose: equal infinities are close (their difference is NaN), opposite ones are not,
// NaN only with equal_nan.
TEST(ScalarSemantics, AllcloseTreatsInfinitiesAndNaNAsNumPy) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(allclose(tensor<double>({-inf, inf, 1}), tensor<double>({-inf, inf, 1}), 0, 0));
  EXPECT_FALSE(allclose(tensor<double>({inf}), tensor<double>({-inf})));
  EXPECT_FALSE(allclose(tensor<double>({inf}), tensor<double>({1e308})));
  EXPECT_FALSE(allclose(tensor<double>({nan}), tensor<double>({nan})));
  EXPECT_TRUE(allclose(tensor<double>({nan, -inf}), tensor<double>({nan, -inf}), 0, 0, true));
}

// Float to integer conversions are defined for every value (a plain C++ cast of NaN, an infinity
// or a value beyond the integer's range is undefined behaviour, which scripts/sanitize.sh's
// UBSan build reports): truncation toward zero, int64's minimum outside int64's range, then the
// target's width (docs/dtypes.md).
TEST(ScalarSemantics, FloatToIntegerConversionsAreDefinedForEveryValue) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const int64_t lo = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(Scalar(-2.9).to_int(), -2);
  EXPECT_EQ(Scalar(inf).to_int(), lo);
  EXPECT_EQ(Scalar(-inf).to_int(), lo);
  EXPECT_EQ(Scalar(nan).to_int(), lo);
  EXPECT_EQ(Scalar(1e19f).to_int(), lo);

  const Tensor x = tensor<double>({-50.0, 2.9, -2.9, nan, inf, -inf, 1e19, -0x1p63});
  EXPECT_EQ(x.astype(Int64).to_vector<int64_t>(), (std::vector<int64_t>{-50, 2, -2, lo, lo, lo, lo, lo}));
  EXPECT_EQ(x.astype(Int32).to_vector<int64_t>(), (std::vector<int64_t>{-50, 2, -2, 0, 0, 0, 0, 0}));
  EXPECT_EQ(x.astype(UInt8).to_vector<int64_t>(), (std::vector<int64_t>{206, 2, 254, 0, 0, 0, 0, 0}));
  EXPECT_EQ(x.astype(Float16).astype(Int64).to_vector<int64_t>(), (std::vector<int64_t>{-50, 2, -2, lo, lo, lo, lo, lo}));
  EXPECT_EQ(x.to_vector<int64_t>(), x.astype(Int64).to_vector<int64_t>());
  EXPECT_EQ(scalar_tensor(nan).item<int64_t>(), lo);
  EXPECT_EQ(scalar_tensor(-inf).item<int>(), 0);  // int64's minimum, wrapped to 32 bits
  EXPECT_EQ(full({2}, inf, Int64).to_vector<int64_t>(), (std::vector<int64_t>{lo, lo}));
  EXPECT_EQ(full({2}, -2.5, Int32).to_vector<int32_t>(), (std::vector<int32_t>{-2, -2}));
}

// PyTorch's loss.item() is a Python float: without a type, item() is a double (issue 46).
TEST(ScalarSemantics, ItemWithoutATypeIsADouble) {
  static_assert(std::is_same_v<decltype(scalar_tensor(1.0).item()), double>);
  Tensor loss = mean(tensor<float>({0.25f, 0.5f}));
  EXPECT_EQ(loss.item(), 0.375);
  EXPECT_EQ(scalar_tensor(int64_t(7)).item(), 7.0);
  EXPECT_EQ(tensor({2.5}).item(), 2.5);  // a one-element 1-d tensor too
  EXPECT_THROW(tensor({1.0, 2.0}).item(), ValueError);
}
