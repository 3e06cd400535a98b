// Float64 finite-difference gradient checks for every differentiable op, driven by the case
// table of tests/reference/op_cases.cpp (the same cases the PyTorch comparison uses).
// For each case with differentiable inputs, all floating inputs are made float64; with a random
// cotangent c, L(x) = sum(f(x) * c) is differentiated by central differences (eps = 1e-6) and
// compared with Loom's autograd vector-Jacobian product.
#include <gtest/gtest.h>

#include <algorithm>
#include <loom/autograd/autograd.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/grad_mode.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/reduction.h>

#include <cmath>
#include <string>
#include <vector>

#include "reference/op_cases.h"

using namespace loom;
using namespace loom::reftest;

namespace {

constexpr double kEps = 1e-6;
constexpr double kAtol = 1e-6;
constexpr double kRtol = 1e-5;

bool has_grad_inputs(const OpCase& c) {
  if (!c.gradcheck) return false;
  for (const auto& s : c.inputs)
    if (s.diff && is_floating(s.dtype)) return true;
  return false;
}

std::vector<size_t> gradcheck_cases() {
  std::vector<size_t> v;
  for (size_t i = 0; i < op_cases().size(); ++i)
    if (has_grad_inputs(op_cases()[i])) v.push_back(i);
  return v;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

TEST(GradCheckCoverage, EveryDifferentiableOpHasAGradcheckCase) {
  const auto missing = differentiable_ops_without_grad_cases(true);
  EXPECT_TRUE(missing.empty()) << "differentiable registry ops without a finite-difference case: " << join(missing);
}

TEST(GradCheckCoverage, EveryRegistryOpHasACase) {
  const auto missing = ops_without_cases();
  EXPECT_TRUE(missing.empty()) << "registry ops without a test case: " << join(missing);
}

class GradCheck : public ::testing::TestWithParam<size_t> {};

TEST_P(GradCheck, AutogradMatchesFiniteDifferences) {
  const size_t ci = GetParam();
  const OpCase& c = op_cases()[ci];
  SCOPED_TRACE(c.op + " [" + c.label + "]");
  std::vector<Tensor> in = make_inputs(c, ci + 1, /*to_float64=*/true);
  std::vector<Tensor> diff;
  std::vector<size_t> diff_pos;
  for (size_t k = 0; k < in.size(); ++k)
    if (in[k].requires_grad()) {
      diff.push_back(in[k]);
      diff_pos.push_back(k);
    }
  ASSERT_FALSE(diff.empty());
  Tensor out = c.fn(in);
  ASSERT_EQ(out.dtype(), Float64) << "with float64 inputs the output should be float64";
  const Tensor cot = random_cotangent(out.shape(), Float64, ci + 1);
  const std::vector<Tensor> ad = loom::grad(out, diff, cot);

  auto loss = [&]() {
    NoGrad ng;
    return sum(multiply(c.fn(in), cot)).item<double>();
  };
  for (size_t d = 0; d < diff.size(); ++d) {
    const Tensor& x = diff[d];
    ASSERT_EQ(ad[d].shape(), x.shape());
    ASSERT_EQ(ad[d].dtype(), Float64);
    double* base = static_cast<double*>(x.data_ptr());
    std::vector<int64_t> idx(static_cast<size_t>(x.ndim()), 0);
    int failures = 0;
    for (int64_t n = 0; n < x.numel(); ++n) {
      int64_t off = 0;
      for (int64_t a = 0; a < x.ndim(); ++a) off += idx[a] * x.strides()[a];
      const double orig = base[off];
      base[off] = orig + kEps;
      const double lp = loss();
      base[off] = orig - kEps;
      const double lm = loss();
      base[off] = orig;
      const double fd = (lp - lm) / (2 * kEps);
      const double got = ad[d].at(idx);
      if (!(std::fabs(got - fd) <= kAtol + kRtol * std::fabs(fd)) && failures++ < 5)
        ADD_FAILURE() << "input " << diff_pos[d] << " element " << n << ": autograd " << got << ", finite difference " << fd;
      for (int64_t a = x.ndim(); a-- > 0;) {
        if (++idx[a] < x.shape()[a]) break;
        idx[a] = 0;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, GradCheck, ::testing::ValuesIn(gradcheck_cases()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           std::string name = op_cases()[info.param].op;  // "linalg.svd": gtest names are [A-Za-z0-9_]
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name + "_" + std::to_string(info.param);
                         });
