// In-place updates: compound assignment, fill_, copy_ (broadcasting, overlap), and their
// refusal on tensors that take part in autograd.
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/half.h>
#include <loom/core/index.h>
#include <loom/core/memory.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/storage.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

#include "unit/common/core_test_util.h"
#include "unit/ops/ops_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::iota;
using loom_test::values;

TEST(InPlace, CompoundAssignmentUpdatesStorage) {
  Tensor a = iota({4});
  Tensor alias = a;
  const void* p = a.data_ptr();
  a += 1.0;
  a *= 2.0;
  a -= tensor<float>({1, 1, 1, 1});
  a /= 2.0;
  EXPECT_EQ(values(a), (std::vector<double>{0.5, 1.5, 2.5, 3.5}));
  EXPECT_EQ(a.data_ptr(), p);            // same storage, not a rebinding
  EXPECT_EQ(values(alias), values(a));  // other handles see it
  EXPECT_EQ(a.dtype(), Float32);
}

TEST(InPlace, BroadcastingOperand) {
  Tensor a = zeros({2, 3});
  a += tensor<float>({1, 2, 3});
  a *= from_vector<float>({1, 10}, {2, 1});
  a -= scalar_tensor(1.0f);
  EXPECT_EQ(values(a), (std::vector<double>{0, 1, 2, 9, 19, 29}));
}

TEST(InPlace, DtypeIsKept) {
  Tensor u = full({2}, 250, UInt8);
  u += 10;  // wraps like NumPy's uint8 arithmetic
  EXPECT_EQ(u.dtype(), UInt8);
  EXPECT_EQ(values<int>(u), (std::vector<int>{4, 4}));
  Tensor f = ones({2}, Float32);
  f += ones({2}, Float64);  // float64 result stored into float32
  EXPECT_EQ(f.dtype(), Float32);
  EXPECT_EQ(values(f), (std::vector<double>{2, 2}));
  Tensor i = ones({2}, Int64);
  EXPECT_THROW(i /= 2, DTypeError);  // true division gives float64
  EXPECT_THROW(i *= 1.5, DTypeError);
  EXPECT_EQ(values(i), (std::vector<double>{1, 1}));
}

TEST(InPlace, ThroughViews) {
  Tensor x = zeros({3, 3});
  Tensor diag = x.reshape({9}).index({Slice(None, None, 4)});
  diag += 1.0;
  EXPECT_EQ(sum(x).item<float>(), 3.0f);
  EXPECT_EQ(x.at({2, 2}), 1.0);
  Tensor col = x.T()[0];  // x[:, 0]
  col *= 5.0;
  EXPECT_EQ(x.at({0, 0}), 5.0);
  EXPECT_EQ(x.at({1, 1}), 1.0);
}

TEST(InPlace, OverlappingOperands) {
  // a += a.T reads every element before writing (NumPy semantics)
  Tensor a = iota({3, 3});
  a += a.T();
  EXPECT_EQ(values(a), (std::vector<double>{0, 4, 8, 4, 8, 12, 8, 12, 16}));
  Tensor b = iota({5});
  Tensor tail = b.index({Slice(1, None)});
  tail += b.index({Slice(None, -1)});  // b[1:] += b[:-1]
  EXPECT_EQ(values(b), (std::vector<double>{0, 1, 3, 5, 7}));
}

TEST(InPlace, Fill) {
  Tensor x = zeros({2, 4});
  x.index({Slice(), Slice(None, None, 2)}).fill_(3.0);
  EXPECT_EQ(values(x), (std::vector<double>{3, 0, 3, 0, 3, 0, 3, 0}));
  flip(x, {1}).index({0}).fill_(-1);
  EXPECT_EQ(values(x), (std::vector<double>{-1, -1, -1, -1, 3, 0, 3, 0}));
  Tensor i = zeros({3}, Int32);
  i.fill_(2.7);
  EXPECT_EQ(values<int>(i), (std::vector<int>{2, 2, 2}));
  Tensor b = zeros({2}, Bool);
  b.fill_(true);
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, true}));
  Tensor h = zeros({2}, Float16);
  h.fill_(0.1);
  EXPECT_EQ(h.data<half>()[0].bits, half(0.1f).bits);
  Tensor s = scalar_tensor(0.0);
  s.fill_(4.0);
  EXPECT_EQ(s.item<float>(), 4.0f);
}

TEST(InPlace, CopyBroadcastsAndConverts) {
  Tensor dst = zeros({2, 3});
  dst.copy_(tensor<float>({1, 2, 3}));
  EXPECT_EQ(values(dst), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  dst.copy_(scalar_tensor(7.0));
  EXPECT_EQ(values(dst), (std::vector<double>(6, 7.0)));
  Tensor i = zeros({3}, Int32);
  i.copy_(tensor<double>({1.9, -1.9, 3.0}));
  EXPECT_EQ(values<int>(i), (std::vector<int>{1, -1, 3}));
  // into a strided view
  Tensor base = zeros({2, 4});
  base.index({Slice(), Slice(1, None, 2)}).copy_(from_vector<float>({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(values(base), (std::vector<double>{0, 1, 0, 2, 0, 3, 0, 4}));
  EXPECT_THROW(zeros({3}).copy_(zeros({2, 3})), ShapeError);
}

TEST(InPlace, CopyWithOverlap) {
  // x[1:] = x[:-1]: NumPy copies as if through a temporary
  Tensor x = iota({5});
  x.index({Slice(1, None)}).copy_(x.index({Slice(None, -1)}));
  EXPECT_EQ(values(x), (std::vector<double>{0, 0, 1, 2, 3}));
  Tensor y = iota({5});
  y.index({Slice(None, -1)}).copy_(y.index({Slice(1, None)}));
  EXPECT_EQ(values(y), (std::vector<double>{1, 2, 3, 4, 4}));
  Tensor a = iota({3, 3});
  a.copy_(a.T());
  EXPECT_EQ(values(a), (std::vector<double>{0, 3, 6, 1, 4, 7, 2, 5, 8}));
  Tensor r = iota({4});
  r.copy_(flip(r));
  EXPECT_EQ(values(r), (std::vector<double>{3, 2, 1, 0}));
  Tensor s = iota({4});
  s.copy_(s);  // self copy is a no-op
  EXPECT_EQ(values(s), (std::vector<double>{0, 1, 2, 3}));
}

TEST(InPlace, RefusedOnTensorsThatRequireGrad) {
  Tensor w = iota({3});
  w.requires_grad_();
  auto expect_refused = [&](auto&& f, const char* op) {
    std::string m = error_message<AutogradError>(f);
    EXPECT_TRUE(contains_all(m, {op, "NoGrad"})) << m;
  };
  expect_refused([&] { w += 1.0; }, "+=");
  expect_refused([&] { w -= ones({3}); }, "-=");
  expect_refused([&] { w *= 2.0; }, "*=");
  expect_refused([&] { w /= 2.0; }, "/=");
  expect_refused([&] { w.fill_(0.0); }, "fill_");
  expect_refused([&] { w.copy_(zeros({3})); }, "copy_");
  expect_refused([&] { w.index_put_({0}, 5.0); }, "index_put_");
  // a view of it is part of the graph too
  Tensor v = w.index({Slice(0, 2)});
  expect_refused([&] { v += 1.0; }, "+=");
  expect_refused([&] { v.fill_(1.0); }, "fill_");
  // a tensor that requires grad cannot flow into another tensor in place either
  Tensor plain = zeros({3});
  expect_refused([&] { plain += w; }, "+=");
  expect_refused([&] { plain.copy_(w); }, "copy_");
  expect_refused([&] { plain.index_put_({Slice()}, w); }, "index_put_");
  EXPECT_EQ(values(w), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(values(plain), (std::vector<double>{0, 0, 0}));
  // under NoGrad it is allowed (an optimizer step)
  {
    NoGrad no_grad;
    w -= 1.0;
    plain += w;
  }
  EXPECT_EQ(values(w), (std::vector<double>{-1, 0, 1}));
  EXPECT_EQ(values(plain), (std::vector<double>{-1, 0, 1}));
  EXPECT_TRUE(w.is_leaf());
  EXPECT_TRUE(w.requires_grad());
  EXPECT_FALSE(plain.requires_grad());
  // a detached alias may be written; the leaf sees the new values
  Tensor d = w.detach();
  d.fill_(9.0);
  EXPECT_EQ(values(w), (std::vector<double>{9, 9, 9}));
}

namespace {
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ac = a.copy(), bc = b.copy();  // contiguous
  return std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.nbytes()) == 0;
}
// Runs op(target, operand) and checks it against the copy path: the out-of-place result
// converted to the target's dtype (what the copy path stored).
template <typename Op, typename Ref, typename B>
void expect_as_copy_path(Tensor target, const B& operand, Op op, Ref ref) {
  const Tensor expected = astype(ref(target.copy(), operand), target.dtype());
  op(target, operand);
  EXPECT_TRUE(same_bits(target, expected)) << target.str() << "\nexpected\n" << expected.str();
}
}  // namespace

TEST(InPlace, CompoundAssignmentIsBitwiseTheCopyPath) {
  manual_seed(11);
  const Tensor x = randn({37, 19}), row = randn({19}), col = randn({37, 1}), one = randn({37, 19}, Float64);
  const Tensor positive = uniform({37, 19}, 0.5, 2.0);
  auto add_ = [](Tensor& a, const auto& b) { a += b; };
  auto sub_ = [](Tensor& a, const auto& b) { a -= b; };
  auto mul_ = [](Tensor& a, const auto& b) { a *= b; };
  auto div_ = [](Tensor& a, const auto& b) { a /= b; };
  auto add = [](const Tensor& a, const auto& b) { return a + b; };
  auto sub = [](const Tensor& a, const auto& b) { return a - b; };
  auto mul = [](const Tensor& a, const auto& b) { return a * b; };
  auto div = [](const Tensor& a, const auto& b) { return a / b; };
  for (const Tensor& b : {x, row, col, positive, one, x.astype(Int32)}) {  // same shape, broadcast, other dtypes
    expect_as_copy_path(randn({37, 19}), b, add_, add);
    expect_as_copy_path(randn({37, 19}), b, sub_, sub);
    expect_as_copy_path(randn({37, 19}), b, mul_, mul);
    expect_as_copy_path(randn({37, 19}), b, div_, div);
    expect_as_copy_path(randn({37, 19}, Float64), b, add_, add);
  }
  for (double s : {0.3, -2.0}) {
    expect_as_copy_path(randn({37, 19}), s, add_, add);
    expect_as_copy_path(randn({37, 19}), s, sub_, sub);
    expect_as_copy_path(randn({37, 19}), s, mul_, mul);
    expect_as_copy_path(randn({37, 19}), s, div_, div);
  }
  expect_as_copy_path(randint(-50, 50, {7, 5}, Int32), randint(-50, 50, {5}, Int32), mul_, mul);
  expect_as_copy_path(randint(-50, 50, {7, 5}, Int32), 3, sub_, sub);
  expect_as_copy_path(randn({9}, Float16), randn({9}, Float16), add_, add);  // rounds from float32: copy path
  // a strided target (a transposed and a stepped view)
  for (const Tensor& base : {randn({19, 37}), randn({37, 38})}) {
    Tensor target = base.shape()[0] == 19 ? base.T() : base.index({Slice(), Slice(None, None, 2)});
    const Tensor expected = target + row;
    target += row;
    EXPECT_TRUE(same_bits(target, expected));
  }
  // a += a, elementwise, and a partly overlapping operand (the copy path)
  Tensor a = randn({37, 19});
  Tensor twice = a + a;
  a += a;
  EXPECT_TRUE(same_bits(a, twice));
  Tensor square = a * a;
  a *= a;
  EXPECT_TRUE(same_bits(a, square));
  Tensor b = randn({40});
  Tensor shifted = b.index({Slice(1, None)}) - b.index({Slice(None, -1)});
  Tensor tail = b.index({Slice(1, None)});
  tail -= b.index({Slice(None, -1)});
  EXPECT_TRUE(same_bits(tail, shifted));
}

TEST(InPlace, CompoundAssignmentWritesIntoItsTarget) {
  Tensor a = randn({256, 64});
  const Tensor b = randn({256, 64}), row = randn({64});
  const uint64_t version = a.storage()->version();
  const int64_t before = memory_stats().allocations;
  a += b;
  a -= row;
  a *= b;
  a /= row;
  a += a;
  EXPECT_EQ(memory_stats().allocations - before, 0);  // no result tensor (the copy path: one each)
  EXPECT_EQ(a.storage()->version(), version + 5);
  const int64_t scalar_before = memory_stats().allocations;
  a *= 0.5;
  EXPECT_EQ(memory_stats().allocations - scalar_before, 1);  // the 0-d scalar only
}
