// Transforms: correctness of each op and determinism given the seed.
#include <gtest/gtest.h>
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/index.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/data/dataset.h>
#include <loom/data/transforms.h>
#include <loom/ops/creation.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>

#include "unit/common/core_test_util.h"

using namespace loom;
using namespace loom::data;
using loom_test::contains_all;
using loom_test::error_message;

namespace {
// (N, C, H, W) = (n, 1, h, w) with values 1.. so that padding zeros are distinguishable.
Tensor images(int64_t n, int64_t h, int64_t w) {
  return arange(1, static_cast<double>(n * h * w + 1), 1, Float32).reshape({n, 1, h, w});
}
}  // namespace

TEST(DataTransforms, NormalizePerChannel) {
  Tensor x = ones({2, 3, 2, 2}, Float32);
  x.index_put_({Slice(), 1}, 3.0);
  x.index_put_({Slice(), 2}, 5.0);
  Tensor y = normalize(x, {1.0, 2.0, 3.0}, {1.0, 0.5, 2.0});
  EXPECT_FLOAT_EQ(y.at({1, 0, 1, 1}), 0.0f);
  EXPECT_FLOAT_EQ(y.at({1, 1, 1, 1}), 2.0f);
  EXPECT_FLOAT_EQ(y.at({0, 2, 0, 0}), 1.0f);
  // channels last
  Tensor hwc = x.permute({0, 2, 3, 1});
  Tensor z = normalize(hwc, {1.0, 2.0, 3.0}, {1.0, 0.5, 2.0}, -1);
  EXPECT_FLOAT_EQ(z.at({0, 1, 1, 1}), 2.0f);
  // uint8 images become float32
  EXPECT_EQ(normalize(zeros({2, 1, 2, 2}, UInt8), {0.5}, {0.5}).dtype(), Float32);
  EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { normalize(x, {1, 2}, {1, 1}); }), {"3 channels", "2 values"}));
}

TEST(DataTransforms, HorizontalFlipReallyFlipsTheChosenSamples) {
  Tensor x = images(3, 2, 3);
  Tensor y = horizontal_flip(x, tensor<bool>({true, false, true}));
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t c = 0; c < 3; ++c) {
        const int64_t src = (n == 1) ? c : 2 - c;
        EXPECT_EQ(y.at({n, 0, r, c}), x.at({n, 0, r, src})) << n << " " << r << " " << c;
      }
}

TEST(DataTransforms, RandomFlipIsDeterministicPerSeedAndPerSample) {
  Tensor x = images(64, 2, 5);
  Generator g1(9), g2(9), g3(10);
  Tensor a = random_horizontal_flip(x, 0.5, g1);
  Tensor b = random_horizontal_flip(x, 0.5, g2);
  Tensor c = random_horizontal_flip(x, 0.5, g3);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  EXPECT_NE(a.to_vector<float>(), c.to_vector<float>());
  // each sample is either untouched or fully mirrored; both happen
  Tensor mirrored = flip(x, {-1});
  int flipped = 0, kept = 0;
  for (int64_t n = 0; n < 64; ++n) {
    const auto s = a[n].to_vector<float>();
    if (s == x[n].to_vector<float>()) ++kept;
    else if (s == mirrored[n].to_vector<float>()) ++flipped;
    else ADD_FAILURE() << "sample " << n << " is neither kept nor flipped";
  }
  EXPECT_GT(flipped, 10);
  EXPECT_GT(kept, 10);
  Generator g(1);
  EXPECT_EQ(random_horizontal_flip(x, 0.0, g).to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(random_horizontal_flip(x, 1.0, g).to_vector<float>(), mirrored.to_vector<float>());
}

TEST(DataTransforms, CropWithPaddingHasZerosAtKnownOffsets) {
  Tensor x = images(2, 4, 4);  // values 1..32, no zeros
  // sample 0 at the top-left corner of the padded image: the first 2 rows and columns are padding
  // sample 1 at (4, 3): rows 0..3 of the window are image rows 2..5 (4, 5 padding), cols 1..4
  Tensor y = crop(x, tensor<int64_t>({0, 4}), tensor<int64_t>({0, 3}), 4, 4, 2);
  EXPECT_EQ(y.shape(), (Shape{2, 1, 4, 4}));
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 4; ++c) {
      const double want0 = (r < 2 || c < 2) ? 0.0 : x.at({0, 0, r - 2, c - 2});
      EXPECT_EQ(y.at({0, 0, r, c}), want0) << r << "," << c;
      const int64_t sr = r + 4 - 2, sc = c + 3 - 2;
      const double want1 = (sr >= 4 || sc >= 4) ? 0.0 : x.at({1, 0, sr, sc});
      EXPECT_EQ(y.at({1, 0, r, c}), want1) << r << "," << c;
    }
  // the centre offset with padding p reproduces the image
  Tensor centre = crop(x, tensor<int64_t>({2, 2}), tensor<int64_t>({2, 2}), 4, 4, 2);
  EXPECT_EQ(centre.to_vector<float>(), x.to_vector<float>());
  EXPECT_THROW(crop(x, tensor<int64_t>({5, 0}), tensor<int64_t>({0, 0}), 4, 4, 2), ValueError);
}

TEST(DataTransforms, RandomCropDrawsDocumentedOffsets) {
  Tensor x = images(16, 6, 6);
  Generator g(4);
  Tensor y = random_crop(x, 5, 5, 1, g);
  Generator replay(4);
  Tensor top = randint(0, 6 + 2 - 5 + 1, {16}, Int64, Device::cpu(), &replay);
  Tensor left = randint(0, 6 + 2 - 5 + 1, {16}, Int64, Device::cpu(), &replay);
  EXPECT_EQ(y.to_vector<float>(), crop(x, top, left, 5, 5, 1).to_vector<float>());
  EXPECT_NE(top.to_vector<int64_t>(), std::vector<int64_t>(16, top.to_vector<int64_t>()[0]));  // per-sample offsets
  Generator again(4);
  EXPECT_EQ(random_crop(x, 5, 5, 1, again).to_vector<float>(), y.to_vector<float>());
}

TEST(DataTransforms, OneHot) {
  Tensor y = one_hot(tensor<int64_t>({2, 0, 1}), 3);
  EXPECT_EQ(y.shape(), (Shape{3, 3}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 0, 1, 1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(one_hot(tensor<int32_t>({1}), 2, Int64).dtype(), Int64);
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { one_hot(tensor<int64_t>({3}), 3); }), {"[3, 3]", "0 to 2"}));
  EXPECT_THROW(one_hot(tensor<float>({1}), 3), DTypeError);
}

TEST(DataTransforms, ComposeAndExampleApplication) {
  Transform t = Compose({RandomCrop(3, 3, 1), RandomHorizontalFlip(0.5), Normalize({0.5}, {2.0}), OneHot(4, 1)});
  Batch b{images(8, 3, 3), tensor<int64_t>({0, 1, 2, 3, 0, 1, 2, 3})};
  Batch r1 = t(b, uint64_t{77});
  Batch r2 = t(b, uint64_t{77});
  Batch r3 = t(b, uint64_t{78});
  EXPECT_EQ(r1[0].to_vector<float>(), r2[0].to_vector<float>());
  EXPECT_NE(r1[0].to_vector<float>(), r3[0].to_vector<float>());
  EXPECT_EQ(r1[1].shape(), (Shape{8, 4}));
  Generator g(3);
  Example one = t.apply_example({images(1, 3, 3)[0], tensor<int64_t>({2})[0]}, g);
  EXPECT_EQ(one[0].shape(), (Shape{1, 3, 3}));
  EXPECT_EQ(one[1].shape(), (Shape{4}));
  EXPECT_TRUE(contains_all(error_message<IndexError>([&] { OneHot(3, 5)(b, uint64_t{0}); }), {"field 5", "2 fields"}));
  EXPECT_TRUE(Transform().is_identity());
}
