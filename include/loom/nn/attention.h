#pragma once
// Multi-head attention and the Transformer encoder layer, batch first: (N, L, E).
#include <optional>

#include "loom/core/api.h"
#include "loom/nn/activation.h"
#include "loom/nn/attributes.h"
#include "loom/nn/layer.h"
#include "loom/ops/rotary.h"

namespace loom::nn {

struct LOOM_API AttentionOptions {
  bool causal = false;  // position i attends to positions <= i
  bool bias = true;
  // Key / value heads: 0 (or n_heads) for ordinary multi-head attention; fewer for grouped-query
  // attention (n_heads a multiple of it: each key / value head serves n_heads / n_kv_heads query
  // heads), 1 for multi-query attention. The key and value projections are then (E, n_kv_heads *
  // E / n_heads).
  int64_t n_kv_heads = 0;
  // Dropout on the attention weights in training (torch.nn.MultiheadAttention's dropout), drawn
  // from the layer's own generator (seeded 0 when the layer is built), in [0, 1).
  double dropout = 0;
  // Rotary position embedding of the queries and keys after their projection, per head (Llama's;
  // loom::rotary_embedding, positions from 0): none when absent. The head size must be even.
  std::optional<RotaryOptions> rotary{};
};

// What a MultiHeadAttention layer is besides its inputs and state (nn/attributes.h).
struct LOOM_API AttentionAttributes {
  int64_t n_heads = 1;
  bool causal = false, bias = true;
  int64_t n_kv_heads = 0;  // as the layer was built: n_heads unless grouped (0 in files written before it: n_heads)
  double dropout = 0;      // on the attention weights, in training
  // the rotary embedding's options when `rotary` (files written before it have none)
  bool rotary = false;
  double rotary_base = 10000.0, rotary_linear_factor = 1.0, rotary_llama3_factor = 0.0, rotary_low_freq_factor = 1.0,
         rotary_high_freq_factor = 4.0;
  int64_t rotary_original_max_positions = 8192;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("n_heads", n_heads, Field::sizes(1));
    visit("causal", causal);
    visit("bias", bias);
    visit("n_kv_heads", n_kv_heads, Field::sizes(0).absent_ok());
    visit("dropout", dropout, Field::may_be_absent());
    visit("rotary", rotary, Field::may_be_absent());
    visit("rotary_base", rotary_base, Field::may_be_absent());
    visit("rotary_linear_factor", rotary_linear_factor, Field::may_be_absent());
    visit("rotary_llama3_factor", rotary_llama3_factor, Field::may_be_absent());
    visit("rotary_low_freq_factor", rotary_low_freq_factor, Field::may_be_absent());
    visit("rotary_high_freq_factor", rotary_high_freq_factor, Field::may_be_absent());
    visit("rotary_original_max_positions", rotary_original_max_positions, Field::sizes(1).absent_ok());
  }
  // the options of `rotary_embedding` the fields above hold (none when not `rotary`)
  std::optional<RotaryOptions> rotary_options() const {
    if (!rotary) return std::nullopt;
    return RotaryOptions{.base = rotary_base, .linear_factor = rotary_linear_factor, .llama3_factor = rotary_llama3_factor,
                         .low_freq_factor = rotary_low_freq_factor, .high_freq_factor = rotary_high_freq_factor,
                         .original_max_positions = rotary_original_max_positions};
  }
};

// Projects query, key and value with separate weights (PyTorch's in_proj split in three: (E, E),
// or (E, n_kv_heads * E / n_heads) for key and value with grouped-query attention), attends per
// head (scaled_dot_product_attention's fused kernel; grouped heads are not copied), and projects
// the concatenated heads (out_proj). `padding_mask`, when given, is a bool layer (N, S): true for
// real key positions, false for padding to ignore. Shape rule: query (N, L, E), key and value
// (N, S, E) -> (N, L, E) for any N, L and S (one batch, one S).
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
// norm_first). In training, `dropout` also drops attention weights, as torch's layer passes it to
// its MultiheadAttention. Shape rule: (N, L, E) -> (N, L, E) for any N and L; a padding mask is
// (N, L).
class LOOM_API TransformerEncoderLayer : public Layer {
 public:
  TransformerEncoderLayer(const Layer& input, int64_t n_heads, TransformerOptions options = {},
                          std::optional<Layer> padding_mask = std::nullopt, const std::string& name = "");
};

}  // namespace loom::nn
