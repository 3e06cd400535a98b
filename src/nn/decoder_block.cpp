#include "loom/nn/decoder_block.h"

#include "loom/nn/init.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/nn.h"
#include "loom/ops/normalization.h"
#include "nn/attention_parts.h"
#include "nn/kind_util.h"
#include "nn/register_kinds.h"

namespace loom::nn {

namespace {

using detail::check_mask;
using detail::check_sequence;

const State& child_of(const State& s, const std::string& name, const LayerImpl& l) {
  for (const auto& [k, c] : s.children())
    if (k == name) return *c;
  throw ValueError(detail::who(l) + ": missing inner state '" + name + "'");
}

std::shared_ptr<State> norm_state(int64_t d, DType dtype, bool bias) {
  auto s = std::make_shared<State>();
  s->add_param("weight", initialize(Init::ones(), {d}, dtype).requires_grad_());
  if (bias) s->add_param("bias", initialize(Init::zeros(), {d}, dtype).requires_grad_());
  return s;
}

std::shared_ptr<State> linear_state(int64_t in, int64_t out, const Init& w, DType dtype) {
  auto s = std::make_shared<State>();
  s->add_param("weight", initialize(w, {in, out}, dtype).requires_grad_());
  s->add_param("bias", initialize(Init::zeros(), {out}, dtype).requires_grad_());
  return s;
}

// The attention's parameters as MultiHeadAttention keeps them, initialized by `w` (biases 0).
std::shared_ptr<State> attention_state(int64_t d, int64_t kv, bool bias, const Init& w, DType dtype) {
  auto s = std::make_shared<State>();
  detail::add_attention_params(*s, d, bias, dtype, kv, w);
  return s;
}

// (N, T, d) [, mask (N, T)] -> (N, T, d), d the attention's
std::vector<Shape> block_shapes(const LayerImpl& l, const State& att, bool has_mask, const std::vector<Shape>& in) {
  const int64_t d = att.param("q_weight").shape()[0];
  const Shape& x = in.at(0);
  check_sequence(x, d, l);
  const int64_t batch = has_mask ? check_mask(in.at(1), x[0], x[1], x, l) : x[0];
  return {Shape{batch, x[1], d}};
}

// The checks both blocks make of their input and heads; returns d.
int64_t check_block_input(const Layer& input, int64_t heads, const char* kind) {
  detail::require_input(input, kind);
  const int64_t d = input.n_units();
  detail::check_units(input, d, heads, kind);
  if (!is_floating(input.dtype()))
    throw DTypeError(std::string(kind) + ": input '" + input.name() + "' has dtype " + dtype_name(input.dtype()) + " (valid: a floating dtype)");
  return d;
}

// A block's inputs (the sequence, and the padding mask when given), dtype and name.
void attach(LayerImpl& impl, bool& has_mask, const Layer& input, const std::optional<Layer>& padding_mask, std::string name) {
  impl.inputs = {input};
  has_mask = padding_mask.has_value();
  if (has_mask) impl.inputs.push_back(*padding_mask);
  impl.dtype = input.dtype();
  impl.name = std::move(name);
}

struct GptBlockImpl final : KindBase<GptBlockImpl, GptBlockAttributes> {
  bool has_mask = false;
  const char* kind() const override { return "GptBlock"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    const State &ln1 = child_of(*state, "ln_1", *this), &att = child_of(*state, "attn", *this), &ln2 = child_of(*state, "ln_2", *this),
                &mlp = child_of(*state, "mlp", *this);
    const State &fc = child_of(mlp, "c_fc", *this), &proj = child_of(mlp, "c_proj", *this);
    const auto norm = [&](const Tensor& x, const State& n) { return layer_norm(x, {x.shape().back()}, n.param("weight"), n.param("bias"), attrs.eps); };
    Tensor x = in[0];
    const Tensor a = norm(x, ln1);
    x = x + detail::attend(att, a, a, a, attrs.n_heads, true, has_mask ? in[1] : Tensor());
    const Tensor h = attrs.activation(matmul(norm(x, ln2), fc.param("weight")) + fc.param("bias"));
    return x + (matmul(h, proj.param("weight")) + proj.param("bias"));
  }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    return block_shapes(*this, child_of(*state, "attn", *this), has_mask, in);
  }
};

struct LlamaBlockImpl final : KindBase<LlamaBlockImpl, LlamaBlockAttributes> {
  bool has_mask = false;
  const char* kind() const override { return "LlamaBlock"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    const State &n1 = child_of(*state, "input_layernorm", *this), &att = child_of(*state, "self_attn", *this),
                &n2 = child_of(*state, "post_attention_layernorm", *this), &mlp = child_of(*state, "mlp", *this);
    Tensor x = in[0];
    const Tensor a = rms_norm(x, {x.shape().back()}, n1.param("weight"), attrs.eps);
    x = x + detail::attend(att, a, a, a, attrs.n_heads, true, has_mask ? in[1] : Tensor(),
                           {.kv_heads = attrs.n_kv_heads, .rotary = attrs.rotary()});
    const Tensor m = rms_norm(x, {x.shape().back()}, n2.param("weight"), attrs.eps);
    return x + matmul(silu(matmul(m, mlp.param("gate"))) * matmul(m, mlp.param("up")), mlp.param("down"));
  }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    return block_shapes(*this, child_of(*state, "self_attn", *this), has_mask, in);
  }
};

}  // namespace

GptBlock::GptBlock(const Layer& input, int64_t heads, GptBlockOptions o, std::optional<Layer> padding_mask, const std::string& name) {
  const char* kind = "GptBlock";
  const int64_t d = check_block_input(input, heads, kind);
  if (o.ff_units < 0) throw ValueError("GptBlock: ff_units must be positive, or 0 for 4 d, got " + std::to_string(o.ff_units));
  const int64_t ff = o.ff_units > 0 ? o.ff_units : 4 * d;
  auto impl = std::make_shared<GptBlockImpl>();
  impl->attrs = {.n_heads = heads, .ff_units = ff, .eps = o.eps, .activation = o.activation};
  attach(*impl, impl->has_mask, input, padding_mask, unique_name("gpt_block", name));
  const DType dt = input.dtype();
  auto mlp = std::make_shared<State>();
  mlp->add_child("c_fc", linear_state(d, ff, o.weight_init, dt));
  mlp->add_child("c_proj", linear_state(ff, d, o.weight_init, dt));
  impl->state->add_child("ln_1", norm_state(d, dt, true));
  impl->state->add_child("attn", attention_state(d, d, true, o.weight_init, dt));
  impl->state->add_child("ln_2", norm_state(d, dt, true));
  impl->state->add_child("mlp", mlp);
  impl->shape = detail::shape_by_rule(*impl, impl->inputs);
  static_cast<Layer&>(*this) = Layer(impl);
}

LlamaBlock::LlamaBlock(const Layer& input, int64_t heads, LlamaBlockOptions o, std::optional<Layer> padding_mask,
                       const std::string& name) {
  const char* kind = "LlamaBlock";
  const int64_t d = check_block_input(input, heads, kind);
  if (o.ff_units <= 0) throw ValueError("LlamaBlock: ff_units (intermediate_size) must be positive, got " + std::to_string(o.ff_units));
  const int64_t kv = detail::check_kv_heads(o.n_kv_heads, heads, kind);
  if ((d / heads) % 2) throw ValueError("LlamaBlock: the rotary embedding needs an even head size, not " + std::to_string(d / heads));
  rotary_frequencies(d / heads, o.rotary);  // its options' check, naming what is out of range
  auto impl = std::make_shared<LlamaBlockImpl>();
  const RotaryOptions& r = o.rotary;
  impl->attrs = {.n_heads = heads, .n_kv_heads = kv, .ff_units = o.ff_units, .eps = o.eps, .attention_bias = o.attention_bias,
                 .rotary_base = r.base, .rotary_linear_factor = r.linear_factor, .rotary_llama3_factor = r.llama3_factor,
                 .rotary_low_freq_factor = r.low_freq_factor, .rotary_high_freq_factor = r.high_freq_factor,
                 .rotary_original_max_positions = r.original_max_positions};
  attach(*impl, impl->has_mask, input, padding_mask, unique_name("llama_block", name));
  const DType dt = input.dtype();
  auto mlp = std::make_shared<State>();
  mlp->add_param("gate", initialize(o.weight_init, {d, o.ff_units}, dt).requires_grad_());
  mlp->add_param("up", initialize(o.weight_init, {d, o.ff_units}, dt).requires_grad_());
  mlp->add_param("down", initialize(o.weight_init, {o.ff_units, d}, dt).requires_grad_());
  impl->state->add_child("input_layernorm", norm_state(d, dt, false));
  impl->state->add_child("self_attn", attention_state(d, d / heads * kv, o.attention_bias, o.weight_init, dt));
  impl->state->add_child("post_attention_layernorm", norm_state(d, dt, false));
  impl->state->add_child("mlp", mlp);
  impl->shape = detail::shape_by_rule(*impl, impl->inputs);
  static_cast<Layer&>(*this) = Layer(impl);
}

void detail::register_decoder_blocks(AddKind add) {
  add("GptBlock", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(1, 2);  // the input (and a padding mask)
    const auto a = read_attributes<GptBlockAttributes>(s.options);
    std::optional<Layer> mask;
    if (s.inputs.size() == 2) mask = s.inputs[1];
    return GptBlock(s.inputs[0], a.n_heads, {.ff_units = a.ff_units, .eps = a.eps, .activation = a.activation}, mask, s.name);
  }, {write_attributes(GptBlockAttributes{})});
  add("LlamaBlock", [](const LayerSpec& s) -> Layer {
    s.expect_inputs(1, 2);
    const auto a = read_attributes<LlamaBlockAttributes>(s.options);
    std::optional<Layer> mask;
    if (s.inputs.size() == 2) mask = s.inputs[1];
    return LlamaBlock(s.inputs[0], a.n_heads,
                      {.ff_units = a.ff_units, .n_kv_heads = a.n_kv_heads, .eps = a.eps, .rotary = a.rotary(), .attention_bias = a.attention_bias},
                      mask, s.name);
  }, {write_attributes(LlamaBlockAttributes{})});
}

}  // namespace loom::nn
