#pragma once
// Gated feed-forward blocks of transformers: SwiGLU (Shazeer 2020), Llama's MLP.
#include <string>

#include "loom/core/api.h"
#include "loom/nn/attributes.h"
#include "loom/nn/init.h"
#include "loom/nn/layer.h"

namespace loom::nn {

// What a SwiGLU layer is besides its input and state (nn/attributes.h).
struct LOOM_API SwiGLUAttributes {
  int64_t hidden = 0;
  Init weight_init = Init::glorot_uniform();
  template <class Visit>
  void fields(Visit&& visit) {
    visit("hidden", hidden, Field::sizes(1));
    visit("weight_init", weight_init);
  }
};

// (..., d) -> (..., d): down(silu(x gate) * (x up)), with "gate" and "up" (d, hidden) and "down"
// (hidden, d), no biases: transformers' LlamaMLP (gate_proj, up_proj, down_proj; its weights are
// these transposed).
class LOOM_API SwiGLU : public Layer {
 public:
  SwiGLU(const Layer& input, int64_t hidden, Init weight_init = Init::glorot_uniform(), const std::string& name = "");
};

}  // namespace loom::nn
