#include "loom/nn/attention.h"

#include <cstdio>

#include "loom/nn/init.h"
#include "loom/ops/attention.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/nn.h"
#include "loom/ops/normalization.h"
#include "loom/ops/random.h"
#include "loom/ops/rotary.h"
#include "nn/attention_parts.h"
#include "nn/kind_util.h"
#include "nn/register_kinds.h"

namespace loom::nn {

namespace detail {

// kv: the key and value projections' units (e, or fewer with grouped-query attention).
void add_attention_params(State& s, int64_t e, bool bias, DType dtype, int64_t kv, const Init& weights) {
  for (const char* w : {"q_weight", "k_weight", "v_weight", "out_weight"}) {
    const bool is_kv = w[0] == 'k' || w[0] == 'v';
    s.add_param(w, initialize(weights, {e, is_kv ? kv : e}, dtype).requires_grad_());
  }
  if (bias)
    for (const char* b : {"q_bias", "k_bias", "v_bias", "out_bias"}) {
      const bool is_kv = b[0] == 'k' || b[0] == 'v';
      s.add_param(b, initialize(Init::zeros(), {is_kv ? kv : e}, dtype).requires_grad_());
    }
}

Tensor project(const State& s, const Tensor& x, const char* w, const char* b) {
  Tensor y = matmul(x, s.param(w));
  return s.has_param(b) ? y + s.param(b) : y;
}

namespace {

// (N, L, E) -> (N, H, L, E / H)
Tensor split_heads(const Tensor& x, int64_t h) {
  const int64_t n = x.dim(0), l = x.dim(1), e = x.dim(2);
  return permute(reshape(x, {n, l, h, e / h}), {0, 2, 1, 3});
}

}  // namespace

Tensor attend(const State& s, const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, bool causal, const Tensor& keep,
              const AttendExtras& x) {
  const int64_t kv_heads = x.kv_heads > 0 ? x.kv_heads : heads;
  Tensor qh = split_heads(project(s, q, "q_weight", "q_bias"), heads);
  Tensor kh = split_heads(project(s, k, "k_weight", "k_bias"), kv_heads);
  Tensor vh = split_heads(project(s, v, "v_weight", "v_bias"), kv_heads);
  if (x.rotary) {
    qh = rotary_embedding(qh, 0, *x.rotary);
    kh = rotary_embedding(kh, 0, *x.rotary);
  }
  Tensor mask;
  if (keep.defined()) {
    mask = reshape(astype(keep, Bool), {keep.dim(0), 1, 1, keep.dim(1)});  // broadcast over heads and queries
    if (causal) {
      const int64_t L = q.dim(1), S = k.dim(1);
      Tensor lower = less_equal(expand_dims(arange(S, Int64), 0), expand_dims(arange(L, Int64), 1));
      mask = logical_and(mask, lower);
      causal = false;
    }
  }
  Tensor o = scaled_dot_product_attention(qh, kh, vh, mask, causal, std::nullopt, x.dropout, kv_heads != heads, x.gen);
  const int64_t n = q.dim(0), l = q.dim(1), e = q.dim(2);
  return project(s, reshape(permute(o, {0, 2, 1, 3}), {n, l, e}), "out_weight", "out_bias");
}

void check_units(const Layer& l, int64_t e, int64_t heads, const char* kind) {
  if (!l.defined()) throw ValueError(std::string(kind) + ": an input layer is undefined");
  if (l.shape().size() != 3)
    throw ShapeError(std::string(kind) + ": input '" + l.name() + "' has shape " + shape_str(l.shape()) + " (valid: (batch, length, units))");
  if (l.n_units() != e)
    throw ShapeError(std::string(kind) + ": input '" + l.name() + "' has " + std::to_string(l.n_units()) + " units, expected " + std::to_string(e));
  if (heads <= 0 || e % heads != 0)
    throw ValueError(std::string(kind) + ": " + std::to_string(e) + " units do not split into " + std::to_string(heads) + " heads");
}

// Key / value heads of a grouped-query attention: 0 means n_heads; otherwise in [1, n_heads]
// and dividing n_heads. Returns the resolved count.
int64_t check_kv_heads(int64_t kv, int64_t heads, const char* kind) {
  if (kv == 0) return heads;
  if (kv < 0 || kv > heads || heads % kv != 0)
    throw ValueError(std::string(kind) + ": n_kv_heads " + std::to_string(kv) + " must divide n_heads " + std::to_string(heads) +
                     " (valid: a divisor of n_heads, e.g. 1 for multi-query attention, or 0 / n_heads for none)");
  return kv;
}


// One size two inputs must share (a batch, a key length): the known one, -1 when neither knows it.
int64_t same_size(int64_t a, int64_t b, const char* what, const LayerImpl& l, const Shape& sa, const Shape& sb) {
  if (a >= 0 && b >= 0 && a != b)
    throw ShapeError(detail::who(l) + ": inputs of shapes " + shape_str(sa) + " and " + shape_str(sb) + " have different " + what);
  return a >= 0 ? a : b;
}

// An attention input: (batch, length, e).
void check_sequence(const Shape& x, int64_t e, const LayerImpl& l) {
  if (x.size() != 3) throw ShapeError(detail::who(l) + ": an input of shape " + shape_str(x) + " (valid: (batch, length, units))");
  if (x[2] >= 0 && x[2] != e)
    throw ShapeError(detail::who(l) + ": an input of shape " + shape_str(x) + " has " + std::to_string(x[2]) + " units; its weights take " +
                     std::to_string(e));
}

// A padding mask (batch, key length) against the batch and key length; returns the batch.
int64_t check_mask(const Shape& mask, int64_t batch, int64_t length, const Shape& key, const LayerImpl& l) {
  if (mask.size() != 2)
    throw ShapeError(detail::who(l) + ": a padding mask of shape " + shape_str(mask) + " (valid: (batch, key length))");
  same_size(mask[1], length, "key lengths", l, mask, key);
  return same_size(mask[0], batch, "batch sizes", l, mask, key);
}

}  // namespace detail

namespace {

using detail::add_attention_params;
using detail::attend;
using detail::AttendExtras;
using detail::check_kv_heads;
using detail::check_mask;
using detail::check_sequence;
using detail::check_units;
using detail::same_size;

struct MHAImpl final : KindBase<MHAImpl, AttentionAttributes> {
  bool has_mask = false;
  std::shared_ptr<Generator> gen = std::make_shared<Generator>(0);  // the weights' dropout
  const char* kind() const override { return "MultiHeadAttention"; }
  Tensor compute(const std::vector<Tensor>& in, Mode mode) override {
    const AttendExtras x{.kv_heads = attrs.n_kv_heads, .dropout = mode == Mode::Train ? attrs.dropout : 0.0, .gen = gen.get(),
                         .rotary = attrs.rotary_options()};
    return attend(*state, in[0], in[1], in[2], attrs.n_heads, attrs.causal, has_mask ? in[3] : Tensor(), x);
  }
  // query (N, L, E), key and value (N, S, E) [, mask (N, S)] -> (N, L, E)
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    const int64_t e = state->param("q_weight").shape()[0];
    const Shape &q = in.at(0), &k = in.at(1), &v = in.at(2);
    for (const Shape* x : {&q, &k, &v}) check_sequence(*x, e, *this);
    int64_t batch = same_size(same_size(q[0], k[0], "batch sizes", *this, q, k), v[0], "batch sizes", *this, k, v);
    const int64_t length = same_size(k[1], v[1], "key lengths", *this, k, v);
    if (has_mask) batch = check_mask(in.at(3), batch, length, k, *this);
    return {Shape{batch, q[1], e}};
  }
};

struct EncoderImpl final : KindBase<EncoderImpl, TransformerEncoderAttributes> {
  bool has_mask = false;
  std::shared_ptr<Generator> gen = std::make_shared<Generator>(0);
  const char* kind() const override { return "TransformerEncoderLayer"; }
  Tensor drop(const Tensor& x, Mode mode) const { return dropout(x, attrs.dropout, mode == Mode::Train, gen.get()); }
  Tensor norm(const Tensor& x, const char* which) const {
    const State& n = *child(which);
    return layer_norm(x, {x.shape().back()}, n.param("weight"), n.param("bias"), attrs.eps);
  }
  const State* child(const std::string& name) const {
    for (const auto& [k, c] : state->children())
      if (k == name) return c.get();
    throw ValueError("TransformerEncoderLayer: missing inner state '" + name + "'");
  }
  Tensor feed_forward(const Tensor& x, Mode mode) const {
    const State& f = *child("ff");
    Tensor h = attrs.activation(matmul(x, f.param("w1")) + f.param("b1"));
    return matmul(drop(h, mode), f.param("w2")) + f.param("b2");
  }
  Tensor compute(const std::vector<Tensor>& in, Mode mode) override {
    const Tensor keep = has_mask ? in[1] : Tensor();
    const State& att = *child("self_attention");
    const int64_t heads = attrs.n_heads;
    // the weights' dropout too, as torch's layer gives its MultiheadAttention
    const AttendExtras weights{.dropout = mode == Mode::Train ? attrs.dropout : 0.0, .gen = gen.get()};
    Tensor x = in[0];
    if (attrs.norm_first) {
      Tensor n1 = norm(x, "norm1");
      x = x + drop(attend(att, n1, n1, n1, heads, attrs.causal, keep, weights), mode);
      return x + drop(feed_forward(norm(x, "norm2"), mode), mode);
    }
    x = norm(x + drop(attend(att, x, x, x, heads, attrs.causal, keep, weights), mode), "norm1");
    return norm(x + drop(feed_forward(x, mode), mode), "norm2");
  }
  // (N, L, E) [, mask (N, L)] -> (N, L, E)
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    const int64_t e = child("self_attention")->param("q_weight").shape()[0];
    const Shape& x = in.at(0);
    check_sequence(x, e, *this);
    const int64_t batch = has_mask ? check_mask(in.at(1), x[0], x[1], x, *this) : x[0];
    return {Shape{batch, x[1], e}};
  }
};

}  // namespace

MultiHeadAttention::MultiHeadAttention(const Layer& q, const Layer& k, const Layer& v, int64_t heads, AttentionOptions o,
                                       std::optional<Layer> padding_mask, const std::string& name) {
  const char* kind = "MultiHeadAttention";
  if (!q.defined()) throw ValueError("MultiHeadAttention: the query layer is undefined");
  const int64_t e = q.n_units();
  for (const Layer* l : {&q, &k, &v}) check_units(*l, e, heads, kind);
  const int64_t kv_heads = check_kv_heads(o.n_kv_heads, heads, kind);
  if (!(o.dropout >= 0 && o.dropout < 1))
    throw ValueError(std::string(kind) + ": dropout must be in [0, 1), got " + std::to_string(o.dropout));
  if (o.rotary) {
    if ((e / heads) % 2) throw ValueError(std::string(kind) + ": a rotary embedding needs an even head size, not " + std::to_string(e / heads));
    rotary_frequencies(e / heads, *o.rotary);  // its options' check, naming what is out of range
  }
  auto impl = std::make_shared<MHAImpl>();
  impl->attrs = {.n_heads = heads, .causal = o.causal, .bias = o.bias, .n_kv_heads = kv_heads, .dropout = o.dropout};
  if (o.rotary) {
    impl->attrs.rotary = true;
    impl->attrs.rotary_base = o.rotary->base;
    impl->attrs.rotary_linear_factor = o.rotary->linear_factor;
    impl->attrs.rotary_llama3_factor = o.rotary->llama3_factor;
    impl->attrs.rotary_low_freq_factor = o.rotary->low_freq_factor;
    impl->attrs.rotary_high_freq_factor = o.rotary->high_freq_factor;
    impl->attrs.rotary_original_max_positions = o.rotary->original_max_positions;
  }
  impl->inputs = {q, k, v};
  if (padding_mask) {
    impl->has_mask = true;
    impl->inputs.push_back(*padding_mask);
  }
  impl->dtype = q.dtype();
  impl->name = unique_name("attention", name);
  add_attention_params(*impl->state, e, o.bias, q.dtype(), e / heads * kv_heads);
  impl->shape = detail::shape_by_rule(*impl, impl->inputs);
  static_cast<Layer&>(*this) = Layer(impl);
}

TransformerEncoderLayer::TransformerEncoderLayer(const Layer& input, int64_t heads, TransformerOptions o,
                                                 std::optional<Layer> padding_mask, const std::string& name) {
  const char* kind = "TransformerEncoderLayer";
  if (!input.defined()) throw ValueError("TransformerEncoderLayer: the input layer is undefined");
  const int64_t e = input.n_units();
  check_units(input, e, heads, kind);
  if (!(o.dropout >= 0 && o.dropout < 1)) throw ValueError("TransformerEncoderLayer: dropout must be in [0, 1)");
  auto impl = std::make_shared<EncoderImpl>();
  impl->attrs = {.n_heads = heads,
                 .ff_units = o.ff_units,
                 .dropout = o.dropout,
                 .activation = o.activation,
                 .norm_first = o.norm_first,
                 .eps = o.eps,
                 .causal = o.causal};
  impl->inputs = {input};
  if (padding_mask) {
    impl->has_mask = true;
    impl->inputs.push_back(*padding_mask);
  }
  impl->dtype = input.dtype();
  impl->name = unique_name("transformer_encoder", name);
  auto att = std::make_shared<State>();
  add_attention_params(*att, e, true, input.dtype(), e);
  auto ff = std::make_shared<State>();
  ff->add_param("w1", initialize(Init::glorot_uniform(), {e, o.ff_units}, input.dtype()).requires_grad_());
  ff->add_param("b1", initialize(Init::zeros(), {o.ff_units}, input.dtype()).requires_grad_());
  ff->add_param("w2", initialize(Init::glorot_uniform(), {o.ff_units, e}, input.dtype()).requires_grad_());
  ff->add_param("b2", initialize(Init::zeros(), {e}, input.dtype()).requires_grad_());
  impl->state->add_child("self_attention", att);
  impl->state->add_child("ff", ff);
  for (const char* n : {"norm1", "norm2"}) {
    auto s = std::make_shared<State>();
    s->add_param("weight", initialize(Init::ones(), {e}, input.dtype()).requires_grad_());
    s->add_param("bias", initialize(Init::zeros(), {e}, input.dtype()).requires_grad_());
    impl->state->add_child(n, s);
  }
  impl->shape = detail::shape_by_rule(*impl, impl->inputs);
  static_cast<Layer&>(*this) = Layer(impl);
}

void detail::register_attention_layers(AddKind add) {
  add("MultiHeadAttention", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(3, 4);  // query, key, value (and a padding mask)
    std::optional<Layer> mask;
    if (s.inputs.size() == 4) mask = s.inputs[3];
    const auto a = read_attributes<AttentionAttributes>(s.options);
    return MultiHeadAttention(s.inputs[0], s.inputs[1], s.inputs[2], a.n_heads,
                              {.causal = a.causal, .bias = a.bias, .n_kv_heads = a.n_kv_heads, .dropout = a.dropout, .rotary = a.rotary_options()},
                              mask, s.name);
  }, {write_attributes(AttentionAttributes{})});
  add("TransformerEncoderLayer", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(1, 2);  // the input (and a padding mask)
    const auto a = read_attributes<TransformerEncoderAttributes>(s.options);
    TransformerOptions o;
    o.ff_units = a.ff_units;
    o.dropout = a.dropout;
    o.activation = a.activation;
    o.norm_first = a.norm_first;
    o.eps = a.eps;
    o.causal = a.causal;
    std::optional<Layer> mask;
    if (s.inputs.size() == 2) mask = s.inputs[1];
    return TransformerEncoderLayer(s.inputs[0], a.n_heads, o, mask, s.name);
  }, {write_attributes(TransformerEncoderAttributes{})});
}

}  // namespace loom::nn
