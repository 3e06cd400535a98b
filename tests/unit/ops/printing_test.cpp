// NumPy-like text: nested brackets, aligned columns, "..." above 1000 elements.
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/manipulation.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "unit/common/core_test_util.h"

using namespace loom;

TEST(Printing, Matrix) {
  EXPECT_EQ(from_vector<float>({1, 2, 3, 4}, {2, 2}).str(), "tensor([[1., 2.],\n        [3., 4.]])");
}

TEST(Printing, FloatsIntsAndBools) {
  EXPECT_EQ(tensor<float>({1.5f, 2.25f}).str(), "tensor([1.5000, 2.2500])");
  EXPECT_EQ(tensor<int64_t>({1, 100}).str(), "tensor([  1, 100])");
  EXPECT_EQ(tensor<int32_t>({1, -100}).str(), "tensor([   1, -100], dtype=int32)");
  EXPECT_EQ(tensor<bool>({true, false}).str(), "tensor([ true, false])");
  EXPECT_EQ(tensor<double>({0.5}).str(), "tensor([0.5000], dtype=float64)");
  EXPECT_EQ(ones({2}, Float16).str(), "tensor([1., 1.], dtype=float16)");
  EXPECT_EQ(ones({2}, BFloat16).str(), "tensor([1., 1.], dtype=bfloat16)");
  EXPECT_EQ(ones({2}, UInt8).str(), "tensor([1, 1], dtype=uint8)");
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(tensor<float>({std::nanf(""), inf, -1.0f}).str(), "tensor([nan, inf, -1.])");
  EXPECT_EQ(tensor<float>({-inf}).str(), "tensor([-inf])");
}

TEST(Printing, ScientificForLargeOrSmallMagnitudes) {
  EXPECT_EQ(tensor<double>({1e-5, 1.0}).str(), "tensor([1.0000e-05, 1.0000e+00], dtype=float64)");
  EXPECT_EQ(tensor<float>({1e9f, 1.0f}).str(), "tensor([1.0000e+09, 1.0000e+00])");
}

TEST(Printing, ZeroDimensional) {
  EXPECT_EQ(scalar_tensor(3.5).str(), "tensor(3.5000)");
  EXPECT_EQ(scalar_tensor(3).str(), "tensor(3)");
  EXPECT_EQ(scalar_tensor(true).str(), "tensor(true)");
  EXPECT_EQ(scalar_tensor(2, Int32).str(), "tensor(2, dtype=int32)");
}

TEST(Printing, Empty) {
  EXPECT_EQ(zeros({0}).str(), "tensor([], shape=(0,))");
  EXPECT_EQ(zeros({2, 0}, Int32).str(), "tensor([], dtype=int32, shape=(2, 0))");
}

TEST(Printing, ThreeDimensionalBlocksAreSeparatedByBlankLines) {
  EXPECT_EQ(ones({2, 2, 2}).str(),
            "tensor([[[1., 1.],\n"
            "         [1., 1.]],\n"
            "\n"
            "        [[1., 1.],\n"
            "         [1., 1.]]])");
}

TEST(Printing, NoElisionUpToAThousandElements) {
  const std::string s = arange(1000).str();
  EXPECT_EQ(s.find("..."), std::string::npos);
  EXPECT_NE(s.find(" 999]"), std::string::npos);
  EXPECT_NE(s.find(" 500,"), std::string::npos);
}

TEST(Printing, ElisionAboveAThousandElements) {
  EXPECT_EQ(arange(1001).str(), "tensor([   0,    1,    2, ...,  998,  999, 1000])");
  EXPECT_EQ(arange(2000).reshape({20, 100}).str(),
            "tensor([[   0,    1,    2, ...,   97,   98,   99],\n"
            "        [ 100,  101,  102, ...,  197,  198,  199],\n"
            "        [ 200,  201,  202, ...,  297,  298,  299],\n"
            "        ...,\n"
            "        [1700, 1701, 1702, ..., 1797, 1798, 1799],\n"
            "        [1800, 1801, 1802, ..., 1897, 1898, 1899],\n"
            "        [1900, 1901, 1902, ..., 1997, 1998, 1999]])");
  // numpy.arange(2000).reshape(20, 2, 50): the elided block is set off like the others
  const std::string s3 = arange(2000).reshape({20, 2, 50}).str();
  EXPECT_NE(s3.find("         [ 250,  251,  252, ...,  297,  298,  299]],\n\n        ...,\n\n        [[1700,"),
            std::string::npos)
      << s3;
  // the elided text stays short whatever the size
  EXPECT_LT(zeros({1000, 1000}).str().size(), 400u);
}

TEST(Printing, ViewsPrintTheirOwnElements) {
  Tensor x = arange(6).reshape({2, 3});
  EXPECT_EQ(x.T().str(), "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])");
  EXPECT_EQ(flip(x, {1})[0].str(), "tensor([2, 1, 0])");
  EXPECT_EQ(x.broadcast_to({2, 2, 3})[1].str(), "tensor([[0, 1, 2],\n        [3, 4, 5]])");
}

TEST(Printing, RequiresGradAndStream) {
  Tensor r = ones({2});
  r.requires_grad_();
  EXPECT_EQ(r.str(), "tensor([1., 1.], requires_grad=true)");
  std::ostringstream os;
  os << arange(3);
  EXPECT_EQ(os.str(), "tensor([0, 1, 2])");
  EXPECT_EQ(Tensor().str(), "tensor(undefined)");
}
