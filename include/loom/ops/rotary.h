#pragma once
// Rotary position embedding (RoPE; Su et al. 2021), as GPT-NeoX, Llama and Hugging Face
// transformers apply it: each pair (x[i], x[i + D/2]) of a head's D features at position p turns
// by the angle p * inv_freq[i], inv_freq[i] = base^(-2i / D) ("rotate half" pairing).
#include <cstdint>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

// The frequencies and their scaling, as a Llama config.json names them: rope_theta (`base`),
// rope_scaling {"rope_type": "linear", "factor"} (`linear_factor`: positions divided by it) and
// {"rope_type": "llama3", "factor", "low_freq_factor", "high_freq_factor",
// "original_max_position_embeddings"} (`llama3_factor` > 0: long wavelengths slowed by the
// factor, short ones kept, those between blended).
struct LOOM_API RotaryOptions {
  double base = 10000.0;
  double linear_factor = 1.0;
  double llama3_factor = 0.0;  // 0: no Llama 3 scaling
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_max_positions = 8192;
};

// inv_freq (D/2,) float64 for head size D (even), with the options' scaling.
LOOM_API Tensor rotary_frequencies(int64_t head_size, const RotaryOptions& options = {});

// x (..., T, D) with D even: the features of T positions offset, offset + 1, ... rotated.
// The angles are computed in x's dtype as transformers does (float32 products for float32 x),
// so that logits match its models. Differentiable in x.
LOOM_API Tensor rotary_embedding(const Tensor& x, int64_t offset = 0, const RotaryOptions& options = {});

}  // namespace loom
