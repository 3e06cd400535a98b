// DimVector, the small vector behind Shape and Strides: every operation checked against
// std::vector<int64_t> doing the same, across the inline / heap boundary (six values).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "loom/core/dim_vector.h"
#include "loom/core/shape.h"
#include "loom/core/tensor.h"
#include "loom/ops/creation.h"

using loom::DimVector;

namespace {

std::vector<int64_t> as_vector(const DimVector& d) { return std::vector<int64_t>(d.begin(), d.end()); }

}  // namespace

TEST(DimVector, ConstructsLikeStdVector) {
  EXPECT_TRUE(DimVector().empty());
  EXPECT_EQ(as_vector(DimVector(3)), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(as_vector(DimVector(9, 7)), std::vector<int64_t>(9, 7));
  EXPECT_EQ(as_vector(DimVector{4, 5}), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(as_vector(DimVector{1, 2, 3, 4, 5, 6, 7, 8}), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  const std::vector<int64_t> v{9, 8, 7, 6, 5, 4, 3};
  EXPECT_EQ(as_vector(DimVector(v)), v);
  EXPECT_EQ(as_vector(DimVector(v.begin() + 1, v.end() - 1)), (std::vector<int64_t>{8, 7, 6, 5, 4}));
  const std::vector<int64_t> back = DimVector{1, 2};  // implicit conversion to std::vector
  EXPECT_EQ(back, (std::vector<int64_t>{1, 2}));
}

TEST(DimVector, CopiesAndMovesAcrossTheInlineLimit) {
  for (size_t n : {0, 1, 6, 7, 20}) {
    DimVector a;
    for (size_t i = 0; i < n; ++i) a.push_back(static_cast<int64_t>(i * 3 + 1));
    const std::vector<int64_t> want = as_vector(a);
    DimVector copy(a);
    EXPECT_EQ(as_vector(copy), want);
    DimVector assigned{42};
    assigned = a;
    EXPECT_EQ(as_vector(assigned), want);
    DimVector moved(std::move(copy));
    EXPECT_EQ(as_vector(moved), want);
    EXPECT_TRUE(copy.empty());  // NOLINT: a moved-from DimVector is empty and usable
    copy.push_back(5);
    EXPECT_EQ(as_vector(copy), (std::vector<int64_t>{5}));
    DimVector move_assigned(12, 1);
    move_assigned = std::move(moved);
    EXPECT_EQ(as_vector(move_assigned), want);
    swap(move_assigned, copy);
    EXPECT_EQ(as_vector(copy), want);
    EXPECT_EQ(as_vector(move_assigned), (std::vector<int64_t>{5}));
  }
}

TEST(DimVector, RandomEditsMatchStdVector) {
  std::mt19937 rng(7);
  DimVector d;
  std::vector<int64_t> v;
  for (int step = 0; step < 5000; ++step) {
    const int64_t value = static_cast<int64_t>(rng() % 100) - 50;
    const size_t at = v.empty() ? 0 : rng() % (v.size() + 1);
    switch (rng() % 9) {
      case 0: d.push_back(value); v.push_back(value); break;
      case 1: if (!v.empty()) { d.pop_back(); v.pop_back(); } break;
      case 2: d.insert(d.begin() + at, value); v.insert(v.begin() + at, value); break;
      case 3: d.insert(d.begin() + at, 3, value); v.insert(v.begin() + at, 3, value); break;
      case 4: if (at < v.size()) { d.erase(d.begin() + at); v.erase(v.begin() + at); } break;
      case 5: {
        const size_t last = at + (v.size() > at ? rng() % (v.size() - at + 1) : 0);
        d.erase(d.begin() + at, d.begin() + last);
        v.erase(v.begin() + at, v.begin() + last);
        break;
      }
      case 6: { const size_t n = rng() % 12; d.resize(n, value); v.resize(n, value); break; }
      case 7: {  // a range of the vector itself, inserted into itself
        const std::vector<int64_t> copy = v;
        const size_t k = std::min<size_t>(copy.size(), 4);
        d.insert(d.begin() + at, d.begin(), d.begin() + static_cast<std::ptrdiff_t>(k));
        v.insert(v.begin() + at, copy.begin(), copy.begin() + static_cast<std::ptrdiff_t>(k));
        break;
      }
      case 8: if (v.size() > 24) { d.clear(); v.clear(); } break;
    }
    ASSERT_EQ(as_vector(d), v) << "step " << step;
    ASSERT_EQ(d.size(), v.size());
    if (!v.empty()) {
      ASSERT_EQ(d.front(), v.front());
      ASSERT_EQ(d.back(), v.back());
    }
  }
}

TEST(DimVector, AssignsFromItsOwnRange) {
  DimVector d{1, 2, 3, 4, 5, 6, 7, 8};
  d.assign(d.begin() + 2, d.end());
  EXPECT_EQ(as_vector(d), (std::vector<int64_t>{3, 4, 5, 6, 7, 8}));
  d.assign(d.begin() + 1, d.begin() + 3);
  EXPECT_EQ(as_vector(d), (std::vector<int64_t>{4, 5}));
  d.assign(4, 9);
  EXPECT_EQ(as_vector(d), (std::vector<int64_t>{9, 9, 9, 9}));
  d = {1};
  EXPECT_EQ(as_vector(d), (std::vector<int64_t>{1}));
}

TEST(DimVector, ComparesLexicographically) {
  EXPECT_EQ(DimVector({1, 2}), DimVector({1, 2}));
  EXPECT_NE(DimVector({1, 2}), DimVector({1, 2, 0}));
  EXPECT_LT(DimVector({1, 2}), DimVector({1, 2, 0}));
  EXPECT_LT(DimVector({1, 2, 9}), DimVector({1, 3}));
  EXPECT_GT(DimVector({2}), DimVector({1, 9, 9, 9, 9, 9, 9, 9}));
  EXPECT_EQ(DimVector({1, 2}), (std::vector<int64_t>{1, 2}));  // through the implicit conversion
  EXPECT_THROW(DimVector({1}).at(1), std::out_of_range);
}

TEST(DimVector, TensorsOfManyAxesKeepTheirGeometry) {
  // more axes than the inline capacity: shape and strides on the heap
  const loom::Shape shape{2, 1, 3, 1, 2, 1, 2, 1};
  loom::Tensor t = loom::arange(0, 24).reshape(shape);
  EXPECT_EQ(t.shape(), shape);
  EXPECT_EQ(t.strides(), (loom::Strides{12, 12, 4, 4, 2, 2, 1, 1}));
  loom::Tensor p = t.swapaxes(0, 6);
  EXPECT_EQ(p.shape(), (loom::Shape{2, 1, 3, 1, 2, 1, 2, 1}));
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_EQ(p.contiguous().sum().item<double>(), 276.0);
}

// The one "-1 matches any size" rule (include/loom/core/shape.h), used by Input values, compile's
// input shapes and a plan's inputs and step outputs.
TEST(ShapeMatches, MinusOneMatchesAnySizeAndNothingElseDoes) {
  EXPECT_TRUE(loom::shape_matches({-1, 3}, {5, 3}));
  EXPECT_TRUE(loom::shape_matches({-1, 3}, {-1, 3}));   // an open size fits an open pattern
  EXPECT_TRUE(loom::shape_matches({}, {}));
  EXPECT_TRUE(loom::shape_matches({2, 3}, {2, 3}));
  EXPECT_FALSE(loom::shape_matches({2, 3}, {-1, 3}));   // an open size does not fit a given one
  EXPECT_FALSE(loom::shape_matches({-1, 3}, {5, 4}));
  EXPECT_FALSE(loom::shape_matches({-1, 3}, {5, 3, 1}));  // rank
  EXPECT_FALSE(loom::shape_matches({-1}, {-2}));          // not a size
  EXPECT_FALSE(loom::shape_matches({0}, {-1}));
  EXPECT_TRUE(loom::shape_matches({0, -1}, {0, 0}));
}
