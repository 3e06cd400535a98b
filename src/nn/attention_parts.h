#pragma once
// Private to src/nn: the parts of multi-head attention that its layer kinds share
// (nn/attention.cpp: MultiHeadAttention, TransformerEncoderLayer; nn/decoder_block.cpp: GptBlock,
// LlamaBlock): the projections' parameters, attention on tensors, and the shape checks.
#include <optional>
#include <string>

#include "loom/nn/init.h"
#include "loom/nn/layer.h"
#include "loom/nn/state.h"
#include "loom/ops/rotary.h"

namespace loom {
class Generator;
}

namespace loom::nn::detail {

// "q_weight", "k_weight", "v_weight", "out_weight" (in, out), initialized by `weights`, and, with
// `bias`, "q_bias" ... "out_bias" (zeros) in `s`; kv: the key and value projections' units (e, or
// fewer with grouped-query attention).
void add_attention_params(State& s, int64_t e, bool bias, DType dtype, int64_t kv, const Init& weights = Init::glorot_uniform());

// How one call attends besides its heads' count and causality: key / value heads (grouped-query
// attention when fewer than the heads) and dropout on the weights (p = 0: none).
struct AttendExtras {
  int64_t kv_heads = 0;  // 0: as many as the query heads
  double dropout = 0;
  Generator* gen = nullptr;
  std::optional<RotaryOptions> rotary;  // of the queries' and keys' heads
};

// Multi-head attention on tensors (N, L, E), (N, S, E) with the projections of `s`; `keep`
// (N, S) bool marks real key positions (may be undefined).
Tensor attend(const State& s, const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, bool causal, const Tensor& keep,
              const AttendExtras& x = {});

// An input layer of `kind` with shape (batch, length, e) and e split into `heads`.
void check_units(const Layer& l, int64_t e, int64_t heads, const char* kind);
// Key / value heads of a grouped-query attention: 0 means n_heads; otherwise in [1, n_heads]
// and dividing n_heads. Returns the resolved count.
int64_t check_kv_heads(int64_t kv, int64_t heads, const char* kind);
// One size two inputs must share (a batch, a key length): the known one, -1 when neither knows it.
int64_t same_size(int64_t a, int64_t b, const char* what, const LayerImpl& l, const Shape& sa, const Shape& sb);
// An attention input: (batch, length, e).
void check_sequence(const Shape& x, int64_t e, const LayerImpl& l);
// A padding mask (batch, key length) against the batch and key length; returns the batch.
int64_t check_mask(const Shape& mask, int64_t batch, int64_t length, const Shape& key, const LayerImpl& l);

}  // namespace loom::nn::detail
