// NumPy indexing: basic (views), advanced (copies), boolean masks, Ellipsis, NewAxis, and the
// in-place and gather/scatter forms. Expected values were computed with NumPy on
// x = np.arange(24).reshape(2, 3, 4).
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/index.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/indexing.h>
#include <loom/ops/reduction.h>

#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::values;

namespace {

Tensor x24() { return arange(24).reshape({2, 3, 4}); }
Tensor ids(std::initializer_list<int64_t> v) { return tensor<int64_t>(v); }

void expect_result(const Tensor& r, const Shape& shape, const std::vector<int64_t>& flat) {
  EXPECT_EQ(r.shape(), shape);
  EXPECT_EQ(r.to_vector<int64_t>(), flat);
}

}  // namespace

TEST(Indexing, BasicIndicesGiveViews) {
  Tensor x = x24();
  Tensor a = x.index({1, Slice(None, None, -1), Slice(1, 3)});  // x[1, ::-1, 1:3]
  expect_result(a, {3, 2}, {21, 22, 17, 18, 13, 14});
  EXPECT_TRUE(a.shares_storage_with(x));
  expect_result(x.index({Ellipsis, 1}), {2, 3}, {1, 5, 9, 13, 17, 21});         // x[..., 1]
  expect_result(x.index({NewAxis, 0, Slice(), NewAxis}), {1, 3, 1, 4},          // x[None, 0, :, None]
                {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  expect_result(x.index({None, 0, Slice(), None}), {1, 3, 1, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  expect_result(x.index({-1, -2}), {4}, {16, 17, 18, 19});                       // x[-1, -2]
  expect_result(x.index({Slice(), Slice(None, None, -2), Slice(-3, -1)}), {2, 2, 2},  // x[:, ::-2, -3:-1]
                {9, 10, 1, 2, 21, 22, 13, 14});
  expect_result(x.index({Ellipsis, NewAxis, 2}), {2, 3, 1}, {2, 6, 10, 14, 18, 22});  // x[..., None, 2]
  EXPECT_EQ(x.index({}).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(x.index({Ellipsis}).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(x.index({1, 2, 3}).ndim(), 0);
  EXPECT_EQ(x.index({1, 2, 3}).item<int64_t>(), 23);
  EXPECT_EQ(x.index({0, Ellipsis, 0, 0}).item<int64_t>(), 0);
  EXPECT_TRUE(x.index({Ellipsis, 1}).shares_storage_with(x));
}

TEST(Indexing, AdvancedIntegerArrays) {
  Tensor x = x24();
  expect_result(x.index({ids({0, 1}), ids({2, 0})}), {2, 4}, {8, 9, 10, 11, 12, 13, 14, 15});  // x[[0,1],[2,0]]
  expect_result(x.index({Slice(), ids({0, 2}), ids({1, 3})}), {2, 2}, {1, 11, 13, 23});        // x[:, [0,2], [1,3]]
  // separated advanced indices put the broadcast axes first: x[[0,1], :, [1,3]]
  expect_result(x.index({ids({0, 1}), Slice(), ids({1, 3})}), {2, 3}, {1, 5, 9, 15, 19, 23});
  // negative indices wrap: x[[-1, 0, 0]]
  Tensor o = x.index({ids({-1, 0, 0})});
  EXPECT_EQ(o.shape(), (Shape{3, 3, 4}));
  EXPECT_EQ(o.at({0, 0, 0}), 12);
  EXPECT_EQ(o.at({2, 2, 3}), 11);
  // a 2-d index array: x[:, [[0,1],[2,0]]]
  expect_result(x.index({Slice(), from_vector<int64_t>({0, 1, 2, 0}, {2, 2})}), {2, 2, 2, 4},
                {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3,
                 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 12, 13, 14, 15});
  // index arrays broadcast together: x[[[0],[1]], 1, [0,1,2]]
  expect_result(x.index({from_vector<int64_t>({0, 1}, {2, 1}), 1, ids({0, 1, 2})}), {2, 3}, {4, 5, 6, 16, 17, 18});
  // other integer index dtypes
  expect_result(x.index({tensor<int32_t>({1}), 0, 0}), {1}, {12});
  expect_result(x.index({tensor<uint8_t>({1, 0}), 0, 0}), {2}, {12, 0});
  // an advanced result is a copy
  Tensor c = x.index({ids({0})});
  EXPECT_FALSE(c.shares_storage_with(x));
}

TEST(Indexing, IntegerNextToArraysCountsAsAdvanced) {
  Tensor x = x24();
  // x[:, 1, [0,2]]: the integer and the array are adjacent -> the result replaces them in place
  expect_result(x.index({Slice(), 1, ids({0, 2})}), {2, 2}, {4, 6, 16, 18});
  // x[1, :, [0,2]]: separated by a slice -> broadcast axes first (shape (2, 3), not (3, 2))
  expect_result(x.index({1, Slice(), ids({0, 2})}), {2, 3}, {12, 16, 20, 14, 18, 22});
  // x[0, [1,2]][..., 3:0:-2]
  expect_result(x.index({0, ids({1, 2})}).index({Ellipsis, Slice(3, 0, -2)}), {2, 2}, {7, 5, 11, 9});
}

TEST(Indexing, BooleanMasks) {
  Tensor x = x24();
  Tensor mask = equal(mod(x, scalar_tensor(5)), scalar_tensor(0));
  expect_result(x.index({mask}), {5}, {0, 5, 10, 15, 20});  // x[x % 5 == 0]
  // x[:, [True, False, True]]
  expect_result(x.index({Slice(), tensor<bool>({true, false, true})}), {2, 2, 4},
                {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 20, 21, 22, 23});
  EXPECT_EQ(x.index({zeros({2, 3, 4}, Bool)}).shape(), (Shape{0}));
  EXPECT_EQ(x.index({Slice(), zeros({3}, Bool)}).shape(), (Shape{2, 0, 4}));
  // a 2-d mask over the last two axes: x[:, m] with m of shape (3, 4)
  Tensor m = arange(12).reshape({3, 4}) > 9;
  expect_result(x.index({Slice(), m}), {2, 2}, {10, 11, 22, 23});
}

TEST(Indexing, GradientOfAdvancedIndexAccumulatesRepeats) {
  Tensor w = arange(4).astype(Float32);
  w.requires_grad_();
  sum(w.index({ids({1, 1, 3, -1})})).backward();
  EXPECT_EQ(values(w.grad()), (std::vector<double>{0, 2, 0, 2}));
}

TEST(Indexing, IndexPutInPlace) {
  // y = zeros((3, 4)); y[[0, 2], 1:3] = [7, 8]
  Tensor y = zeros({3, 4});
  Tensor alias = y;
  y.index_put_({ids({0, 2}), Slice(1, 3)}, tensor<float>({7, 8}));
  EXPECT_EQ(values(y), (std::vector<double>{0, 7, 8, 0, 0, 0, 0, 0, 0, 7, 8, 0}));
  EXPECT_EQ(values(alias), values(y));  // in place: every handle sees it
  // y[mask] = -1 with a full mask
  Tensor z = zeros({3, 4});
  Tensor mask = tensor<bool>({true, false, false, true}).broadcast_to({3, 4});
  z.index_put_({mask}, -1.0);
  EXPECT_EQ(values(z), (std::vector<double>{-1, 0, 0, -1, -1, 0, 0, -1, -1, 0, 0, -1}));
  // into a view: writes reach the base
  Tensor base = zeros({4, 4});
  Tensor v = base.index({Slice(1, 3), Slice(None, None, -1)});
  v.index_put_({Ellipsis, 0}, 5.0);  // base[1:3, 3] = 5
  EXPECT_EQ(base.at({1, 3}), 5.0);
  EXPECT_EQ(base.at({2, 3}), 5.0);
  EXPECT_EQ(sum(base).item<float>(), 10.0f);
  // the value is converted to the target's dtype
  Tensor i = zeros({3}, Int32);
  i.index_put_({ids({1})}, 2.9);
  EXPECT_EQ(i.dtype(), Int32);
  EXPECT_EQ(values<int>(i), (std::vector<int>{0, 2, 0}));
}

TEST(Indexing, IndexPutDuplicatesAndAccumulate) {
  // assignment: the last duplicate wins (as NumPy does in practice)
  Tensor a = zeros({5});
  a.index_put_({ids({1, 1, 3})}, tensor<float>({1, 2, 3}));
  EXPECT_EQ(values(a), (std::vector<double>{0, 2, 0, 3, 0}));
  // accumulate: np.add.at(y, [1, 1, 3], [1, 2, 3])
  Tensor b = index_put(zeros({5}), {ids({1, 1, 3})}, tensor<float>({1, 2, 3}), true);
  EXPECT_EQ(values(b), (std::vector<double>{0, 3, 0, 3, 0}));
  // index_put returns a copy and leaves its input alone
  Tensor c = zeros({2});
  Tensor d = index_put(c, {ids({0})}, tensor<float>({9}));
  EXPECT_EQ(values(c), (std::vector<double>{0, 0}));
  EXPECT_EQ(values(d), (std::vector<double>{9, 0}));
}

TEST(Indexing, TakeValues) {
  Tensor a = arange(12).reshape({3, 4}) * 10;
  // np.take(a, [[2,0],[1,1]], axis=1)
  Tensor t = take(a, from_vector<int64_t>({2, 0, 1, 1}, {2, 2}), 1);
  expect_result(t, {3, 2, 2}, {20, 0, 10, 10, 60, 40, 50, 50, 100, 80, 90, 90});
  // np.take(a, [11, -1, 0]) on the flattened array
  expect_result(take(a, ids({11, -1, 0})), {3}, {110, 110, 0});
  expect_result(take(a, scalar_tensor(5)), {}, {50});
}

TEST(Indexing, TakeAlongAxisAndGather) {
  Tensor a = arange(12).reshape({3, 4}) * 10;
  Tensor i = from_vector<int64_t>({3, 0, 1, 1, 2, 3}, {3, 2});
  expect_result(take_along_axis(a, i, 1), {3, 2}, {30, 0, 50, 50, 100, 110});
  expect_result(take_along_axis(a, from_vector<int64_t>({2, 0, 1, 0}, {1, 4}), 0), {1, 4}, {80, 10, 60, 30});
  expect_result(gather(a, 1, i), {3, 2}, {30, 0, 50, 50, 100, 110});
  // gather cuts x to the index's extent on the other axes (torch.gather)
  expect_result(gather(a, 1, from_vector<int64_t>({1, 0}, {2, 1})), {2, 1}, {10, 40});
  expect_result(take_along_axis(a, from_vector<int64_t>({-1, -4, 0}, {3, 1}), 1), {3, 1}, {30, 40, 80});
}

TEST(Indexing, ScatterAddValues) {
  // z = zeros((3, 4)); np.add.at(z, (arange(3)[:, None], i), arange(1, 7).reshape(3, 2))
  Tensor i = from_vector<int64_t>({3, 0, 1, 1, 2, 3}, {3, 2});
  Tensor src = arange(1.0, 7.0, 1.0).reshape({3, 2});
  Tensor z = scatter_add(zeros({3, 4}), 1, i, src);
  EXPECT_EQ(values(z), (std::vector<double>{2, 0, 0, 1, 0, 7, 0, 0, 0, 0, 5, 6}));
  // the input is not modified
  Tensor base = ones({3, 4});
  Tensor r = scatter_add(base, 1, i, src);
  EXPECT_EQ(sum(base).item<float>(), 12.0f);
  EXPECT_EQ(sum(r).item<float>(), 12.0f + 21.0f);
  // along axis 0 with repeats
  Tensor c = scatter_add(zeros({2, 2}), 0, from_vector<int64_t>({1, 1, 1, 0}, {2, 2}), ones({2, 2}));
  EXPECT_EQ(values(c), (std::vector<double>{0, 1, 2, 1}));
}

TEST(Indexing, Nonzero) {
  Tensor m = from_vector<float>({0, 3, 0, 0, 5, 6}, {2, 3});
  std::vector<Tensor> nz = nonzero(m);
  ASSERT_EQ(nz.size(), 2u);
  EXPECT_EQ(nz[0].to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(nz[1].to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 2}));
}
