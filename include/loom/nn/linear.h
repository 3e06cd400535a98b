#pragma once
// The Linear (dense, fully connected) layer and its options.
#include <optional>
#include <string>

#include "loom/core/api.h"
#include "loom/nn/attributes.h"
#include "loom/nn/init.h"
#include "loom/nn/layer.h"

namespace loom::nn {

struct LOOM_API LinearOptions {
  bool bias = true;
  Init weight_init = Init::glorot_uniform();
  Init bias_init = Init::zeros();
  // Use another layer's weights (tied embeddings); with transpose_weights the shared matrix is
  // read as (n_units, in) and transposed.
  std::optional<Tensor> shared_weights{};
  bool transpose_weights = false;
};

// What a Linear layer is besides its input and state (nn/attributes.h).
struct LOOM_API LinearAttributes {
  int64_t n_units = 0;
  bool bias = true, transpose_weights = false;
  Init weight_init = Init::glorot_uniform();
  Init bias_init = Init::zeros();
  template <class Visit>
  void fields(Visit&& visit) {
    visit("n_units", n_units, Field::sizes(1));
    visit("bias", bias);
    visit("transpose_weights", transpose_weights);
    visit("weight_init", weight_init);
    visit("bias_init", bias_init);
  }
};

class LOOM_API Linear : public Layer {
 public:
  Linear(const Layer& input, int64_t n_units, LinearOptions options = {}, const std::string& name = "");
  explicit Linear(int64_t n_units, LinearOptions options = {}, const std::string& name = "");  // bound by its first call
};

// Keras' name for Linear: the same layer kind ("Linear" in summaries and saved files), not a
// second one. nn::Dense(x, 3) is nn::Linear(x, 3).
using Dense = Linear;

}  // namespace loom::nn
