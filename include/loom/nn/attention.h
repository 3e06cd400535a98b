#pragma once
// Multi-head attention and the Transformer encoder layer, batch first: (N, L, E).
#include <optional>

#include "loom/core/api.h"
#include "loom/nn/activation.h"
#include "loom/nn/attributes.h"
#include "loom/nn/layer.h"

namespace loom::nn {

struct LOOM_API AttentionOptions {
  bool causal = false;  // position i attends to positions <= i
  bool bias = true;
};

// What a MultiHeadAttention layer is besides its inputs and state (nn/attributes.h).
struct LOOM_API AttentionAttributes {
  int64_t n_heads = 1;
  bool causal = false, bias = true;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("n_heads", n_heads, Field::sizes(1));
    visit("causal", causal);
    visit("bias", bias);
  }
};

// Projects query, key and value with separate (E, E) weights (PyTorch's in_proj split in three),
// attends per head, and projects the concatenated heads (out_proj). `padding_mask`, when given,
// is a bool layer (N, S): true for real key positions, false for padding to ignore. Shape rule:
// query (N, L, E), key and value (N, S, E) -> (N, L, E) for any N, L and S (one batch, one S).
class LOOM_API MultiHeadAttention : public Layer {
 public:
  MultiHeadAttention(const Layer& query, const Layer& key, const Layer& value, int64_t n_heads, AttentionOptions options = {},
                     std::optional<Layer> padding_mask = std::nullopt, const std::string& name = "");
};

struct LOOM_API TransformerOptions {
  int64_t ff_units = 2048;
  double dropout = 0.1;
  ActivationFn activation = relu;
  bool norm_first = false;
  double eps = 1e-5;
  bool causal = false;
};

// What a TransformerEncoderLayer is besides its inputs and state.
struct LOOM_API TransformerEncoderAttributes {
  int64_t n_heads = 1, ff_units = 2048;
  double dropout = 0.1;
  ActivationFn activation = relu;
  bool norm_first = false;
  double eps = 1e-5;
  bool causal = false;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("n_heads", n_heads, Field::sizes(1));
    visit("ff_units", ff_units, Field::sizes(1));
    visit("dropout", dropout);
    visit("activation", activation);
    visit("norm_first", norm_first);
    visit("eps", eps);
    visit("causal", causal);
  }
};

// torch.nn.TransformerEncoderLayer(batch_first=True): self-attention and a feed-forward block,
// each with dropout, a residual connection and layer normalization (after, or before with
// norm_first). Shape rule: (N, L, E) -> (N, L, E) for any N and L; a padding mask is (N, L).
class LOOM_API TransformerEncoderLayer : public Layer {
 public:
  TransformerEncoderLayer(const Layer& input, int64_t n_heads, TransformerOptions options = {},
                          std::optional<Layer> padding_mask = std::nullopt, const std::string& name = "");
};

}  // namespace loom::nn
