// Views share storage with their base (NumPy semantics); copies do not.
#include <loom/autograd/autograd.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
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
using loom_test::iota;
using loom_test::values;

namespace {
std::vector<double> seq(std::initializer_list<double> v) { return std::vector<double>(v); }
}  // namespace

TEST(TensorViews, ContiguousStridesAreRowMajorInElements) {
  Tensor x = zeros({2, 3, 4});
  EXPECT_EQ(x.strides(), (Strides{12, 4, 1}));
  EXPECT_EQ(x.offset(), 0);
  EXPECT_TRUE(x.is_contiguous());
  EXPECT_EQ(x.numel(), 24);
  EXPECT_EQ(x.nbytes(), 24u * 4u);
  EXPECT_EQ(zeros({2, 3}, Float64).nbytes(), 48u);
}

TEST(TensorViews, ReshapeOfContiguousIsAView) {
  Tensor x = iota({2, 6});
  Tensor y = x.reshape({3, 4});
  EXPECT_TRUE(y.shares_storage_with(x));
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  EXPECT_EQ(y.strides(), (Strides{4, 1}));
  Tensor z = x.reshape({-1, 2});
  EXPECT_EQ(z.shape(), (Shape{6, 2}));
  EXPECT_TRUE(z.shares_storage_with(x));
  // writing through the reshaped view is visible in the base
  y.index_put_({2, 3}, 100.0);
  EXPECT_EQ(x.at({1, 5}), 100.0);
}

TEST(TensorViews, ReshapeCopiesOnlyWhenStridesForbidAView) {
  Tensor x = iota({3, 4});
  Tensor t = x.T();  // (4, 3), strides (1, 4)
  EXPECT_FALSE(t.is_contiguous());
  Tensor flat = t.reshape({12});
  EXPECT_FALSE(flat.shares_storage_with(x));
  EXPECT_EQ(values(flat), seq({0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  // adding size-1 axes to a transposed tensor needs no copy
  Tensor t3 = t.reshape({4, 1, 3});
  EXPECT_TRUE(t3.shares_storage_with(x));
  EXPECT_EQ(values(t3), values(t));
  // splitting an axis of a sliced tensor needs no copy either (NumPy returns a view)
  Tensor wide = iota({4, 6});
  Tensor cols = slice(wide, 1, 0, 3);  // (4, 3), strides (6, 1)
  Tensor split = cols.reshape({2, 2, 3});
  EXPECT_TRUE(split.shares_storage_with(wide));
  EXPECT_EQ(split.strides(), (Strides{12, 6, 1}));
  EXPECT_EQ(values(split), values(cols));
  // merging rows that are not adjacent in memory does
  Tensor merged = cols.reshape({12});
  EXPECT_FALSE(merged.shares_storage_with(wide));
  EXPECT_EQ(values(merged), values(cols));
  // while every other column of a row-major matrix is evenly spaced: a view (stride 2)
  Tensor even = slice(wide, 1, 0, std::nullopt, 2);  // (4, 3), strides (6, 2)
  Tensor even_flat = even.reshape({12});
  EXPECT_TRUE(even_flat.shares_storage_with(wide));
  EXPECT_EQ(even_flat.strides(), (Strides{2}));
  EXPECT_EQ(values(even_flat), values(even));
}

TEST(TensorViews, ViewRefusesToCopy) {
  Tensor x = iota({3, 4});
  EXPECT_TRUE(x.view({4, 3}).shares_storage_with(x));
  EXPECT_THROW(x.T().view({12}), ShapeError);
}

TEST(TensorViews, TransposeAndPermuteSwapStrides) {
  Tensor x = iota({2, 3, 4});
  Tensor t = x.transpose();
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Strides{1, 4, 12}));
  EXPECT_TRUE(t.shares_storage_with(x));
  Tensor p = x.permute({1, 0, 2});
  EXPECT_EQ(p.shape(), (Shape{3, 2, 4}));
  EXPECT_EQ(p.strides(), (Strides{4, 12, 1}));
  EXPECT_EQ(p.at({2, 1, 3}), x.at({1, 2, 3}));
  Tensor n = x.permute({-1, 0, 1});
  EXPECT_EQ(n.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(swapaxes(x, 0, 2).strides(), (Strides{1, 4, 12}));
  EXPECT_EQ(moveaxis(x, 0, -1).shape(), (Shape{3, 4, 2}));
  // writing through a transpose reaches the base
  t.index_put_({3, 2, 1}, -5.0);
  EXPECT_EQ(x.at({1, 2, 3}), -5.0);
}

TEST(TensorViews, SlicingFollowsPythonRules) {
  Tensor x = iota({10});
  auto sl = [&](std::optional<int64_t> a, std::optional<int64_t> b, int64_t step) {
    return values(slice(x, 0, a, b, step));
  };
  EXPECT_EQ(sl(2, 7, 2), seq({2, 4, 6}));
  EXPECT_EQ(sl(std::nullopt, std::nullopt, -1), seq({9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(sl(-2, 1, -3), seq({8, 5, 2}));
  EXPECT_EQ(sl(7, -100, -2), seq({7, 5, 3, 1}));
  EXPECT_EQ(sl(-100, 3, 1), seq({0, 1, 2}));
  EXPECT_EQ(sl(std::nullopt, std::nullopt, -20), seq({9}));
  EXPECT_TRUE(sl(3, -100, 1).empty());
  EXPECT_TRUE(sl(100, std::nullopt, 1).empty());
  EXPECT_TRUE(sl(5, 2, 1).empty());
  EXPECT_EQ(slice(x, 0, 5, 2).shape(), (Shape{0}));

  Tensor s = slice(x, 0, 1, 8, 3);
  EXPECT_TRUE(s.shares_storage_with(x));
  EXPECT_EQ(s.strides(), (Strides{3}));
  EXPECT_EQ(s.offset(), 1);
  Tensor r = slice(x, 0, std::nullopt, std::nullopt, -2);
  EXPECT_EQ(r.strides(), (Strides{-2}));
  EXPECT_EQ(r.offset(), 9);
  // the same through index() with Slice
  EXPECT_EQ(values(x.index({Slice(-2, 1, -3)})), seq({8, 5, 2}));
  EXPECT_EQ(values(x.index({Slice(None, None, -1)})), values(flip(x)));
  EXPECT_THROW(slice(x, 0, 0, 5, 0), ValueError);
}

TEST(TensorViews, WritingThroughASliceChangesTheBase) {
  Tensor x = zeros({3, 4});
  Tensor row = x[1];
  EXPECT_TRUE(row.shares_storage_with(x));
  row.fill_(7.0);
  Tensor col = x.index({Slice(), 2});
  col.fill_(-1.0);
  Tensor rev = slice(x, 1, std::nullopt, std::nullopt, -1);
  rev.index_put_({0, 0}, 9.0);  // x[0, 3]
  EXPECT_EQ(values(x), seq({0, 0, -1, 9, 7, 7, -1, 7, 0, 0, -1, 0}));
}

TEST(TensorViews, ExpandDimsAndSqueezeAreViews) {
  Tensor x = iota({2, 3});
  Tensor e = x.expand_dims(1);
  EXPECT_EQ(e.shape(), (Shape{2, 1, 3}));
  EXPECT_TRUE(e.shares_storage_with(x));
  EXPECT_EQ(x.expand_dims(-1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(x.expand_dims(0).shape(), (Shape{1, 2, 3}));
  Tensor y = iota({1, 3, 1, 2});
  EXPECT_EQ(y.squeeze().shape(), (Shape{3, 2}));
  EXPECT_EQ(y.squeeze({2}).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(y.squeeze({-2, 0}).shape(), (Shape{3, 2}));
  EXPECT_TRUE(y.squeeze().shares_storage_with(y));
  EXPECT_THROW(y.squeeze({1}), ShapeError);
  // squeezing a transposed tensor keeps the view
  Tensor t = iota({3, 1, 4}).transpose();
  Tensor ts = t.squeeze();
  EXPECT_TRUE(ts.shares_storage_with(t));
  EXPECT_EQ(values(ts), values(t.reshape({4, 3})));
}

TEST(TensorViews, BroadcastToUsesZeroStrides) {
  Tensor x = iota({3, 1});
  Tensor b = x.broadcast_to({2, 3, 4});
  EXPECT_EQ(b.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(b.strides(), (Strides{0, 1, 0}));
  EXPECT_TRUE(b.shares_storage_with(x));
  EXPECT_EQ(b.at({1, 2, 3}), 2.0);
  EXPECT_EQ(b.at({0, 1, 0}), 1.0);
  EXPECT_FALSE(b.is_contiguous());
  Tensor c = b.contiguous();
  EXPECT_FALSE(c.shares_storage_with(x));
  EXPECT_EQ(c.strides(), (Strides{12, 4, 1}));
  EXPECT_EQ(values(c), values(b));
  EXPECT_EQ(x.broadcast_to({3, 2}).strides(), (Strides{1, 0}));
  EXPECT_THROW(x.broadcast_to({2, 2}), ShapeError);  // 3 cannot become 2
  EXPECT_THROW(x.broadcast_to({3}), ShapeError);     // rank cannot shrink
}

TEST(TensorViews, FlipUsesNegativeStrides) {
  Tensor x = iota({2, 3});
  Tensor f = flip(x);
  EXPECT_EQ(f.strides(), (Strides{-3, -1}));
  EXPECT_EQ(f.offset(), 5);
  EXPECT_TRUE(f.shares_storage_with(x));
  EXPECT_EQ(values(f), seq({5, 4, 3, 2, 1, 0}));
  Tensor f1 = flip(x, {1});
  EXPECT_EQ(f1.strides(), (Strides{3, -1}));
  EXPECT_EQ(values(f1), seq({2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(values(f1.contiguous()), seq({2, 1, 0, 5, 4, 3}));
  // ops read negative strides correctly
  EXPECT_EQ(values(f + 0.0f), seq({5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(values(f1.sum({1})), seq({3, 12}));
  f1.index_put_({0, 0}, 42.0);  // x[0, 2]
  EXPECT_EQ(x.at({0, 2}), 42.0);
}

TEST(TensorViews, ContiguousAndCopy) {
  Tensor x = iota({2, 3});
  Tensor same = x.contiguous();
  EXPECT_EQ(same.impl(), x.impl());
  Tensor c = x.copy();
  EXPECT_FALSE(c.shares_storage_with(x));
  c.fill_(0.0);
  EXPECT_EQ(x.at({1, 2}), 5.0);
  Tensor t = x.T().contiguous();
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_FALSE(t.shares_storage_with(x));
  EXPECT_EQ(values(t), seq({0, 3, 1, 4, 2, 5}));
  // a copy of a view holds only the view's elements
  Tensor v = slice(iota({100}), 0, 10, 13);
  Tensor vc = v.copy();
  EXPECT_EQ(vc.offset(), 0);
  EXPECT_EQ(vc.storage()->nbytes(), 3u * 4u);
  EXPECT_EQ(values(vc), seq({10, 11, 12}));
}

TEST(TensorViews, ZeroDimensionalTensors) {
  Tensor s = scalar_tensor(3.5);
  EXPECT_EQ(s.ndim(), 0);
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.strides(), Strides{});
  EXPECT_EQ(s.numel(), 1);
  EXPECT_TRUE(s.is_contiguous());
  EXPECT_EQ(s.item<double>(), 3.5);
  EXPECT_EQ(s.at({}), 3.5);
  Tensor r = s.reshape({1, 1});
  EXPECT_EQ(r.shape(), (Shape{1, 1}));
  EXPECT_TRUE(r.shares_storage_with(s));
  EXPECT_EQ(r.reshape({}).ndim(), 0);
  EXPECT_EQ(s.expand_dims(0).shape(), (Shape{1}));
  EXPECT_EQ(s.broadcast_to({2, 2}).strides(), (Strides{0, 0}));
  EXPECT_EQ(s.transpose().ndim(), 0);
  Tensor one = iota({1});
  EXPECT_EQ(one[0].ndim(), 0);
  EXPECT_TRUE(one[0].shares_storage_with(one));
  EXPECT_EQ((s + s).item<float>(), 7.0f);
  EXPECT_EQ(sum(iota({4})).ndim(), 0);
}

TEST(TensorViews, EmptyTensors) {
  Tensor e = zeros({0, 3});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.nbytes(), 0u);
  EXPECT_EQ(e.strides(), (Strides{3, 1}));
  EXPECT_EQ(e.reshape({3, 0}).shape(), (Shape{3, 0}));
  EXPECT_EQ(e.reshape({-1, 3}).shape(), (Shape{0, 3}));
  EXPECT_EQ(e.T().shape(), (Shape{3, 0}));
  EXPECT_TRUE(values(e).empty());
  EXPECT_EQ(e.copy().shape(), (Shape{0, 3}));
  EXPECT_EQ((e + 1.0f).shape(), (Shape{0, 3}));
  EXPECT_EQ(sum(e, {0}).shape(), (Shape{3}));
  EXPECT_EQ(values(sum(e, {0})), seq({0, 0, 0}));
  EXPECT_EQ(e.index({Slice(), Slice(1, None)}).shape(), (Shape{0, 2}));
  EXPECT_EQ(slice(iota({4}), 0, 2, 2).numel(), 0);
  EXPECT_EQ(zeros({0}).broadcast_to({2, 0}).shape(), (Shape{2, 0}));
  EXPECT_EQ(concatenate({e, ones({2, 3})}).shape(), (Shape{2, 3}));
  EXPECT_THROW(e.reshape({-1, 0}), ShapeError);  // -1 is ambiguous next to 0
}

TEST(TensorViews, DetachSharesStorage) {
  Tensor x = iota({3});
  x.requires_grad_();
  Tensor d = x.detach();
  EXPECT_TRUE(d.shares_storage_with(x));
  EXPECT_FALSE(d.requires_grad());
}

// A view of an empty tensor at a non-zero offset has no buffer either (null plus an offset is
// undefined behaviour, which scripts/sanitize.sh's UBSan build reports), and ops on such views
// (a cumsum over a zero-length axis included) touch no memory.
TEST(TensorViews, ViewsOfAnEmptyTensorHaveNoBuffer) {
  const Tensor e = zeros({0, 4});
  const Tensor v = e.index({Slice(), Slice(2, 4)});
  EXPECT_EQ(v.shape(), (Shape{0, 2}));
  EXPECT_EQ(v.data_ptr(), nullptr);
  EXPECT_EQ((v + 1).shape(), (Shape{0, 2}));
  EXPECT_EQ(cumsum(v, 0).shape(), (Shape{0, 2}));
  EXPECT_EQ(cumsum(zeros({3, 0}), 0).shape(), (Shape{3, 0}));
  EXPECT_EQ(cumsum(zeros({0, 3}), 1).shape(), (Shape{0, 3}));
}

TEST(Unbind, PartsAreViewsAndTheirGradientsMeetInOneTensor) {
  const Tensor base = iota({3, 4, 2});
  const std::vector<Tensor> parts = unbind(base, 1);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[2].shape(), (Shape{3, 2}));
  EXPECT_TRUE(parts[2].shares_storage_with(base));
  EXPECT_TRUE(array_equal(parts[2], squeeze(slice(base, 1, 2, 3), {1})));
  EXPECT_TRUE(unbind(zeros({0, 3}), 0).empty());
  EXPECT_THROW(unbind(base, 3), IndexError);

  // gradients: as slices taken one by one, a part without a gradient included
  manual_seed(31);
  const int64_t T = 50;
  Tensor x = randn({4, T, 8}).requires_grad_();
  const Tensor c = randn({4, T, 8});
  const std::vector<Tensor> steps = unbind(x, 1);
  Tensor loss = sum(steps[0] * steps[0]);
  for (int64_t t = 2; t < T; ++t) loss = loss + sum(steps[t] * squeeze(slice(c, 1, t, t + 1), {1}));
  Tensor sliced = sum(square(squeeze(slice(x, 1, 0, 1), {1})));
  for (int64_t t = 2; t < T; ++t) sliced = sliced + sum(squeeze(slice(x, 1, t, t + 1), {1}) * squeeze(slice(c, 1, t, t + 1), {1}));
  const Tensor expected = grad(sliced, {x})[0];
  loss.backward();
  EXPECT_TRUE(array_equal(x.grad(), expected));

  // backward makes one tensor of x's shape, not one per part: with sum() (a broadcast
  // gradient) per part and add() passing gradients through, that is its only allocation
  x.zero_grad();
  const std::vector<Tensor> again = unbind(x, 1);  // the pass above freed the parts' nodes
  Tensor total = sum(again[0]);
  for (int64_t t = 1; t < T; ++t) total = total + sum(again[t]);
  const int64_t before = memory_stats().allocations;
  total.backward();
  EXPECT_LE(memory_stats().allocations - before, 2);  // the seed and the gradient (per slice: T = 50 more)
  EXPECT_TRUE(array_equal(x.grad(), ones_like(x)));
}

TEST(Unbind, RetainedGraphRunsTwiceAndAFailedPassLeavesNoStaleGradient) {
  Tensor x = iota({3, 2}).requires_grad_();
  const std::vector<Tensor> rows = unbind(x, 0);
  Tensor y = sum(rows[0]) + sum(rows[2] * 2.0);
  backward(y, Tensor(), /*retain_graph=*/true);
  backward(y, Tensor(), true);
  EXPECT_EQ(values(x.grad()), seq({2, 2, 0, 0, 4, 4}));
  // a pass that fails after some parts ran (a saved tensor modified), then one that succeeds
  x.zero_grad();
  Tensor w = iota({2});
  Tensor z = sum(rows[0] * w) + sum(rows[1] * 3.0);
  {
    NoGrad off;
    w += 1.0;
  }
  EXPECT_THROW(backward(z, Tensor(), true), AutogradError);
  Tensor ok = sum(rows[1] * 3.0);
  ok.backward();
  EXPECT_EQ(values(x.grad()), seq({0, 0, 3, 3, 0, 0}));
}
