#pragma once
// Layers that rearrange, combine or encode without learning much: Reshape, Flatten, Transpose,
// Flip, Residual, Gate, OneHot, Lookup (embeddings).
#include "loom/nn/layers.h"

namespace loom::nn {

// Reshapes each sample: `shape` excludes the batch axis (one -1 allowed).
class Reshape : public Layer {
 public:
  Reshape(const Layer& input, const Shape& shape, const std::string& name = "");
  explicit Reshape(const Shape& shape, const std::string& name = "");  // bound by its first call
};

// (batch, d1, d2, ...) -> (batch, d1*d2*...)
class Flatten : public Layer {
 public:
  explicit Flatten(const Layer& input, const std::string& name = "");
  Flatten();  // bound by its first call
};

// Permutes the axes after the batch axis (perm indexes them from 0).
class Transpose : public Layer {
 public:
  Transpose(const Layer& input, const Axes& perm, const std::string& name = "");
};

// Reverses the order along the given axes after the batch axis (indexed from 0, as Transpose's
// perm): Flip(images, {2}) mirrors (batch, channels, height, width) images left to right, for
// test-time augmentation (docs/layers.md). Differentiable; in every mode.
class Flip : public Layer {
 public:
  Flip(const Layer& input, const Axes& axes, const std::string& name = "");
};

// x + block; when their units differ, x goes through a learned linear projection first.
class Residual : public Layer {
 public:
  Residual(const Layer& input, const Layer& block, const std::string& name = "");
};

// input * sigmoid(Linear(gate_input)) with as many gate units as the input has.
class Gate : public Layer {
 public:
  Gate(const Layer& input, const Layer& gate_input, const std::string& name = "");
};

// Integer ids (any shape) -> one-hot float vectors with n_classes units.
class OneHot : public Layer {
 public:
  OneHot(const Layer& ids, int64_t n_classes, DType dtype = Float32, const std::string& name = "");
};

struct LookupOptions {
  int64_t padding_id = -1;  // this id maps to zeros and its row gets no gradient; -1 for none
  Init init = Init::normal(0, 0.05);
};

// Embedding lookup: integer ids of any shape -> (..., n_units) rows of a (vocab_size, n_units)
// table. Repeated ids accumulate gradient.
class Lookup : public Layer {
 public:
  Lookup(const Layer& ids, int64_t vocab_size, int64_t n_units, LookupOptions options = {}, const std::string& name = "");
};
using Embedding = Lookup;

}  // namespace loom::nn
