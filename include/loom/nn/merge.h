#pragma once
// Layers that combine two or more inputs: Merge, Add, Subtract, Multiply, Concat, Mean, the
// operators + - * on layers, Residual and Gate.
#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/nn/attributes.h"
#include "loom/nn/layer.h"

namespace loom::nn {

// How Merge combines its inputs (TensorGraph's merge modes).
enum class MergeMode : uint8_t { Sum, Subtract, Multiply, Mean, Concat };

// What a merge layer (Add, Subtract, Multiply, Mean, Concat) is besides its inputs
// (nn/attributes.h): the mode is the kind, so only Concat's axis is a saved field.
struct LOOM_API MergeAttributes {
  MergeMode mode = MergeMode::Sum;
  int64_t axis = -1;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("axis", axis, Field::range(-Field::kMaxSize, Field::kMaxSize));
  }
};

// What a Residual layer is besides its inputs and state, read by type (attributes_of): whether the
// input is projected to the block's units (its "projection" weights) before the sum. Not saved:
// the units of the inputs say it.
struct LOOM_API ResidualAttributes {
  bool projected = false;
};
// A Gate layer's attributes: none besides its inputs and state (its weights and bias), a struct
// that the kind is read by type with (attributes_of).
struct LOOM_API GateAttributes {};

// Combines several layers with a merge mode; Concat joins them along `axis`.
class LOOM_API Merge : public Layer {
 public:
  Merge(const std::vector<Layer>& inputs, MergeMode mode, int64_t axis = -1, const std::string& name = "");
};

// Merges of several layers of one shape (Mean/Add/... with broadcasting), as in TensorGraph.
class LOOM_API Add : public Layer {
 public:
  explicit Add(const std::vector<Layer>& inputs, const std::string& name = "");
  Add(const Layer& a, const Layer& b, const std::string& name = "") : Add(std::vector<Layer>{a, b}, name) {}
};
class LOOM_API Subtract : public Layer {
 public:
  Subtract(const Layer& a, const Layer& b, const std::string& name = "");
};
class LOOM_API Multiply : public Layer {
 public:
  explicit Multiply(const std::vector<Layer>& inputs, const std::string& name = "");
  Multiply(const Layer& a, const Layer& b, const std::string& name = "") : Multiply(std::vector<Layer>{a, b}, name) {}
};
class LOOM_API Concat : public Layer {
 public:
  explicit Concat(const std::vector<Layer>& inputs, int64_t axis = -1, const std::string& name = "");
};
class LOOM_API Mean : public Layer {
 public:
  explicit Mean(const std::vector<Layer>& inputs, const std::string& name = "");
};

// Arithmetic on layers makes merge / lambda layers.
LOOM_API Layer operator+(const Layer& a, const Layer& b);
LOOM_API Layer operator-(const Layer& a, const Layer& b);
LOOM_API Layer operator*(const Layer& a, const Layer& b);
LOOM_API Layer operator*(const Layer& a, double s);
LOOM_API Layer operator*(double s, const Layer& a);
LOOM_API Layer operator+(const Layer& a, double s);

// x + block; when their units differ, x goes through a learned linear projection first.
class LOOM_API Residual : public Layer {
 public:
  Residual(const Layer& input, const Layer& block, const std::string& name = "");
};

// input * sigmoid(Linear(gate_input)) with as many gate units as the input has.
class LOOM_API Gate : public Layer {
 public:
  Gate(const Layer& input, const Layer& gate_input, const std::string& name = "");
};

}  // namespace loom::nn
