// The shape layers (nn/shape.h): Flatten, Transpose, Reshape, AxisSlice and Flip, their shapes,
// values, gradients and refusals.
#include <gtest/gtest.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/shape.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

using namespace loom;

TEST(ShapeLayers, FlattenTransposeReshape) {
  nn::Input img(Shape{-1, 2, 3}, Float32, "img");
  nn::Flatten flat(img);
  EXPECT_EQ(flat.shape(), (Shape{-1, 6}));
  nn::Transpose tr(img, {1, 0});
  EXPECT_EQ(tr.shape(), (Shape{-1, 3, 2}));
  EXPECT_THROW(nn::Reshape(img, {4}), ShapeError);
  Tensor v = arange(0, 12, 1).reshape({2, 2, 3});
  img.set_value(v);
  EXPECT_TRUE(array_equal(flat(), v.reshape({2, 6})));
  EXPECT_TRUE(array_equal(tr(), v.transpose({0, 2, 1})));

}

// AxisSlice takes a range of one axis after the batch axis, as NumPy's x[:, ..., start:stop:step]:
// values and shapes for plain, negative, clamped and stepped bounds, the gradient (zeros outside
// the range), and bad arguments named.
TEST(ShapeLayers, AxisSliceTakesARangeOfOneAxis) {
  nn::Input img(Shape{-1, 6, 3, 4}, Float32, "img");
  const Tensor v = arange(0, 144, 1).astype(Float32).reshape({2, 6, 3, 4});
  img.set_value(v);
  nn::AxisSlice first(img, 0, 0, 3, 1, "first");  // x.chunk(2, dim=1)[0]
  nn::AxisSlice second(img, 0, 3);                // to the end
  nn::AxisSlice tail(img, 2, -3, -1);             // x[..., -3:-1]
  nn::AxisSlice stepped(img, 0, 1, 100, 2);       // clamped stop, every other channel
  nn::AxisSlice empty(img, 1, 2, 1);              // stop before start: empty
  EXPECT_EQ(first.shape(), (Shape{-1, 3, 3, 4}));
  EXPECT_EQ(tail.shape(), (Shape{-1, 6, 3, 2}));
  EXPECT_EQ(stepped.shape(), (Shape{-1, 3, 3, 4}));
  EXPECT_EQ(empty.shape(), (Shape{-1, 6, 0, 4}));
  EXPECT_TRUE(array_equal(first(), slice(v, 1, 0, 3)));
  EXPECT_TRUE(array_equal(second(), slice(v, 1, 3, 6)));
  EXPECT_TRUE(array_equal(tail(), slice(v, 3, 1, 3)));
  EXPECT_TRUE(array_equal(stepped(), slice(v, 1, 1, 6, 2)));
  EXPECT_EQ(stepped().at({0, 1, 0, 0}), 36.0);  // channel 3 of sample 0
  EXPECT_EQ(empty().numel(), 0);
  EXPECT_THROW(nn::AxisSlice(img, 3, 0, 1), ValueError);   // only 3 axes after the batch axis
  EXPECT_THROW(nn::AxisSlice(img, -1, 0, 1), ValueError);
  EXPECT_THROW(nn::AxisSlice(img, 0, 0, 1, 0), ValueError);  // step 0
  EXPECT_THROW(nn::AxisSlice(img, 0, 0, 1, -1), ValueError);  // reversing is Flip's

  // gradient: d sum(w * x[:, 1:6:2]) / dx is w in the taken channels and 0 elsewhere
  Tensor x = uniform({2, 6, 3, 4}).requires_grad_(true);
  const Tensor w = uniform({2, 3, 3, 4});
  nn::Input xi(Shape{-1, 6, 3, 4}, Float32, "xi");
  sum(nn::AxisSlice(xi, 0, 1, 6, 2, "s")(x) * w).backward();
  Tensor want = zeros({2, 6, 3, 4});
  slice(want, 1, 1, 6, 2) = w;  // writes through the view
  EXPECT_TRUE(array_equal(x.grad(), want));
}

// Flip reverses the given axes after the batch axis: values as flip(), gradients through it, the
// shape kept, bad axes named. Through a Module (test-time augmentation) it is graph's test.
TEST(ShapeLayers, FlipMirrors) {
  nn::Input img(Shape{-1, 2, 3, 4}, Float32, "img");
  nn::Flip mirror(img, {2}, "mirror");
  nn::Flip both(img, {0, 2});
  EXPECT_EQ(mirror.shape(), img.shape());
  const Tensor v = arange(0, 48, 1).astype(Float32).reshape({2, 2, 3, 4});
  img.set_value(v);
  EXPECT_TRUE(array_equal(mirror(), flip(v, {3})));
  EXPECT_TRUE(array_equal(both(), flip(v, {1, 3})));
  EXPECT_EQ(mirror().at({0, 0, 0, 0}), 3.0);
  EXPECT_THROW(nn::Flip(img, {}), ValueError);
  EXPECT_THROW(nn::Flip(img, {3}), ValueError);     // only 3 axes after the batch axis
  EXPECT_THROW(nn::Flip(img, {1, 1}), ValueError);  // repeated
  EXPECT_THROW(nn::Flip(img, {-1}), ValueError);

  // gradient: flipping twice is the identity, so d sum(w * flip(x)) / dx = flip(w)
  Tensor x = uniform({2, 2, 3, 4}).requires_grad_(true);
  const Tensor w = uniform({2, 2, 3, 4});
  nn::Input xi(Shape{-1, 2, 3, 4}, Float32, "xi");
  sum(nn::Flip(xi, {2}, "f")(x) * w).backward();
  EXPECT_TRUE(array_equal(x.grad(), flip(w, {3})));

}
