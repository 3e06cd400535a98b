// Assignment through an index, as NumPy's and PyTorch's t[0][1] = 5 and t[0:2] = u (issue 46):
// assigning to the temporary view that t[i] / t.index({...}) return writes into t's storage,
// while assigning to a named Tensor still rebinds the handle.
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/index.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/indexing.h>
#include <loom/ops/reduction.h>

#include <type_traits>

#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::values;

// A number is assigned only to a temporary (a view being written); to a named Tensor it would
// be ambiguous with rebinding, so it does not compile, as in PyTorch's C++ API.
static_assert(std::is_assignable_v<Tensor&&, int>);
static_assert(std::is_assignable_v<Tensor&&, double>);
static_assert(!std::is_assignable_v<Tensor&, int>);
static_assert(std::is_copy_assignable_v<Tensor> && std::is_move_assignable_v<Tensor>);
static_assert(std::is_nothrow_move_constructible_v<Tensor> && std::is_nothrow_move_assignable_v<Tensor>);

TEST(IndexAssignment, ElementByIndexAndBySubscripts) {
  Tensor t = zeros({2, 3});
  Tensor alias = t;
  t.index({0, 1}) = 5;
  t[1][2] = 2.5;
  EXPECT_EQ(values(t), (std::vector<double>{0, 5, 0, 0, 0, 2.5}));
  EXPECT_EQ(values(alias), values(t));  // the storage was written, every handle sees it
  t[-1][0] = 7;                         // negative positions count from the end
  EXPECT_EQ(t.at({1, 0}), 7.0);
  // converted to the tensor's dtype, as NumPy's a[0] = 2.9 into an int array
  Tensor i = zeros({3}, Int64);
  i[1] = 2.9;
  i.index({2}) = true;
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(i.dtype(), Int64);
}

TEST(IndexAssignment, SlicesAndRowsTakeNumbersAndBroadcastTensors) {
  Tensor t = zeros({3, 4});
  t.index({Slice(0, 2)}) = 0.5;                            // t[0:2] = 0.5
  t[2] = tensor<float>({1, 2, 3, 4});                      // a row from a tensor
  t.index({Slice(), Slice(None, None, 3)}) = tensor<float>({-1, -2});  // t[:, ::3] = [-1, -2]: broadcast
  EXPECT_EQ(values(t), (std::vector<double>{-1, 0.5, 0.5, -2, -1, 0.5, 0.5, -2, -1, 2, 3, -2}));
  // a value of another dtype is converted; one overlapping the target is read before written
  Tensor r = arange(6).reshape({2, 3}).astype(Float32);
  r[0] = r[1];
  EXPECT_EQ(values(r), (std::vector<double>{3, 4, 5, 3, 4, 5}));
  r[1] = tensor<int64_t>({7, 8, 9});
  EXPECT_EQ(values(r), (std::vector<double>{3, 4, 5, 7, 8, 9}));
  Tensor v = arange(5).astype(Float32);
  v.index({Slice(1, 5)}) = v.index({Slice(0, 4)});        // v[1:] = v[:-1] as NumPy: [0, 0, 1, 2, 3]
  EXPECT_EQ(values(v), (std::vector<double>{0, 0, 1, 2, 3}));
  EXPECT_THROW(t[0] = tensor<float>({1, 2, 3}), ShapeError);  // (3,) does not broadcast to (4,)
}

TEST(IndexAssignment, NamedTensorsStillRebindAndViewsStillView) {
  Tensor t = zeros({2, 3});
  Tensor row = t[0];  // a view: writes through it reach t
  EXPECT_TRUE(row.shares_storage_with(t));
  row.fill_(1);
  EXPECT_EQ(t.at({0, 2}), 1.0);
  Tensor other = ones({5});
  row = other;  // rebinds the handle; t is untouched
  EXPECT_TRUE(row.shares_storage_with(other));
  EXPECT_EQ(row.shape(), (Shape{5}));
  EXPECT_EQ(values(t), (std::vector<double>{1, 1, 1, 0, 0, 0}));
  Tensor a;
  a = t[1];  // move-assigning a temporary to a named Tensor rebinds too
  EXPECT_TRUE(a.shares_storage_with(t));
  EXPECT_EQ(a.shape(), (Shape{3}));
  EXPECT_EQ(values(t), (std::vector<double>{1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(values(t[1] = 4), (std::vector<double>{4, 4, 4}));  // the result is the view, written
  EXPECT_EQ(values(t), (std::vector<double>{1, 1, 1, 4, 4, 4}));
}

TEST(IndexAssignment, ACopyingIndexIsRefusedInsteadOfLosingTheWrite) {
  // an integer-array or mask index makes a copy: the write would vanish with the temporary
  Tensor t = zeros({4});
  const Tensor mask = tensor<bool>({true, false, true, false});
  const std::string msg = error_message<ValueError>([&] { t.index({mask}) = 1; });
  EXPECT_TRUE(contains_all(msg, {"t[i] = v", "would be lost", "index_put_"})) << msg;
  EXPECT_THROW(t.index({tensor<int64_t>({0, 2})}) = ones({2}), ValueError);
  EXPECT_EQ(values(t), (std::vector<double>{0, 0, 0, 0}));
  t.index_put_({mask}, 1);  // the way to write through such an index
  EXPECT_EQ(values(t), (std::vector<double>{1, 0, 1, 0}));
}

TEST(IndexAssignment, AutogradRefusesUnrecordedWritesAsTheOtherInPlaceOps) {
  Tensor w = zeros({2, 2}).requires_grad_();
  const std::string msg = error_message<AutogradError>([&] { w[0][1] = 5; });
  EXPECT_TRUE(contains_all(msg, {"requires grad", "NoGrad", "index_put"})) << msg;
  EXPECT_THROW(w.index({Slice(0, 1)}) = ones({1, 2}), AutogradError);
  Tensor y = w * 2;  // not a leaf, takes part in autograd all the same
  EXPECT_THROW(y[0] = 1, AutogradError);
  Tensor t = zeros({2});
  const std::string from = error_message<AutogradError>([&] { t[0] = w[0][0]; });
  EXPECT_TRUE(contains_all(from, {"value requires grad", "detach()"})) << from;
  EXPECT_EQ(values(w.detach()), (std::vector<double>{0, 0, 0, 0}));
  {
    NoGrad off;  // setting a parameter's values, as under torch.no_grad()
    w[0][1] = 5;
    t[0] = w[0][1];
  }
  EXPECT_EQ(values(w.detach()), (std::vector<double>{0, 5, 0, 0}));
  EXPECT_EQ(values(t), (std::vector<double>{5, 0}));
  EXPECT_TRUE(w.requires_grad() && w.is_leaf());
}
