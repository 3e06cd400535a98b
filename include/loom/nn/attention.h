#pragma once
// Multi-head attention and the Transformer encoder layer, batch first: (N, L, E).
#include <optional>

#include "loom/nn/activation.h"
#include "loom/nn/layer.h"

namespace loom::nn {

struct AttentionOptions {
  bool causal = false;  // position i attends to positions <= i
  bool bias = true;
};

// Projects query, key and value with separate (E, E) weights (PyTorch's in_proj split in three),
// attends per head, and projects the concatenated heads (out_proj). `padding_mask`, when given,
// is a bool layer (N, S): true for real key positions, false for padding to ignore.
class MultiHeadAttention : public Layer {
 public:
  MultiHeadAttention(const Layer& query, const Layer& key, const Layer& value, int64_t n_heads, AttentionOptions options = {},
                     std::optional<Layer> padding_mask = std::nullopt, const std::string& name = "");
};

struct TransformerOptions {
  int64_t ff_units = 2048;
  double dropout = 0.1;
  ActivationFn activation = relu;
  bool norm_first = false;
  double eps = 1e-5;
  bool causal = false;
};

// torch.nn.TransformerEncoderLayer(batch_first=True): self-attention and a feed-forward block,
// each with dropout, a residual connection and layer normalization (after, or before with
// norm_first).
class TransformerEncoderLayer : public Layer {
 public:
  TransformerEncoderLayer(const Layer& input, int64_t n_heads, TransformerOptions options = {},
                          std::optional<Layer> padding_mask = std::nullopt, const std::string& name = "");
};

}  // namespace loom::nn
