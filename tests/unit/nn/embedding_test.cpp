// The encoding layers (nn/embedding.h): OneHot and Lookup, their shapes, values and Lookup's
// gradient, which skips the padding id.
#include <gtest/gtest.h>
#include <loom/core/dtype.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/nn/embedding.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/state.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/reduction.h>

#include <cstdint>

using namespace loom;

TEST(EncodingLayers, OneHotAndLookup) {
  nn::Input ids(Shape{-1, 3}, Int64, "ids");
  ids.set_value(from_vector<int64_t>({1, 0, 1, 2, 2, 0}, {2, 3}));
  nn::OneHot oh(ids, 3);
  EXPECT_EQ(oh.shape(), (Shape{-1, 3, 3}));
  Tensor o = oh();
  EXPECT_EQ(o.at({0, 0, 1}), 1.0);
  EXPECT_EQ(sum(o).item<double>(), 6.0);

  nn::Lookup emb(ids, 5, 4, {.padding_id = 0}, "emb");
  EXPECT_EQ(emb.shape(), (Shape{-1, 3, 4}));
  Tensor e = emb();
  EXPECT_EQ(sum(abs(e.index({0, 1}))).item<double>(), 0.0);  // id 0 is padding
  sum(e).backward();
  Tensor g = emb.state().param("weights").grad();
  // id 1 appears twice, id 2 twice, padding id 0 gets nothing
  EXPECT_EQ(g.at({1, 0}), 2.0);
  EXPECT_EQ(g.at({2, 3}), 2.0);
  EXPECT_EQ(g.at({0, 0}), 0.0);
  EXPECT_EQ(g.at({3, 0}), 0.0);
}
