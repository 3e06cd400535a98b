// Every error path throws a loom::Error subclass whose message names the op, the operands'
// shapes or dtypes, and what would have been valid.
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/index.h>
#include <loom/core/parallel.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/indexing.h>
#include <loom/ops/linalg.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

#include "unit/common/core_test_util.h"
#include "unit/ops/ops_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::iota;

TEST(Errors, AllDeriveFromLoomError) {
  EXPECT_THROW(add(zeros({2}), zeros({3})), Error);
  EXPECT_THROW(zeros({2}).item<float>(), Error);
  EXPECT_THROW(zeros({2}, Float32, Device::cuda()), Error);
  EXPECT_THROW(zeros({2}).sum({5}), Error);
  EXPECT_THROW(zeros({2}, Int32).requires_grad_(), Error);
  EXPECT_THROW(zeros({2})[7], Error);
}

TEST(Errors, ShapeMismatch) {
  std::string m = error_message<ShapeError>([] { add(zeros({2, 3}), zeros({3, 2})); });
  EXPECT_TRUE(contains_all(m, {"add", "(2, 3)", "(3, 2)", "equal or one of them 1"}));
  m = error_message<ShapeError>([] { matmul(zeros({2, 3}), zeros({4, 5})); });
  EXPECT_TRUE(contains_all(m, {"matmul", "(2, 3)", "(4, 5)", "must equal"}));
  m = error_message<ShapeError>([] { concatenate({zeros({2, 3}), zeros({2, 4})}, 0); });
  EXPECT_TRUE(contains_all(m, {"concatenate", "(2, 3)", "(2, 4)", "must match"}));
  m = error_message<ShapeError>([] { stack({zeros({2}), zeros({3})}); });
  EXPECT_TRUE(contains_all(m, {"stack", "(2,)", "(3,)"}));
  m = error_message<ShapeError>([] { where(zeros({2}, Bool), zeros({3}), zeros({3})); });
  EXPECT_TRUE(contains_all(m, {"where", "(2,)", "(3,)"}));
  m = error_message<ShapeError>([] { zeros({3}).broadcast_to({2}); });
  EXPECT_TRUE(contains_all(m, {"broadcast_to", "(3,)", "(2,)"}));
  m = error_message<ShapeError>([] { from_vector<float>({1, 2, 3}, {2, 2}); });
  EXPECT_TRUE(contains_all(m, {"from_vector", "3", "(2, 2)", "4"}));
  m = error_message<ShapeError>([] { zeros({2, 3}).squeeze({1}); });
  EXPECT_TRUE(contains_all(m, {"squeeze", "(2, 3)", "size-1"}));
  m = error_message<ShapeError>([] { take_along_axis(zeros({2, 3}), zeros({2}, Int64), 1); });
  EXPECT_TRUE(contains_all(m, {"take_along_axis", "rank"}));
}

TEST(Errors, ReshapeWithWrongNumel) {
  std::string m = error_message<ShapeError>([] { zeros({2, 3}).reshape({4}); });
  EXPECT_TRUE(contains_all(m, {"reshape", "(2, 3)", "6 elements", "(4,)", "4 elements"}));
  m = error_message<ShapeError>([] { zeros({2, 3}).reshape({4, -1}); });
  EXPECT_TRUE(contains_all(m, {"reshape", "(2, 3)", "(4, -1)"}));
  m = error_message<ShapeError>([] { zeros({6}).reshape({-1, -1}); });
  EXPECT_TRUE(contains_all(m, {"reshape", "-1"}));
  m = error_message<ShapeError>([] { zeros({6}).reshape({-2, -3}); });
  EXPECT_TRUE(contains_all(m, {"reshape", "-2"}));
  m = error_message<ShapeError>([] { zeros({2, 3}).T().view({6}); });
  EXPECT_TRUE(contains_all(m, {"view", "(3, 2)", "(6,)", "reshape"}));
}

TEST(Errors, BadAxis) {
  std::string m = error_message<IndexError>([] { zeros({2, 3}).sum({2}); });
  EXPECT_TRUE(contains_all(m, {"sum", "axis 2", "rank 2", "-2 to 1"}));
  m = error_message<IndexError>([] { zeros({2, 3}).sum({-3}); });
  EXPECT_TRUE(contains_all(m, {"sum", "axis -3", "-2 to 1"}));
  m = error_message<IndexError>([] { softmax(zeros({2, 3}), 4); });
  EXPECT_TRUE(contains_all(m, {"softmax", "axis 4"}));
  m = error_message<IndexError>([] { zeros({2}).expand_dims(3); });
  EXPECT_TRUE(contains_all(m, {"expand_dims", "axis 3", "-2 to 1"}));
  m = error_message<IndexError>([] { cumsum(zeros({2}), 1); });
  EXPECT_TRUE(contains_all(m, {"cumsum", "axis 1"}));
  m = error_message<IndexError>([] { argmax(zeros({2}), -2); });
  EXPECT_TRUE(contains_all(m, {"argmax", "axis -2"}));
  m = error_message<IndexError>([] { scalar_tensor(1.0).sum({0}); });
  EXPECT_TRUE(contains_all(m, {"sum", "rank 0"}));
  m = error_message<IndexError>([] { zeros({2, 3}).dim(2); });
  EXPECT_TRUE(contains_all(m, {"dim", "axis 2"}));
  m = error_message<ValueError>([] { zeros({2, 3}).sum({1, -1}); });
  EXPECT_TRUE(contains_all(m, {"sum", "twice"}));
  m = error_message<ValueError>([] { zeros({2, 3}).permute({0}); });
  EXPECT_TRUE(contains_all(m, {"permute", "(0,)", "rank 2", "permutation"}));
  m = error_message<ValueError>([] { zeros({2, 3}).permute({1, 1}); });
  EXPECT_TRUE(contains_all(m, {"permute", "(1, 1)", "repeat"}));
}

TEST(Errors, BadDtype) {
  std::string m = error_message<DTypeError>([] { zeros({2}, Int32).requires_grad_(); });
  EXPECT_TRUE(contains_all(m, {"requires_grad_", "int32", "floating"}));
  m = error_message<DTypeError>([] { zeros({2}, Int64).data<float>(); });
  EXPECT_TRUE(contains_all(m, {"data", "int64", "float32"}));
  m = error_message<DTypeError>([] { subtract(ones({2}, Bool), ones({2}, Bool)); });
  EXPECT_TRUE(contains_all(m, {"subtract", "bool", "(2,)", "logical_xor"}));
  m = error_message<DTypeError>([] { negative(ones({2}, Bool)); });
  EXPECT_TRUE(contains_all(m, {"negative", "bool", "logical_not"}));
  m = error_message<DTypeError>([] { uniform({2}, 0, 1, Int32); });
  EXPECT_TRUE(contains_all(m, {"uniform", "int32", "float32"}));
  m = error_message<DTypeError>([] { normal({2}, 0, 1, Int64); });
  EXPECT_TRUE(contains_all(m, {"normal", "int64"}));
  m = error_message<DTypeError>([] { iota({3}).index({tensor<float>({0.0f})}); });
  EXPECT_TRUE(contains_all(m, {"index", "float32", "integers or a boolean mask"}));
  m = error_message<DTypeError>([] { take(iota({3}), tensor<float>({0.0f})); });
  EXPECT_TRUE(contains_all(m, {"take", "float32"}));
  m = error_message<DTypeError>([] {
    Tensor i = tensor<int32_t>({1});
    i += 0.5;
  });
  EXPECT_TRUE(contains_all(m, {"+=", "float32", "int32"}));
}

TEST(Errors, IndexOutOfRange) {
  std::string m = error_message<IndexError>([] { iota({3})[3]; });
  EXPECT_TRUE(contains_all(m, {"index", "index 3", "axis 0", "size 3", "-3 to 2"}));
  m = error_message<IndexError>([] { iota({3})[-4]; });
  EXPECT_TRUE(contains_all(m, {"index -4", "-3 to 2"}));
  m = error_message<IndexError>([] { iota({2, 3}).index({Slice(), 5}); });
  EXPECT_TRUE(contains_all(m, {"index 5", "axis 1", "size 3"}));
  m = error_message<IndexError>([] { iota({2, 3}).index({0, 0, 0}); });
  EXPECT_TRUE(contains_all(m, {"index", "too many indices", "(2, 3)"}));
  m = error_message<IndexError>([] { iota({2, 3}).index({Ellipsis, 0, Ellipsis}); });
  EXPECT_TRUE(contains_all(m, {"index", "Ellipsis"}));
  m = error_message<IndexError>([] { iota({4}).index({tensor<int64_t>({0, 9, 2})}); });
  EXPECT_TRUE(contains_all(m, {"index", "index 9", "size 4", "-4 to 3"}));
  m = error_message<IndexError>([] { take(iota({4}), tensor<int64_t>({-5})); });
  EXPECT_TRUE(contains_all(m, {"take", "index -5", "size 4"}));
  m = error_message<IndexError>([] { iota({2, 3}).index({tensor<bool>({true, false, true})}); });
  EXPECT_TRUE(contains_all(m, {"index", "mask", "(3,)", "(2, 3)"}));
  m = error_message<IndexError>([] { iota({2, 3}).at({2, 0}); });
  EXPECT_TRUE(contains_all(m, {"at", "index 2", "axis 0", "size 2"}));
  m = error_message<IndexError>([] { iota({2, 3}).at({0}); });
  EXPECT_TRUE(contains_all(m, {"at", "1 indices", "(2, 3)", "exactly 2"}));
  m = error_message<IndexError>([] { scatter_add(zeros({3}), 0, tensor<int64_t>({3}), ones({1})); });
  EXPECT_TRUE(contains_all(m, {"scatter_add", "index 3", "size 3"}));
}

TEST(Errors, UndefinedTensor) {
  Tensor u;
  EXPECT_FALSE(u.defined());
  std::string m = error_message<ValueError>([&] { add(u, zeros({2})); });
  EXPECT_TRUE(contains_all(m, {"add", "undefined"}));
  m = error_message<ValueError>([&] { zeros({2}) * u; });
  EXPECT_TRUE(contains_all(m, {"multiply", "undefined"}));
  m = error_message<ValueError>([&] { u + 1.0; });
  EXPECT_TRUE(contains_all(m, {"undefined"}));
  m = error_message<ValueError>([&] { sum(u); });
  EXPECT_TRUE(contains_all(m, {"sum", "undefined"}));
  m = error_message<ValueError>([&] { reshape(u, {1}); });
  EXPECT_TRUE(contains_all(m, {"reshape", "undefined"}));
  m = error_message<ValueError>([&] { u.shape(); });
  EXPECT_TRUE(contains_all(m, {"shape", "undefined"}));
  m = error_message<ValueError>([&] { u.item<float>(); });
  EXPECT_TRUE(contains_all(m, {"item", "undefined"}));
  m = error_message<ValueError>([&] { u.to_vector<float>(); });
  EXPECT_TRUE(contains_all(m, {"to_vector", "undefined"}));
  m = error_message<ValueError>([&] { (void)static_cast<bool>(u); });
  EXPECT_TRUE(contains_all(m, {"bool", "undefined"}));
  m = error_message<ValueError>([&] { u.copy(); });
  EXPECT_TRUE(contains_all(m, {"copy", "undefined"}));
  m = error_message<ValueError>([&] { zeros({2}).copy_(u); });
  EXPECT_TRUE(contains_all(m, {"copy_", "undefined"}));
  m = error_message<ValueError>([&] { u.fill_(1.0); });
  EXPECT_TRUE(contains_all(m, {"fill_", "undefined"}));
  m = error_message<ValueError>([&] { u.requires_grad_(); });
  EXPECT_TRUE(contains_all(m, {"requires_grad_", "undefined"}));
  m = error_message<AutogradError>([&] { u.backward(); });
  EXPECT_TRUE(contains_all(m, {"backward", "undefined"}));
  m = error_message<ValueError>([&] { matmul(u, u); });
  EXPECT_TRUE(contains_all(m, {"matmul", "undefined"}));
  m = error_message<ValueError>([&] { u.index({0}); });
  EXPECT_TRUE(contains_all(m, {"index", "undefined"}));
  EXPECT_EQ(u.str(), "tensor(undefined)");
  EXPECT_FALSE(u.requires_grad());
}

TEST(Errors, CudaIsADeviceError) {
  const auto check = [](auto&& f, const char* op) {
    std::string m = error_message<DeviceError>(f);
    EXPECT_TRUE(contains_all(m, {op, "cuda:0", "cpu"})) << m;
  };
  check([] { zeros({2}, Float32, Device::cuda()); }, "zeros");
  check([] { ones({2}, Float32, Device::cuda()); }, "ones");
  check([] { empty({2}, Float32, Device::cuda()); }, "empty");
  check([] { full({2}, 1.0, Float32, Device::cuda()); }, "full");
  check([] { scalar_tensor(1.0, Float32, Device::cuda()); }, "scalar_tensor");
  check([] { arange(0.0, 3.0, 1.0, Float32, Device::cuda()); }, "arange");
  check([] { arange(3, Int64, Device::cuda()); }, "arange");
  check([] { linspace(0, 1, 3, true, Float32, Device::cuda()); }, "linspace");
  check([] { eye(2, std::nullopt, 0, Float32, Device::cuda()); }, "eye");
  check([] { from_vector<float>({1, 2}, {2}, Device::cuda()); }, "from_vector");
  check([] { tensor<float>({1, 2}, Device::cuda()); }, "from_vector");
  check([] { uniform({2}, 0, 1, Float32, Device::cuda()); }, "uniform");
  check([] { randn({2}, Float32, Device::cuda()); }, "normal");
  check([] { bernoulli({2}, 0.5, Float32, Device::cuda()); }, "bernoulli");
  check([] { randint(0, 5, {2}, Int64, Device::cuda()); }, "randint");
  check([] { permutation(4, Device::cuda()); }, "permutation");
  check([] { zeros({2}).to(Device::cuda()); }, "to");
  {
    DeviceScope scope(Device::cuda(1));
    EXPECT_EQ(default_device(), Device::cuda(1));
    std::string m = error_message<DeviceError>([] { zeros({2}); });
    EXPECT_TRUE(contains_all(m, {"zeros", "cuda:1"})) << m;
  }
  EXPECT_EQ(default_device(), Device::cpu());
  EXPECT_EQ(zeros({2}).device(), Device::cpu());
  EXPECT_EQ(Device::cuda(2).str(), "cuda:2");
}

TEST(Errors, ItemOnManyElements) {
  std::string m = error_message<ValueError>([] { zeros({2, 2}).item<float>(); });
  EXPECT_TRUE(contains_all(m, {"item", "(2, 2)", "4 elements", "exactly one element"}));
  m = error_message<ValueError>([] { zeros({0}).item<float>(); });
  EXPECT_TRUE(contains_all(m, {"item", "(0,)", "0 elements"}));
  EXPECT_EQ(ones({1, 1, 1}).item<float>(), 1.0f);  // one element of any rank is fine
}

TEST(Errors, BoolIsAmbiguousForManyElements) {
  std::string m = error_message<ValueError>([] { (void)static_cast<bool>(zeros({3}) < 1.0); });
  EXPECT_TRUE(contains_all(m, {"bool", "(3,)", "ambiguous", "any()", "all()"}));
  m = error_message<ValueError>([] { (void)static_cast<bool>(zeros({0})); });
  EXPECT_TRUE(contains_all(m, {"bool", "(0,)"}));
}

TEST(Errors, ValueErrors) {
  std::string m = error_message<ValueError>([] { set_num_threads(0); });
  EXPECT_TRUE(contains_all(m, {"set_num_threads", "0", "1 or more"}));
  m = error_message<ValueError>([] { arange(0.0, 1.0, 0.0); });
  EXPECT_TRUE(contains_all(m, {"arange", "step"}));
  m = error_message<ValueError>([] { uniform({2}, 1.0, 1.0); });
  EXPECT_TRUE(contains_all(m, {"uniform", "low", "high"}));
  m = error_message<ValueError>([] { bernoulli({2}, 1.5); });
  EXPECT_TRUE(contains_all(m, {"bernoulli", "[0, 1]"}));
  m = error_message<ValueError>([] { split(zeros({5}), 2); });
  EXPECT_TRUE(contains_all(m, {"split", "5", "2"}));
  m = error_message<ValueError>([] { max(zeros({0, 3}), {0}); });
  EXPECT_TRUE(contains_all(m, {"max", "(0, 3)", "size zero"}));
  m = error_message<ShapeError>([] { zeros({-1}); });
  EXPECT_TRUE(contains_all(m, {"(-1,)", ">= 0"}));
}

TEST(Errors, RequiresGradRules) {
  std::string m = error_message<DTypeError>([] { zeros({2}, Int64).requires_grad_(); });
  EXPECT_TRUE(contains_all(m, {"requires_grad_", "int64"}));
  EXPECT_NO_THROW(zeros({2}, Int64).requires_grad_(false));
  Tensor x = ones({2});
  x.requires_grad_();
  Tensor y = x * 2.0;
  m = error_message<AutogradError>([&] { y.requires_grad_(false); });
  EXPECT_TRUE(contains_all(m, {"requires_grad_", "leaf", "multiply", "detach"}));
}
