// Edge cases found by differential testing against NumPy / PyTorch where the reference is not
// PyTorch 1.13 itself (it is wrong there, or the question is an error or a crash). The cases
// PyTorch answers well are in tests/reference/op_cases.cpp.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "unit/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;

namespace {
const double kInf = std::numeric_limits<double>::infinity();
}  // namespace

// ---------------------------------------------------------------- reductions over empty axes
TEST(EmptyReductions, NoIdentityStillRaisesAsNumPy) {
  // numpy.max / argmax of an empty axis raise; the reductions with an identity (or log(0))
  // answer (tests/reference: sum 0, prod 1, mean/var/std NaN, logsumexp -inf, softmax empty)
  std::string m = error_message<ValueError>([] { argmax(zeros({0, 3}), 0); });
  EXPECT_TRUE(contains_all(m, {"argmax", "(0, 3)", "size zero"}));
  m = error_message<ValueError>([] { argmin(zeros({0})); });
  EXPECT_TRUE(contains_all(m, {"argmin", "size zero"}));
  m = error_message<ValueError>([] { min(zeros({2, 0}), {1}); });
  EXPECT_TRUE(contains_all(m, {"min", "(2, 0)", "size zero"}));
  EXPECT_EQ(max(zeros({0, 3}), {1}).shape(), (Shape{0}));  // the empty axis is not reduced
}

TEST(EmptyReductions, SoftmaxFamilyOverAnEmptyAxis) {
  Tensor x = zeros({3, 0});
  x.requires_grad_();
  Tensor y = softmax(x, 1);
  EXPECT_EQ(y.shape(), (Shape{3, 0}));
  backward(sum(y));
  EXPECT_EQ(x.grad().shape(), (Shape{3, 0}));
  EXPECT_EQ(log_softmax(zeros({0}, Float64), 0).shape(), (Shape{0}));
  Tensor l = logsumexp(zeros({0, 3}), {0});
  EXPECT_EQ(l.shape(), (Shape{3}));
  for (float v : l.to_vector<float>()) EXPECT_EQ(v, -std::numeric_limits<float>::infinity());
}

TEST(SoftmaxZeroD, AxisZeroOrMinusOneOnly) {
  EXPECT_EQ(softmax(scalar_tensor(3.0)).item<float>(), 1.0f);
  EXPECT_EQ(log_softmax(scalar_tensor(3.0), 0).item<float>(), 0.0f);
  std::string m = error_message<IndexError>([] { softmax(scalar_tensor(3.0), 1); });
  EXPECT_TRUE(contains_all(m, {"softmax", "axis 1", "0-d", "0 or -1"}));
}

