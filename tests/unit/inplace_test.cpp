// In-place updates: compound assignment, fill_, copy_ (broadcasting, overlap), and their
// refusal on tensors that take part in autograd.
#include "core_test_util.h"

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
