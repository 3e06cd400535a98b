#pragma once
// The causal decoder blocks of decoder-only language models as single layers, batch first
// (N, T, d) -> (N, T, d): GPT-2's (GptBlock) and Llama's (LlamaBlock). zoo::gpt and zoo::llama
// spell the same blocks out of their parts (LayerNorm / RMSNorm, MultiHeadAttention, Linear /
// SwiGLU, Add), so that each of their tensors carries transformers' name; these are the blocks
// to build one's own decoders from (docs/layers.md, "Decoder blocks").
#include <optional>
#include <string>

#include "loom/core/api.h"
#include "loom/nn/activation.h"
#include "loom/nn/attributes.h"
#include "loom/nn/init.h"
#include "loom/nn/layer.h"
#include "loom/ops/rotary.h"

namespace loom::nn {

struct LOOM_API GptBlockOptions {
  int64_t ff_units = 0;               // the MLP's hidden units (n_inner); 0: 4 d
  double eps = 1e-5;                  // the layer norms' (layer_norm_epsilon)
  ActivationFn activation = gelu_tanh;  // the MLP's (GPT-2's "gelu_new")
  Init weight_init = Init::normal(0, 0.02);  // of the projections (initializer_range); biases 0, norms 1 and 0
};

// What a GptBlock is besides its inputs and state (nn/attributes.h).
struct LOOM_API GptBlockAttributes {
  int64_t n_heads = 12, ff_units = 3072;  // (GPT-2 small's)
  double eps = 1e-5;
  ActivationFn activation = gelu_tanh;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("n_heads", n_heads, Field::sizes(1));
    visit("ff_units", ff_units, Field::sizes(1));
    visit("eps", eps);
    visit("activation", activation);
  }
};

// transformers' GPT2Block: h = x + attn(ln_1(x)), then h + mlp(ln_2(h)) with mlp(y) =
// c_proj(activation(c_fc(y))); causal self-attention over n_heads heads, biases everywhere, no
// dropout. State: children "ln_1" and "ln_2" (weight, bias), "attn" (MultiHeadAttention's
// q_weight ... out_bias, each (in, out)), "mlp" with children "c_fc" and "c_proj" (weight (in,
// out), bias): GPT-2's Conv1D layout, its c_attn the q, k and v weights side by side.
// `padding_mask`, when given, is a bool layer (N, T): true for real positions.
// Shape rule: (N, T, d) -> (N, T, d) for any N and T.
class LOOM_API GptBlock : public Layer {
 public:
  GptBlock(const Layer& input, int64_t n_heads, GptBlockOptions options = {}, std::optional<Layer> padding_mask = std::nullopt,
           const std::string& name = "");
};

struct LOOM_API LlamaBlockOptions {
  int64_t ff_units = 0;        // the SwiGLU's hidden units (intermediate_size), required
  int64_t n_kv_heads = 0;      // key / value heads (num_key_value_heads): 0 for n_heads; a divisor of n_heads
  double eps = 1e-6;           // the RMS norms' (rms_norm_eps)
  RotaryOptions rotary{};      // base (rope_theta) and scalings (rope_scaling: linear, llama3)
  bool attention_bias = false;  // biases on q, k, v and o (attention_bias)
  Init weight_init = Init::normal(0, 0.02);  // of the projections (initializer_range); norms 1
};

// What a LlamaBlock is besides its inputs and state (nn/attributes.h).
struct LOOM_API LlamaBlockAttributes {
  int64_t n_heads = 32, n_kv_heads = 8, ff_units = 14336;  // (Llama 3 8B's)
  double eps = 1e-6;
  bool attention_bias = false;
  double rotary_base = 10000.0, rotary_linear_factor = 1.0, rotary_llama3_factor = 0.0, rotary_low_freq_factor = 1.0,
         rotary_high_freq_factor = 4.0;
  int64_t rotary_original_max_positions = 8192;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("n_heads", n_heads, Field::sizes(1));
    visit("n_kv_heads", n_kv_heads, Field::sizes(1));
    visit("ff_units", ff_units, Field::sizes(1));
    visit("eps", eps);
    visit("attention_bias", attention_bias);
    visit("rotary_base", rotary_base);
    visit("rotary_linear_factor", rotary_linear_factor);
    visit("rotary_llama3_factor", rotary_llama3_factor);
    visit("rotary_low_freq_factor", rotary_low_freq_factor);
    visit("rotary_high_freq_factor", rotary_high_freq_factor);
    visit("rotary_original_max_positions", rotary_original_max_positions, Field::sizes(1));
  }
  RotaryOptions rotary() const {
    return {.base = rotary_base, .linear_factor = rotary_linear_factor, .llama3_factor = rotary_llama3_factor,
            .low_freq_factor = rotary_low_freq_factor, .high_freq_factor = rotary_high_freq_factor,
            .original_max_positions = rotary_original_max_positions};
  }
};

// transformers' LlamaDecoderLayer: h = x + self_attn(input_layernorm(x)), then h +
// mlp(post_attention_layernorm(h)); RMS norms, causal self-attention with the rotary embedding of
// queries and keys (positions from 0) and n_kv_heads key / value heads (grouped-query attention),
// a SwiGLU MLP, no biases (unless attention_bias). State: children "input_layernorm" and
// "post_attention_layernorm" (weight), "self_attn" (MultiHeadAttention's q_weight, k_weight,
// v_weight, out_weight (in, out), k and v (d, n_kv_heads d / n_heads)), "mlp" (SwiGLU's gate, up,
// down). `padding_mask` as GptBlock's. Shape rule: (N, T, d) -> (N, T, d).
class LOOM_API LlamaBlock : public Layer {
 public:
  LlamaBlock(const Layer& input, int64_t n_heads, LlamaBlockOptions options, std::optional<Layer> padding_mask = std::nullopt,
             const std::string& name = "");
};

}  // namespace loom::nn
