#pragma once
// The Dropout layer (inverted dropout; its probability may be a Param).
#include <cstdint>
#include <string>

#include "loom/core/api.h"
#include "loom/nn/input.h"
#include "loom/nn/attributes.h"
#include "loom/nn/layer.h"

namespace loom::nn {

// What a Dropout layer is besides its input (nn/attributes.h). With a Param as the probability,
// `probability` is its value when the layer was made; the layer saves the current one.
struct LOOM_API DropoutAttributes {
  double probability = 0.5;
  uint64_t seed = 0;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("probability", probability);
    visit("seed", seed);
  }
};

class LOOM_API Dropout : public Layer {
 public:
  // Inverted dropout: in Train mode zeroes each element with `probability` and scales the rest
  // by 1 / (1 - probability); the identity in Eval mode. Seeded per layer.
  Dropout(const Layer& input, double probability, uint64_t seed = 0, const std::string& name = "");
  explicit Dropout(double probability, uint64_t seed = 0, const std::string& name = "");  // bound by its first call
  // With a Param, the probability can change while training.
  Dropout(const Layer& input, const Param& probability, uint64_t seed = 0, const std::string& name = "");
};

}  // namespace loom::nn
