// Nested literals (tensor({{1, 2}, {3, 4}})) and one integer axis for reductions (t.sum(1)):
// what a NumPy or PyTorch user writes first.
#include <gtest/gtest.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/reduction.h>

#include <cstddef>
#include <string>

using namespace loom;

namespace {
// A reduction's integer-axis call must pick the integral overload; bool is not an axis.
template <typename A>
concept SumsOver = requires(Tensor t, A a) { t.sum(a); };
static_assert(SumsOver<int>);
static_assert(SumsOver<size_t>);
static_assert(!SumsOver<bool>);
}  // namespace

TEST(Literals, NestedRankTwoIsRowMajor) {
  Tensor t = tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.dtype(), Int32);
  EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(t.index({1, 0}).item<int32_t>(), 4);
}

TEST(Literals, NestedRankThreeAndFour) {
  Tensor t3 = tensor({{{1.0f, 2.0f}, {3.0f, 4.0f}}, {{5.0f, 6.0f}, {7.0f, 8.0f}}, {{9.0f, 10.0f}, {11.0f, 12.0f}}});
  EXPECT_EQ(t3.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(t3.dtype(), Float32);
  EXPECT_EQ(t3.index({2, 1, 0}).item<float>(), 11.0f);
  Tensor t4 = tensor({{{{1.0}, {2.0}}}, {{{3.0}, {4.0}}}});
  EXPECT_EQ(t4.shape(), (Shape{2, 1, 2, 1}));
  EXPECT_EQ(t4.dtype(), Float64);
  EXPECT_EQ(t4.to_vector<double>(), (std::vector<double>{1, 2, 3, 4}));
}

TEST(Literals, NestedWithDTypeConverts) {
  Tensor t = tensor({{1, 2}, {3, 4}}, Float32);
  EXPECT_EQ(t.dtype(), Float32);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  Tensor d = tensor({{0.5, 1.5}}, Float32);  // C++ doubles, asked for float32: no astype needed
  EXPECT_EQ(d.dtype(), Float32);
  EXPECT_EQ(d.shape(), (Shape{1, 2}));
  Tensor b = tensor({{true, false}, {false, true}});
  EXPECT_EQ(b.dtype(), Bool);
  EXPECT_EQ(sum(b.astype(Int64)).item<int64_t>(), 2);
  Tensor e = tensor({{1, 2}, {3, 4}}, Int64);
  EXPECT_EQ(e.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4}));
}

TEST(Literals, RaggedListIsValueErrorNamingBothLengths) {
  try {
    (void)tensor({{1, 2, 3}, {4, 5}});
    FAIL() << "a ragged literal was accepted";
  } catch (const ValueError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("ragged"), std::string::npos) << what;
    EXPECT_NE(what.find("depth 1 has 2 elements where an earlier one has 3"), std::string::npos) << what;
  }
  EXPECT_THROW((void)tensor({{{1}, {2}}, {{3}}}), ValueError);
  EXPECT_THROW((void)tensor({{{1, 2}, {3, 4}}, {{5, 6}, {7}}}), ValueError);
}

TEST(Literals, EmptyRowsMakeAZeroExtent) {
  Tensor t = tensor({std::initializer_list<float>{}, std::initializer_list<float>{}});
  EXPECT_EQ(t.shape(), (Shape{2, 0}));
  EXPECT_EQ(t.numel(), 0);
}

TEST(IntegerAxis, EveryReductionEqualsItsAxesForm) {
  Tensor x = tensor({{1.0f, -2.0f, 3.0f}, {4.0f, 5.0f, -6.0f}});
  auto same = [](const Tensor& a, const Tensor& b) {
    EXPECT_EQ(a.shape(), b.shape());
    EXPECT_EQ(a.astype(Float64).to_vector<double>(), b.astype(Float64).to_vector<double>());
  };
  for (int axis : {0, 1, -1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    same(sum(x, axis), sum(x, Axes{axis}));
    same(mean(x, axis), mean(x, Axes{axis}));
    same(prod(x, axis), prod(x, Axes{axis}));
    same(max(x, axis), max(x, Axes{axis}));
    same(min(x, axis), min(x, Axes{axis}));
    same(var(x, axis), var(x, Axes{axis}));
    same(loom::std(x, axis, 1), loom::std(x, Axes{axis}, 1));
    same(logsumexp(x, axis), logsumexp(x, Axes{axis}));
    same(all(x > 0, axis), all(x > 0, Axes{axis}));
    same(any(x > 0, axis), any(x > 0, Axes{axis}));
    same(x.sum(axis), x.sum(Axes{axis}));
    same(x.mean(axis, true), x.mean(Axes{axis}, true));
    same(x.max(axis), x.max(Axes{axis}));
    same(x.min(axis), x.min(Axes{axis}));
  }
  // The values themselves, against NumPy's: x.sum(1) = [2, 3], x.mean(0) = [2.5, 1.5, -1.5].
  EXPECT_EQ(x.sum(1).to_vector<float>(), (std::vector<float>{2, 3}));
  EXPECT_EQ(x.mean(0).to_vector<float>(), (std::vector<float>{2.5f, 1.5f, -1.5f}));
  EXPECT_EQ(x.sum(size_t{1}, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(x.max(int64_t{-1}).to_vector<float>(), (std::vector<float>{3, 5}));
}

TEST(IntegerAxis, BracesStillMeanAxes) {
  Tensor x = tensor({{1.0f, 2.0f}, {3.0f, 4.0f}});
  EXPECT_EQ(x.sum({}).shape(), Shape{});  // {} is every axis, not axis 0
  EXPECT_EQ(x.sum({}).item<float>(), 10.0f);
  EXPECT_EQ(sum(x, {}, true).shape(), (Shape{1, 1}));
  EXPECT_EQ(x.sum({1}).to_vector<float>(), (std::vector<float>{3, 7}));
  EXPECT_EQ(x.sum({0, 1}).item<float>(), 10.0f);
}

TEST(IntegerAxis, OutOfRangeAxisIsTheSameErrorAsAxes) {
  Tensor x = tensor({{1.0f, 2.0f}});
  EXPECT_THROW((void)x.sum(2), IndexError);
  EXPECT_THROW((void)mean(x, -3), IndexError);
}

TEST(IntegerAxis, SqueezeOneAxis) {
  Tensor x = zeros({2, 1, 3});
  EXPECT_EQ(x.squeeze(1).shape(), (Shape{2, 3}));
  EXPECT_EQ(squeeze(x, -2).shape(), (Shape{2, 3}));
}

TEST(IntegerAxis, GradientFlowsThroughTheIntegerForm) {
  Tensor x = tensor({{1.0f, 2.0f}, {3.0f, 4.0f}});
  x.requires_grad_();
  x.mean(1).sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
}
