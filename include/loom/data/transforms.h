#pragma once
// Data augmentation and preprocessing as tensor ops on a batch (leading axis = sample) or on
// one example. Random transforms draw from a Generator, so a seed fixes the result; the
// DataLoader gives each batch its own Generator derived from (seed, epoch, batch index), so
// augmentation is the same whatever the number of worker threads.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"
#include "loom/data/dataset.h"
#include "loom/ops/random.h"

namespace loom::data {

// --- tensor functions (batches: axis 0 is the sample axis)

// (x - mean[c]) / std[c] per channel along `channel_axis` (of x, negative counts from the end);
// one value broadcasts to every channel. Integer inputs give float32.
LOOM_API Tensor normalize(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& std,
                 int64_t channel_axis = 1);
// Per-sample crop of a batch whose last two axes are (height, width): x is zero-padded by
// `padding` on each side of both spatial axes, and sample i is cut at (top[i], left[i]) of the
// padded image, a window of (height, width). top/left: int64 of shape (N,).
LOOM_API Tensor crop(const Tensor& x, const Tensor& top, const Tensor& left, int64_t height, int64_t width, int64_t padding = 0);
// crop() at offsets drawn uniformly from the valid range: top from randint(0, H + 2p - height + 1)
// and then left from randint(0, W + 2p - width + 1), both of shape (N,), in that order.
LOOM_API Tensor random_crop(const Tensor& x, int64_t height, int64_t width, int64_t padding, Generator& gen);
// Mirrors sample i along its last axis where flip[i] is true (flip: bool of shape (N,)).
LOOM_API Tensor horizontal_flip(const Tensor& x, const Tensor& flip);
// horizontal_flip() with flip = bernoulli({N}, p) drawn from gen.
LOOM_API Tensor random_horizontal_flip(const Tensor& x, double p, Generator& gen);
// Bilinear resize of the last two axes (height, width) of x (any leading axes: an image (C, H, W)
// or a batch (N, C, H, W)) to `size`: {s} makes the shorter side s and the longer
// int(s * long / short), keeping the aspect ratio; {height, width} is exact (torchvision's
// Resize). antialias (the default, as PIL and torch's antialias=True) widens the filter when
// shrinking, so that every source pixel counts; without it, output pixels mix their two nearest
// source pixels (torch's bilinear, align_corners=False). The result is float32.
LOOM_API Tensor resize(const Tensor& x, const std::vector<int64_t>& size, bool antialias = true);
// The (height, width) window at the centre of the last two axes: top = round((H - height) / 2),
// left = round((W - width) / 2), halves rounded to even (torchvision's center_crop). A window
// larger than the image throws ValueError.
LOOM_API Tensor center_crop(const Tensor& x, int64_t height, int64_t width);
// RGB to gray along the channel axis (axis -3: (..., 3, H, W)), 0.2989 R + 0.587 G + 0.114 B
// (torchvision's rgb_to_grayscale); num_output_channels 3 repeats the gray channel. Integer
// inputs give float32.
LOOM_API Tensor rgb_to_grayscale(const Tensor& x, int64_t num_output_channels = 1);
// One gray channel (axis -3) repeated into three.
LOOM_API Tensor grayscale_to_rgb(const Tensor& x);
// One-hot encoding: labels of any shape -> shape + (num_classes,); throws ValueError when a
// label lies outside [0, num_classes).
LOOM_API Tensor one_hot(const Tensor& labels, int64_t num_classes, DType dtype = Float32);

// --- composable transforms on batches

// A transform maps a batch (a tensor per field) to a batch, drawing randomness from `gen`.
class LOOM_API Transform {
 public:
  using Fn = std::function<Batch(Batch, Generator&)>;
  Transform() = default;  // the identity
  Transform(Fn fn, std::string name = "lambda") : fn_(std::move(fn)), name_(std::move(name)) {}

  Batch operator()(Batch batch, Generator& gen) const { return fn_ ? fn_(std::move(batch), gen) : batch; }
  Batch operator()(Batch batch, uint64_t seed) const {
    Generator gen(seed);
    return (*this)(std::move(batch), gen);
  }
  // Applies the transform to one example: adds a leading axis of 1 to every field, applies,
  // and removes it again.
  Example apply_example(Example example, Generator& gen) const;
  bool is_identity() const { return !fn_; }
  const std::string& name() const { return name_; }

 private:
  Fn fn_;
  std::string name_ = "identity";
};

// The transforms applied in order (each draws from the same Generator, one after the other).
class LOOM_API Compose : public Transform {
 public:
  Compose(std::vector<Transform> transforms);
};

// Field selection: `field` is the index of the tensor in the batch ({image, label}: 0 and 1).
class LOOM_API Normalize : public Transform {
 public:
  Normalize(std::vector<double> mean, std::vector<double> std, size_t field = 0, int64_t channel_axis = 1);
};
class LOOM_API RandomCrop : public Transform {
 public:
  RandomCrop(int64_t height, int64_t width, int64_t padding = 0, size_t field = 0);
};
class LOOM_API RandomHorizontalFlip : public Transform {
 public:
  explicit RandomHorizontalFlip(double p = 0.5, size_t field = 0);
};
class LOOM_API Resize : public Transform {
 public:
  explicit Resize(std::vector<int64_t> size, bool antialias = true, size_t field = 0);
};
class LOOM_API CenterCrop : public Transform {
 public:
  CenterCrop(int64_t height, int64_t width, size_t field = 0);
};
class LOOM_API Grayscale : public Transform {
 public:
  explicit Grayscale(int64_t num_output_channels = 1, size_t field = 0);
};
class LOOM_API GrayscaleToRGB : public Transform {
 public:
  explicit GrayscaleToRGB(size_t field = 0);
};
class LOOM_API OneHot : public Transform {
 public:
  OneHot(int64_t num_classes, size_t field = 1, DType dtype = Float32);
};
// Converts a field's dtype, scaling by `scale` (ToFloat{1/255.0} turns uint8 pixels into [0, 1]).
class LOOM_API Cast : public Transform {
 public:
  Cast(DType dtype, double scale = 1.0, size_t field = 0);
};
// Any tensor function on one field.
class LOOM_API Lambda : public Transform {
 public:
  Lambda(std::function<Tensor(const Tensor&, Generator&)> fn, size_t field = 0, std::string name = "lambda");
};

}  // namespace loom::data
