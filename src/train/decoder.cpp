#include "loom/train/decoder.h"

#include <optional>
#include <string>
#include <variant>

#include "loom/core/batch_invariance.h"
#include "loom/core/error.h"
#include "loom/core/grad_mode.h"
#include "loom/nn/attention.h"
#include "loom/ops/attention.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/indexing.h"
#include "loom/ops/linalg.h"
#include "loom/nn/linear.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/rotary.h"

namespace loom::train {

namespace {

// A linear map of the model, x (..., K) -> (..., N): the network's float weights (K, N), or their
// int8 copy.
struct Projection {
  Tensor weights, bias;
  std::optional<QuantizedMatrix> int8;

  Tensor operator()(const Tensor& x) const {
    if (int8) return matmul_int8(x, *int8, bias);  // the bias added in the product's pass
    const Tensor y = matmul(x, weights);
    return bias.defined() ? y + bias : y;
  }
  int64_t bytes() const {
    const int64_t b = bias.defined() ? static_cast<int64_t>(bias.nbytes()) : 0;
    return b + static_cast<int64_t>(int8 ? int8->values.nbytes() + int8->scales.nbytes() : weights.nbytes());
  }
};

enum class Mlp { Gpt, SwiGlu };  // c_proj(act(c_fc(x))), or down(silu(gate(x)) * up(x))

// One decoder block: its norms and activation run as the graph runs them (Layer::compute), its
// linear maps as Projections, and its attention against the cache.
struct Block {
  nn::Layer attention_norm, mlp_norm, activation;
  Projection q, k, v, out;
  Mlp mlp = Mlp::Gpt;
  Projection mlp_in, mlp_gate, mlp_out;  // c_fc / up, - / gate, c_proj / down
  int64_t heads = 0, kv_heads = 0, head_size = 0;
  std::optional<RotaryOptions> rotary;
  Tensor keys, values;  // (slots, kv_heads, max_length, head_size)
};

// The new tokens of one slot in a pass: rows [row, row + count) of the pass, positions
// [start, start + count) of the slot.
struct Span {
  int64_t slot = 0, row = 0, count = 0, start = 0;
};

}  // namespace

struct CachedDecoder::Impl {
  zoo::Network network;
  nn::Layer embedding, positions;  // positions: GPT-2's learned table (undefined for Llama)
  std::vector<Block> blocks;
  nn::Layer final_norm;
  Projection head;
  int64_t max_length = 0;
  std::vector<int64_t> lengths;  // per slot

  // The self-attention of one slot's new positions, (heads, n, head_size) queries against its
  // cache after the new keys and values (kv_heads, n, head_size) are written into it.
  static Tensor attend_span(Block& b, Tensor q, Tensor k, const Tensor& v, const Span& span) {
    const int64_t n = span.count, end = span.start + n;
    if (b.rotary) {
      q = rotary_embedding(q, span.start, *b.rotary);
      k = rotary_embedding(k, span.start, *b.rotary);
    }
    const Tensor keys = b.keys[span.slot], values = b.values[span.slot];
    slice(keys, 1, span.start, end).copy_(k);
    slice(values, 1, span.start, end).copy_(v);
    // new position i (absolute start + i) sees the cached positions up to its own: all of them
    // for one token; top-left causal for a prompt from position 0; else an explicit mask
    Tensor mask;
    const bool causal = n > 1 && span.start == 0;
    if (n > 1 && span.start > 0)
      mask = less_equal(expand_dims(arange(end, Int64), 0), expand_dims(arange(n, Int64) + span.start, 1));
    return scaled_dot_product_attention(q, slice(keys, 1, 0, end), slice(values, 1, 0, end), mask, causal, std::nullopt, 0.0,
                                        b.kv_heads != b.heads);
  }

  // (1, T, E) -> (1, T, E): the block's self-attention of every span's new positions.
  static Tensor attend(Block& b, const Tensor& x, const std::vector<Span>& spans) {
    const int64_t t = x.dim(1);
    const Tensor q = reshape(b.q(x), {t, b.heads, b.head_size}), k = reshape(b.k(x), {t, b.kv_heads, b.head_size}),
                 v = reshape(b.v(x), {t, b.kv_heads, b.head_size});
    std::vector<Tensor> outs;
    for (const Span& span : spans) {
      const auto rows = [&](const Tensor& z) { return permute(slice(z, 0, span.row, span.row + span.count), {1, 0, 2}); };
      const Tensor o = attend_span(b, rows(q), rows(k), rows(v), span);  // (heads, n, head_size)
      outs.push_back(reshape(permute(o, {1, 0, 2}), {span.count, b.heads * b.head_size}));
    }
    const Tensor o = outs.size() == 1 ? outs[0] : concatenate(outs, 0);
    return b.out(reshape(o, {1, t, b.heads * b.head_size}));
  }

  // The hidden states (T, E) after the final norm of every slot's new tokens, in slot order;
  // `spans` says whose rows are where. Checks everything before it changes anything.
  Tensor run(const std::vector<std::vector<int64_t>>& tokens, std::vector<Span>& spans) {
    const auto slots = static_cast<int64_t>(lengths.size());
    if (static_cast<int64_t>(tokens.size()) > slots)
      throw ValueError("CachedDecoder: tokens for " + std::to_string(tokens.size()) + " slots, but the decoder has " + std::to_string(slots));
    std::vector<int64_t> ids, positions_of;
    for (int64_t slot = 0; slot < static_cast<int64_t>(tokens.size()); ++slot) {
      const std::vector<int64_t>& new_tokens = tokens[static_cast<size_t>(slot)];
      if (new_tokens.empty()) continue;
      const auto n = static_cast<int64_t>(new_tokens.size()), start = lengths[static_cast<size_t>(slot)];
      if (start + n > max_length)
        throw ValueError("CachedDecoder: slot " + std::to_string(slot) + " holds " + std::to_string(start) + " positions, and " +
                         std::to_string(n) + " more exceed its " + std::to_string(max_length) +
                         " (reset() or truncate() first, or a larger max_length)");
      spans.push_back({slot, static_cast<int64_t>(ids.size()), n, start});
      ids.insert(ids.end(), new_tokens.begin(), new_tokens.end());
      for (int64_t i = 0; i < n; ++i) positions_of.push_back(start + i);
    }
    if (ids.empty()) throw ValueError("CachedDecoder: no tokens to feed (feed at least one)");
    const auto t = static_cast<int64_t>(ids.size());
    NoGrad no_grad;
    BatchInvariantScope invariant(shares_passes());
    Tensor h = embedding.compute(from_vector<int64_t>(ids, {1, t}));
    if (positions.defined()) h = h + take(positions.state().param("weights"), from_vector<int64_t>(positions_of, {t}), 0);
    for (Block& b : blocks) {
      h = h + attend(b, b.attention_norm.compute(h), spans);
      const Tensor m = b.mlp_norm.compute(h);
      h = h + (b.mlp == Mlp::Gpt ? b.mlp_out(b.activation.compute(b.mlp_in(m))) : b.mlp_out(silu(b.mlp_gate(m)) * b.mlp_in(m)));
    }
    for (const Span& span : spans) lengths[static_cast<size_t>(span.slot)] += span.count;
    return final_norm.compute(h)[0];
  }

  // With more than one slot, sequences share passes, and then the products run batch-invariantly
  // (docs/kernels.md): a row's bits do not depend on the rows beside it, so a sequence decodes
  // the same whoever shares its passes (the server's continuous batching). One slot keeps
  // oneDNN's faster prefill (a 512-token prompt of GPT-2 124M: 0.77 s against 0.97 s at two
  // threads of the AMD EPYC Zen 3); its steps' one-row products are gemm_rows' either way.
  bool shares_passes() const { return lengths.size() > 1; }

  // The logits of the hidden states' rows h (n, E).
  Tensor logits(const Tensor& h) const {
    NoGrad no_grad;
    BatchInvariantScope invariant(shares_passes());
    return head(h);
  }

  void check_slot(int64_t slot, const char* what) const {
    if (slot < 0 || slot >= static_cast<int64_t>(lengths.size()))
      throw IndexError(std::string("CachedDecoder::") + what + ": slot " + std::to_string(slot) + " (valid: 0 to " +
                       std::to_string(lengths.size() - 1) + ")");
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

// The int8 form of the (K, N) matrix `w`, the parameter `key` of the network: the network's own
// when it has int8 forms (an int8 checkpoint's, used as they are, never quantized again), else
// quantized here, per output (group 0) or per group of inputs.
QuantizedMatrix int8_form(const zoo::Network& net, const std::string& key, const Tensor& w, int64_t group) {
  if (net.int8.empty()) return quantize_int8(w, std::min(group, w.dim(0)));
  const auto it = net.int8.find(key);
  if (it == net.int8.end())
    throw ValueError("CachedDecoder: the network has int8 weights but none for '" + key + "' (an int8 checkpoint has every linear map's)");
  const QuantizedMatrix& q = it->second;
  if (q.in_features() != w.dim(0) || q.out_features() != w.dim(1))
    throw ValueError("CachedDecoder: the network's int8 '" + key + "' is " + std::to_string(q.in_features()) + " x " +
                     std::to_string(q.out_features()) + " but its weights are " + shape_str(w.shape()) + " (valid: the same sizes)");
  if (group != 0 && std::min(group, w.dim(0)) != q.group)
    throw ValueError("CachedDecoder: int8_group " + std::to_string(group) + ", but the network's int8 weights ('" + key + "') are per group of " +
                     std::to_string(q.group) + " inputs (valid: 0, or " + std::to_string(q.group) + ")");
  return q;
}

// A Projection of the layer's tensors `weights` and `bias` (bias optional), int8 when asked.
Projection projection(const zoo::Network& net, const nn::Layer& layer, const char* weights, const char* bias, const DecoderOptions& o) {
  const nn::State& s = layer.state();
  Projection p{s.param(weights), s.has_param(bias) ? s.param(bias) : Tensor(), std::nullopt};
  if (o.int8_weights) p.int8 = int8_form(net, layer.name() + "/" + weights, p.weights, o.int8_group);
  return p;
}

// A block of zoo::gpt (family Mlp::Gpt: ln_1, attn, ln_2, mlp.c_fc, mlp.act, mlp.c_proj) or of
// zoo::llama (input_layernorm, self_attn, post_attention_layernorm, mlp): the layers named
// `prefix` + those names.
Block block_of(const zoo::Network& net, const std::string& prefix, Mlp mlp, const DecoderOptions& o) {
  const bool gpt = mlp == Mlp::Gpt;
  Block b;
  b.mlp = mlp;
  b.attention_norm = layer_of(net, prefix + (gpt ? ".ln_1" : ".input_layernorm"));
  b.mlp_norm = layer_of(net, prefix + (gpt ? ".ln_2" : ".post_attention_layernorm"));
  const nn::Layer& attention = layer_of(net, prefix + (gpt ? ".attn" : ".self_attn"));
  const auto* a = nn::attributes_of<nn::AttentionAttributes>(attention);
  if (!a) throw ValueError("CachedDecoder: layer '" + attention.name() + "' is not a MultiHeadAttention");
  b.q = projection(net, attention, "q_weight", "q_bias", o);
  b.k = projection(net, attention, "k_weight", "k_bias", o);
  b.v = projection(net, attention, "v_weight", "v_bias", o);
  b.out = projection(net, attention, "out_weight", "out_bias", o);
  b.heads = a->n_heads;
  b.kv_heads = a->n_kv_heads > 0 ? a->n_kv_heads : a->n_heads;
  b.head_size = b.q.weights.shape()[1] / b.heads;
  b.rotary = a->rotary_options();
  if (gpt) {
    b.activation = layer_of(net, prefix + ".mlp.act");
    b.mlp_in = projection(net, layer_of(net, prefix + ".mlp.c_fc"), "weights", "bias", o);
    b.mlp_out = projection(net, layer_of(net, prefix + ".mlp.c_proj"), "weights", "bias", o);
  } else {
    const nn::Layer& m = layer_of(net, prefix + ".mlp");
    b.mlp_gate = projection(net, m, "gate", "", o);
    b.mlp_in = projection(net, m, "up", "", o);
    b.mlp_out = projection(net, m, "down", "", o);
  }
  return b;
}

}  // namespace

CachedDecoder::CachedDecoder(zoo::Network network, const DecoderOptions& asked) : impl_(std::make_shared<Impl>()) {
  Impl& d = *impl_;
  d.network = std::move(network);
  const zoo::Network& net = d.network;
  // a network with int8 forms (an int8 checkpoint) decodes with them: its float weights are only
  // their dequantized copies
  DecoderOptions options = asked;
  options.int8_weights = options.int8_weights || !net.int8.empty();
  if (options.int8_group < 0)
    throw ValueError("CachedDecoder: int8_group " + std::to_string(options.int8_group) + " (valid: 0 for one scale per output, or >= 1)");
  int64_t limit = 0;
  if (const auto* c = std::get_if<zoo::GptConfig>(&net.config)) {
    d.embedding = layer_of(net, "transformer.wte");
    d.positions = layer_of(net, "transformer.wpe");
    for (int64_t i = 0; i < c->n_layer; ++i) d.blocks.push_back(block_of(net, "transformer.h." + std::to_string(i), Mlp::Gpt, options));
    d.final_norm = layer_of(net, "transformer.ln_f");
    limit = c->n_positions;
  } else if (const auto* c = std::get_if<zoo::LlamaConfig>(&net.config)) {
    d.embedding = layer_of(net, "model.embed_tokens");
    for (int64_t i = 0; i < c->num_hidden_layers; ++i)
      d.blocks.push_back(block_of(net, "model.layers." + std::to_string(i), Mlp::SwiGlu, options));
    d.final_norm = layer_of(net, "model.norm");
    limit = c->max_position_embeddings;
  } else {
    throw ValueError("CachedDecoder: the network '" + net.name + "' is not a language model of zoo::gpt or zoo::llama (it has no such config)");
  }
  // the head: a Linear (in, out), or the token table (vocab, in) read transposed when tied
  const nn::Layer& head = layer_of(net, "lm_head");
  const auto* h = nn::attributes_of<nn::LinearAttributes>(head);
  if (!h) throw ValueError("CachedDecoder: layer 'lm_head' is not a Linear");
  d.head = projection(net, head, "weights", "bias", {});
  if (h->transpose_weights) d.head.weights = d.head.weights.transpose();
  if (options.int8_weights) d.head.int8 = int8_form(net, "lm_head/weights", d.head.weights, options.int8_group);
  const int64_t max_length = options.max_length, slots = options.slots;
  if (max_length < 0) throw ValueError("CachedDecoder: max_length " + std::to_string(max_length) + " (valid: >= 1, or 0 for the model's)");
  if (slots < 1) throw ValueError("CachedDecoder: slots " + std::to_string(slots) + " (valid: >= 1)");
  // GPT-2 cannot go past its position table; RoPE has no table, so Llama may
  d.max_length = max_length == 0 ? limit : max_length;
  if (d.positions.defined() && d.max_length > limit)
    throw ValueError("CachedDecoder: max_length " + std::to_string(d.max_length) + " exceeds the model's " + std::to_string(limit) +
                     " learned positions (n_positions)");
  const DType dtype = d.embedding.state().param("weights").dtype();
  for (Block& b : d.blocks) {
    b.keys = zeros({slots, b.kv_heads, d.max_length, b.head_size}, dtype);
    b.values = zeros({slots, b.kv_heads, d.max_length, b.head_size}, dtype);
  }
  d.lengths.assign(static_cast<size_t>(slots), 0);
}

Tensor CachedDecoder::feed(const std::vector<int64_t>& tokens) {
  std::vector<Span> spans;
  const Tensor h = impl_->run({tokens}, spans);
  return impl_->logits(slice(h, 0, h.dim(0) - 1, h.dim(0)))[0];
}

Tensor CachedDecoder::feed_all(const std::vector<int64_t>& tokens) {
  std::vector<Span> spans;
  const Tensor h = impl_->run({tokens}, spans);
  return impl_->logits(h);
}

Tensor CachedDecoder::feed_slots(const std::vector<std::vector<int64_t>>& tokens) {
  std::vector<Span> spans;
  const Tensor h = impl_->run(tokens, spans);
  std::vector<int64_t> last;
  for (const Span& span : spans) last.push_back(span.row + span.count - 1);
  return impl_->logits(take(h, from_vector<int64_t>(last, {static_cast<int64_t>(last.size())}), 0));
}

void CachedDecoder::reset(int64_t slot) {
  impl_->check_slot(slot, "reset");
  impl_->lengths[static_cast<size_t>(slot)] = 0;
}

void CachedDecoder::truncate(int64_t length, int64_t slot) {
  impl_->check_slot(slot, "truncate");
  const int64_t held = impl_->lengths[static_cast<size_t>(slot)];
  if (length < 0 || length > held)
    throw ValueError("CachedDecoder::truncate: length " + std::to_string(length) + " (valid: 0 to the " + std::to_string(held) +
                     " positions slot " + std::to_string(slot) + " holds)");
  impl_->lengths[static_cast<size_t>(slot)] = length;
}

int64_t CachedDecoder::length(int64_t slot) const {
  impl_->check_slot(slot, "length");
  return impl_->lengths[static_cast<size_t>(slot)];
}
int64_t CachedDecoder::slots() const { return static_cast<int64_t>(impl_->lengths.size()); }
int64_t CachedDecoder::max_length() const { return impl_->max_length; }

int64_t CachedDecoder::weight_bytes() const {
  const auto norm = [](const nn::Layer& l) {
    int64_t n = 0;
    for (const Tensor& t : l.parameters()) n += static_cast<int64_t>(t.nbytes());
    return n;
  };
  int64_t bytes = impl_->head.bytes() + norm(impl_->final_norm);
  for (const Block& b : impl_->blocks)
    bytes += b.q.bytes() + b.k.bytes() + b.v.bytes() + b.out.bytes() + b.mlp_in.bytes() + b.mlp_out.bytes() +
             (b.mlp == Mlp::SwiGlu ? b.mlp_gate.bytes() : 0) + norm(b.attention_norm) + norm(b.mlp_norm);
  return bytes;
}

int64_t CachedDecoder::cache_bytes() const {
  int64_t bytes = 0;
  for (const Block& b : impl_->blocks) bytes += static_cast<int64_t>(b.keys.nbytes() + b.values.nbytes());
  return bytes;
}

}  // namespace loom::train
