#pragma once
// Layers that rearrange their input: Reshape, Flatten, Transpose, Flip, AxisSlice.
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/nn/attributes.h"
#include "loom/nn/layer.h"

namespace loom::nn {

// The attributes of Reshape (the target shape without the batch axis, one -1 allowed),
// Transpose (a permutation of the axes after the batch axis, from 0) and Flip (axes after the
// batch axis, from 0) (nn/attributes.h).
struct LOOM_API ReshapeAttributes {
  std::vector<int64_t> shape;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("shape", shape, Field::range(-1, Field::kMaxSize));
  }
};
struct LOOM_API TransposeAttributes {
  std::vector<int64_t> perm;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("perm", perm, Field::range(-Field::kMaxSize, Field::kMaxSize));
  }
};
// AxisSlice: [start, stop) with `step` along `axis` after the batch axis (from 0); start and stop
// count from the end when negative and are clamped to the axis, as NumPy's x[:, start:stop:step].
struct LOOM_API AxisSliceAttributes {
  int64_t axis = 0, start = 0, stop = Field::kMaxSize, step = 1;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("axis", axis, Field::range(0, Field::kMaxSize));
    visit("start", start, Field::range(-Field::kMaxSize, Field::kMaxSize));
    visit("stop", stop, Field::range(-Field::kMaxSize, Field::kMaxSize));
    visit("step", step, Field::range(1, Field::kMaxSize));
  }
};
struct LOOM_API FlipAttributes {
  std::vector<int64_t> axes;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("axes", axes, Field::range(-Field::kMaxSize, Field::kMaxSize));
  }
};

// Reshapes each sample: `shape` excludes the batch axis (one -1 allowed).
class LOOM_API Reshape : public Layer {
 public:
  Reshape(const Layer& input, const Shape& shape, const std::string& name = "");
  explicit Reshape(const Shape& shape, const std::string& name = "");  // bound by its first call
};

// (batch, d1, d2, ...) -> (batch, d1*d2*...)
class LOOM_API Flatten : public Layer {
 public:
  explicit Flatten(const Layer& input, const std::string& name = "");
  Flatten();  // bound by its first call
};

// Permutes the axes after the batch axis (perm indexes them from 0).
class LOOM_API Transpose : public Layer {
 public:
  Transpose(const Layer& input, const Axes& perm, const std::string& name = "");
};

// Reverses the order along the given axes after the batch axis (indexed from 0, as Transpose's
// perm): Flip(images, {2}) mirrors (batch, channels, height, width) images left to right, for
// test-time augmentation (docs/layers.md). Differentiable; in every mode.
class LOOM_API Flip : public Layer {
 public:
  Flip(const Layer& input, const Axes& axes, const std::string& name = "");
};

// Takes a range of one axis after the batch axis (indexed from 0, as Transpose's perm):
// AxisSlice(x, 0, 0, c / 2) is the first half of (batch, c, height, width) images' channels, as
// x[:, :c // 2] (torch's x.chunk(2, dim=1)). `stop` defaults to the end; `step` >= 1 (Flip
// reverses). Differentiable (a view; its gradient fills the rest with zeros).
class LOOM_API AxisSlice : public Layer {
 public:
  AxisSlice(const Layer& input, int64_t axis, int64_t start, int64_t stop = Field::kMaxSize, int64_t step = 1, const std::string& name = "");
};

}  // namespace loom::nn
