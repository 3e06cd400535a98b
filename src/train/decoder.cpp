#include "loom/train/decoder.h"

#include <optional>
#include <string>
#include <variant>

#include "loom/core/error.h"
#include "loom/core/grad_mode.h"
#include "loom/nn/attention.h"
#include "loom/ops/attention.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/rotary.h"

namespace loom::train {

namespace {

// One decoder block: its layers as the zoo named them, run one by one (Layer::compute), but for
// the attention, which reads and writes the cache.
struct Block {
  nn::Layer attention_norm, attention, mlp_norm;
  std::vector<nn::Layer> mlp;  // applied in order
  int64_t heads = 0, kv_heads = 0, head_size = 0;
  std::optional<RotaryOptions> rotary;
  Tensor keys, values;  // (kv_heads, max_length, head_size)
};

}  // namespace

struct CachedDecoder::Impl {
  zoo::Network network;
  nn::Layer embedding, positions;  // positions: GPT-2's learned table (undefined for Llama)
  std::vector<Block> blocks;
  nn::Layer final_norm, head;
  int64_t max_length = 0, length = 0;

  // (1, n, E) -> (1, n, E): the block's self-attention of positions [length, length + n).
  Tensor attend(Block& b, const Tensor& x) const {
    const int64_t n = x.dim(1), end = length + n;
    const nn::State& s = b.attention.state();
    const auto project = [&](const char* w, const char* bias, int64_t heads) {
      Tensor y = matmul(x, s.param(w));
      if (s.has_param(bias)) y = y + s.param(bias);
      return permute(reshape(y, {n, heads, b.head_size}), {1, 0, 2});  // (heads, n, head_size)
    };
    Tensor q = project("q_weight", "q_bias", b.heads), k = project("k_weight", "k_bias", b.kv_heads),
           v = project("v_weight", "v_bias", b.kv_heads);
    if (b.rotary) {
      q = rotary_embedding(q, length, *b.rotary);
      k = rotary_embedding(k, length, *b.rotary);
    }
    slice(b.keys, 1, length, end).copy_(k);
    slice(b.values, 1, length, end).copy_(v);
    // new position i (absolute length + i) sees the cached positions up to its own: all of them
    // for one token; top-left causal for a prompt from position 0; else an explicit mask
    Tensor mask;
    bool causal = false;
    if (n > 1 && length == 0) {
      causal = true;
    } else if (n > 1) {
      mask = less_equal(expand_dims(arange(end, Int64), 0), expand_dims(arange(n, Int64) + length, 1));
    }
    const Tensor o = scaled_dot_product_attention(q, slice(b.keys, 1, 0, end), slice(b.values, 1, 0, end), mask, causal,
                                                  std::nullopt, 0.0, b.kv_heads != b.heads);
    Tensor y = matmul(reshape(permute(o, {1, 0, 2}), {1, n, b.heads * b.head_size}), s.param("out_weight"));
    return s.has_param("out_bias") ? y + s.param("out_bias") : y;
  }

  // The hidden states (1, n, E) after the final norm for `tokens` at positions [length, ...).
  Tensor run(const std::vector<int64_t>& tokens) {
    if (tokens.empty()) throw ValueError("CachedDecoder: no tokens to feed (feed at least one)");
    const auto n = static_cast<int64_t>(tokens.size());
    if (length + n > max_length)
      throw ValueError("CachedDecoder: " + std::to_string(length) + " positions held and " + std::to_string(n) +
                       " more fed exceed the cache's " + std::to_string(max_length) + " (reset() or truncate() first, or a larger max_length)");
    NoGrad no_grad;
    Tensor h = embedding.compute(from_vector<int64_t>(tokens, {1, n}));
    if (positions.defined()) h = h + slice(positions.state().param("weights"), 0, length, length + n);
    for (Block& b : blocks) {
      h = h + attend(b, b.attention_norm.compute(h));
      Tensor m = b.mlp_norm.compute(h);
      for (const nn::Layer& layer : b.mlp) m = layer.compute(m);
      h = h + m;
    }
    length += n;
    return final_norm.compute(h);
  }
};

namespace {

const nn::Layer& layer_of(const zoo::Network& net, const std::string& name) {
  try {
    return net.graph.layer(name);
  } catch (const Error&) {
    throw ValueError("CachedDecoder: the network '" + net.name + "' has no layer '" + name +
                     "' (a model of zoo::gpt or zoo::llama is needed, with the layers it names)");
  }
}

// The block whose layers are `prefix` followed by these names.
Block block_of(const zoo::Network& net, const std::string& prefix, const std::string& attention_norm, const std::string& attention,
               const std::string& mlp_norm, const std::vector<std::string>& mlp) {
  Block b;
  b.attention_norm = layer_of(net, prefix + attention_norm);
  b.attention = layer_of(net, prefix + attention);
  b.mlp_norm = layer_of(net, prefix + mlp_norm);
  for (const std::string& m : mlp) b.mlp.push_back(layer_of(net, prefix + m));
  const auto* a = nn::attributes_of<nn::AttentionAttributes>(b.attention);
  if (!a) throw ValueError("CachedDecoder: layer '" + prefix + attention + "' is not a MultiHeadAttention");
  b.heads = a->n_heads;
  b.kv_heads = a->n_kv_heads > 0 ? a->n_kv_heads : a->n_heads;
  b.head_size = b.attention.state().param("q_weight").shape()[1] / b.heads;
  b.rotary = a->rotary_options();
  return b;
}

}  // namespace

CachedDecoder::CachedDecoder(zoo::Network network, int64_t max_length) : impl_(std::make_shared<Impl>()) {
  Impl& d = *impl_;
  d.network = std::move(network);
  const zoo::Network& net = d.network;
  int64_t limit = 0;
  if (const auto* c = std::get_if<zoo::GptConfig>(&net.config)) {
    d.embedding = layer_of(net, "transformer.wte");
    d.positions = layer_of(net, "transformer.wpe");
    for (int64_t i = 0; i < c->n_layer; ++i)
      d.blocks.push_back(block_of(net, "transformer.h." + std::to_string(i), ".ln_1", ".attn", ".ln_2", {".mlp.c_fc", ".mlp.act", ".mlp.c_proj"}));
    d.final_norm = layer_of(net, "transformer.ln_f");
    limit = c->n_positions;
  } else if (const auto* c = std::get_if<zoo::LlamaConfig>(&net.config)) {
    d.embedding = layer_of(net, "model.embed_tokens");
    for (int64_t i = 0; i < c->num_hidden_layers; ++i)
      d.blocks.push_back(
          block_of(net, "model.layers." + std::to_string(i), ".input_layernorm", ".self_attn", ".post_attention_layernorm", {".mlp"}));
    d.final_norm = layer_of(net, "model.norm");
    limit = c->max_position_embeddings;
  } else {
    throw ValueError("CachedDecoder: the network '" + net.name + "' is not a language model of zoo::gpt or zoo::llama (it has no such config)");
  }
  d.head = layer_of(net, "lm_head");
  if (max_length < 0) throw ValueError("CachedDecoder: max_length " + std::to_string(max_length) + " (valid: >= 1, or 0 for the model's)");
  // GPT-2 cannot go past its position table; RoPE has no table, so Llama may
  d.max_length = max_length == 0 ? limit : max_length;
  if (d.positions.defined() && d.max_length > limit)
    throw ValueError("CachedDecoder: max_length " + std::to_string(d.max_length) + " exceeds the model's " + std::to_string(limit) +
                     " learned positions (n_positions)");
  const DType dtype = d.embedding.state().param("weights").dtype();
  for (Block& b : d.blocks) {
    b.keys = zeros({b.kv_heads, d.max_length, b.head_size}, dtype);
    b.values = zeros({b.kv_heads, d.max_length, b.head_size}, dtype);
  }
}

void CachedDecoder::reset() { impl_->length = 0; }

Tensor CachedDecoder::feed(const std::vector<int64_t>& tokens) {
  const Tensor h = impl_->run(tokens);
  NoGrad no_grad;
  return impl_->head.compute(slice(h, 1, h.dim(1) - 1, h.dim(1))).reshape({-1});
}

Tensor CachedDecoder::feed_all(const std::vector<int64_t>& tokens) {
  const Tensor h = impl_->run(tokens);
  NoGrad no_grad;
  return impl_->head.compute(h)[0];
}

void CachedDecoder::truncate(int64_t length) {
  if (length < 0 || length > impl_->length)
    throw ValueError("CachedDecoder::truncate: length " + std::to_string(length) + " (valid: 0 to the " +
                     std::to_string(impl_->length) + " positions held)");
  impl_->length = length;
}

int64_t CachedDecoder::length() const { return impl_->length; }
int64_t CachedDecoder::max_length() const { return impl_->max_length; }

int64_t CachedDecoder::cache_bytes() const {
  int64_t bytes = 0;
  for (const Block& b : impl_->blocks) bytes += static_cast<int64_t>(b.keys.nbytes() + b.values.nbytes());
  return bytes;
}

}  // namespace loom::train
