// ONNX export of sequence models (exporters.h): the recurrent layers (ONNX's RNN, LSTM, GRU,
// time-major between two Transposes), the cells (one step written out), multi-head attention
// and the transformer encoder layer (MatMuls, heads by Reshape and Transpose, masks as Where).
#include "io/onnx/exporters.h"

#include <cmath>
#include <optional>

#include "io/onnx_proto.h"
#include "loom/core/error.h"
#include "loom/nn/layers.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/rotary.h"

namespace loom::io::detail {

using B = OnnxBuilder;

namespace {

// ONNX's gate blocks from Loom's (PyTorch's) along the last axis: `order` lists Loom's block of
// each ONNX block.
Tensor reorder_gates(const Tensor& w, const std::vector<int64_t>& order, int64_t n) {
  std::vector<Tensor> parts;
  for (int64_t g : order) parts.push_back(slice(w, -1, g * n, (g + 1) * n));
  return concatenate(parts, -1);
}


// ------------------------------------------------------------------ attention
// x W + b (b optional) into a fresh value
std::string affine(B& b, const std::string& x, const nn::State& s, const char* w, const char* bias, const std::string& tag) {
  const std::string y = b.fresh(tag);
  b.node("MatMul", {x, b.tensor(s.param(w), w)}, {y});
  if (!s.has_param(bias)) return y;
  const std::string z = b.fresh(tag + "_biased");
  b.node("Add", {y, b.tensor(s.param(bias), bias)}, {z});
  return z;
}

// (N, L, E) -> (N, H, L, E / H)
std::string split_heads(B& b, const std::string& x, int64_t heads, int64_t e, const std::string& tag) {
  const std::string r = b.fresh(tag + "_heads"), t = b.fresh(tag + "_heads_t");
  b.node("Reshape", {x, b.ints({0, 0, heads, e / heads}, "heads_shape")}, {r});
  b.node("Transpose", {r}, {t}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  return t;
}

// (N, Hkv, S, d) -> (N, Hkv * group, S, d), each head repeated over its group of query heads
// (grouped-query attention; torch's repeat_interleave): Unsqueeze, Expand, Reshape.
std::string repeat_heads(B& b, const std::string& x, int64_t kv_heads, int64_t group, int64_t d, const std::string& tag) {
  if (group == 1) return x;
  const std::string u = b.fresh(tag + "_grouped"), e = b.fresh(tag + "_expanded"), r = b.fresh(tag + "_repeated");
  b.node("Unsqueeze", {x, b.ints({2}, "axis2")}, {u});  // (N, Hkv, 1, S, d)
  b.node("Expand", {u, b.ints({1, 1, group, 1, 1}, "group_shape")}, {e});
  b.node("Reshape", {e, b.ints({0, kv_heads * group, -1, d}, "repeated_shape")}, {r});
  return r;
}

// The rotary position embedding of heads x (N, H, T, d), positions 0 .. T-1 (loom::rotary_embedding
// with offset 0): angles = (position / linear factor) * inv_freq in x's dtype, each half's pair
// turned: x cos + rotate_half(x) sin, rotate_half(x) = (-x[d/2:], x[:d/2]). Opset 17 has no
// rotary operator; these are Range, Cast, Mul, Cos, Sin, Slice, Neg and Concat.
std::string rotary(B& b, const std::string& x, int64_t d, const RotaryOptions& o, const std::string& tag) {
  const DType dtype = b.layer().dtype();
  const std::string len = b.fresh(tag + "_len"), len0 = b.fresh(tag + "_len0"), pos = b.fresh(tag + "_positions"),
                    posf = b.fresh(tag + "_positions_f"), col = b.fresh(tag + "_positions_col"), half = b.fresh(tag + "_angles_half"),
                    angles = b.fresh(tag + "_angles"), c = b.fresh(tag + "_cos"), sn = b.fresh(tag + "_sin");
  b.node("Shape", {x}, {len}, {{"start", int64_t{2}}, {"end", int64_t{3}}});
  b.node("Squeeze", {len, b.ints({0}, "axis0")}, {len0});
  b.node("Range", {b.tensor(scalar_tensor(int64_t{0}, DType::Int64), "zero"), len0, b.tensor(scalar_tensor(int64_t{1}, DType::Int64), "one")},
         {pos});
  b.node("Cast", {pos}, {posf}, {{"to", int64_t{dtype == DType::Float64 ? onnx::TensorProto::DOUBLE : onnx::TensorProto::FLOAT}}});
  std::string scaled = posf;
  if (o.linear_factor != 1.0) {
    scaled = b.fresh(tag + "_positions_scaled");
    b.node("Div", {posf, b.tensor(scalar_tensor(o.linear_factor, dtype), "rotary_linear_factor")}, {scaled});
  }
  b.node("Unsqueeze", {scaled, b.ints({1}, "axis1")}, {col});  // (T, 1)
  b.node("Mul", {col, b.tensor(astype(rotary_frequencies(d, o), dtype), "rotary_inv_freq")}, {half});  // (T, d/2)
  b.node("Concat", {half, half}, {angles}, {{"axis", int64_t{-1}}});
  b.node("Cos", {angles}, {c});
  b.node("Sin", {angles}, {sn});
  const std::string first = b.fresh(tag + "_first_half"), second = b.fresh(tag + "_second_half"), neg = b.fresh(tag + "_second_neg"),
                    turned = b.fresh(tag + "_rotated"), xc = b.fresh(tag + "_x_cos"), ts = b.fresh(tag + "_rotated_sin"), y = b.fresh(tag + "_rope");
  b.node("Slice", {x, b.ints({0}, "rotary_start0"), b.ints({d / 2}, "rotary_mid"), b.ints({-1}, "last_axis")}, {first});
  b.node("Slice", {x, b.ints({d / 2}, "rotary_mid"), b.ints({d}, "rotary_end"), b.ints({-1}, "last_axis")}, {second});
  b.node("Neg", {second}, {neg});
  b.node("Concat", {neg, first}, {turned}, {{"axis", int64_t{-1}}});
  b.node("Mul", {x, c}, {xc});
  b.node("Mul", {turned, sn}, {ts});
  b.node("Add", {xc, ts}, {y});
  return y;
}

// Loom's attend (nn/attention.cpp) on values q (N, L, E), k and v (N, S, E); `keep` (N, S) bool
// or empty. Scores are scaled by 1 / sqrt(E / H); masked scores are -inf before the softmax.
// kv_heads < heads: grouped-query attention (k and v projected to kv_heads heads).
void attend(B& b, const nn::State& s, const std::string& q, const std::string& k, const std::string& v, int64_t heads, bool causal,
            const std::string& keep, const std::string& out, int64_t kv_heads = 0,
            const std::optional<RotaryOptions>& rope = std::nullopt) {
  const int64_t e = s.param("q_weight").shape()[0], d = e / heads;
  if (kv_heads <= 0) kv_heads = heads;
  const int64_t group = heads / kv_heads;
  std::string qh = split_heads(b, affine(b, q, s, "q_weight", "q_bias", "q"), heads, e, "q");
  std::string kh_own = split_heads(b, affine(b, k, s, "k_weight", "k_bias", "k"), kv_heads, d * kv_heads, "k");
  if (rope) {  // the queries' and the keys' heads, each from position 0 (nn/attention.cpp)
    qh = rotary(b, qh, d, *rope, "q");
    kh_own = rotary(b, kh_own, d, *rope, "k");
  }
  const std::string kh = repeat_heads(b, kh_own, kv_heads, group, d, "k");
  const std::string vh = repeat_heads(b, split_heads(b, affine(b, v, s, "v_weight", "v_bias", "v"), kv_heads, d * kv_heads, "v"),
                                      kv_heads, group, d, "v");
  const std::string kt = b.fresh("k_t"), raw = b.fresh("scores_raw");
  b.node("Transpose", {kh}, {kt}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  b.node("MatMul", {qh, kt}, {raw});
  std::string scores = b.fresh("scores");
  b.node("Mul", {raw, b.tensor(scalar_tensor(1.0 / std::sqrt(static_cast<double>(d)), b.layer().dtype()), "scale")}, {scores});
  const std::string minus_inf = b.tensor(scalar_tensor(-INFINITY, b.layer().dtype()), "minus_inf");
  if (causal) {  // key j > query i is masked
    const std::string lq = b.fresh("len_q"), lk = b.fresh("len_k"), lq0 = b.fresh("len_q0"), lk0 = b.fresh("len_k0"), rows = b.fresh("rows"),
                      cols = b.fresh("cols"), rows2 = b.fresh("rows_col"), future = b.fresh("future"), masked = b.fresh("scores_causal");
    const std::string zero = b.tensor(scalar_tensor(int64_t{0}, DType::Int64), "zero"), one = b.tensor(scalar_tensor(int64_t{1}, DType::Int64), "one");
    b.node("Shape", {q}, {lq}, {{"start", int64_t{1}}, {"end", int64_t{2}}});
    b.node("Shape", {k}, {lk}, {{"start", int64_t{1}}, {"end", int64_t{2}}});
    b.node("Squeeze", {lq, b.ints({0}, "axis0")}, {lq0});
    b.node("Squeeze", {lk, b.ints({0}, "axis0")}, {lk0});
    b.node("Range", {zero, lq0, one}, {rows});
    b.node("Range", {zero, lk0, one}, {cols});
    b.node("Unsqueeze", {rows, b.ints({1}, "axis1")}, {rows2});
    b.node("Greater", {cols, rows2}, {future});  // (L, S)
    b.node("Where", {future, minus_inf, scores}, {masked});
    scores = masked;
  }
  if (!keep.empty()) {
    const std::string kb = b.fresh("keep_bool"), k4 = b.fresh("keep_4d"), drop = b.fresh("padding"), masked = b.fresh("scores_padded");
    b.node("Cast", {keep}, {kb}, {{"to", int64_t{onnx::TensorProto::BOOL}}});
    b.node("Unsqueeze", {kb, b.ints({1, 2}, "axes12")}, {k4});  // (N, 1, 1, S)
    b.node("Not", {k4}, {drop});
    b.node("Where", {drop, minus_inf, scores}, {masked});
    scores = masked;
  }
  const std::string p = b.fresh("weights"), o = b.fresh("attended"), ot = b.fresh("attended_t"), oc = b.fresh("attended_concat");
  b.node("Softmax", {scores}, {p}, {{"axis", int64_t{-1}}});
  std::string weights = p;
  if (!keep.empty()) {  // a query that sees no key (every one padding, or in its future) weighs 0 (Loom's rule), not Softmax's NaN
    const std::string top = b.fresh("scores_max"), dead = b.fresh("sees_no_key");
    weights = b.fresh("weights_seen");
    b.node("ReduceMax", {scores}, {top}, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{1}}});
    b.node("Equal", {top, minus_inf}, {dead});
    b.node("Where", {dead, b.tensor(scalar_tensor(0.0, b.layer().dtype()), "zero"), p}, {weights});
  }
  b.node("MatMul", {weights, vh}, {o});
  b.node("Transpose", {o}, {ot}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  b.node("Reshape", {ot, b.ints({0, 0, e}, "concat_shape")}, {oc});
  const std::string y = b.fresh("out");
  b.node("MatMul", {oc, b.tensor(s.param("out_weight"), "out_weight")}, {s.has_param("out_bias") ? y : out});
  if (s.has_param("out_bias")) b.node("Add", {y, b.tensor(s.param("out_bias"), "out_bias")}, {out});
}


const nn::State& child_state(const nn::State& s, const std::string& name) {
  for (const auto& [k, c] : s.children())
    if (k == name) return *c;
  throw ValueError("no inner state '" + name + "'");
}

std::string layer_norm_value(B& b, const std::string& x, const nn::State& n, double eps, const std::string& tag, const std::string& out = "") {
  const std::string y = out.empty() ? b.fresh(tag) : out;
  b.node("LayerNormalization", {x, b.tensor(n.param("weight"), tag + "_weight"), b.tensor(n.param("bias"), tag + "_bias")}, {y},
         {{"axis", int64_t{-1}}, {"epsilon", static_cast<float>(eps)}});
  return y;
}


// x[..., start:end] into a fresh value
std::string last_axis_slice(B& b, const std::string& x, int64_t start, int64_t end, const std::string& tag) {
  const std::string y = b.fresh(tag);
  b.node("Slice", {x, b.ints({start}, tag + "_start"), b.ints({end}, tag + "_end"), b.ints({-1}, "last_axis")}, {y});
  return y;
}

std::string binary(B& b, const char* op, const std::string& x, const std::string& y, const std::string& tag) {
  const std::string z = b.fresh(tag);
  b.node(op, {x, y}, {z});
  return z;
}

std::string unary(B& b, const char* op, const std::string& x, const std::string& tag) {
  const std::string z = b.fresh(tag);
  b.node(op, {x}, {z});
  return z;
}

}  // namespace

// RNN over (batch, time, features): ONNX's RNN / LSTM / GRU in its time-major layout (layout 0,
// the one ONNX Runtime runs), the input and outputs transposed around it. W (dirs, G n, in),
// R (dirs, G n, n), B (dirs, 2 G n) with ONNX's gate orders: LSTM i o f c, GRU z r h
// (linear_before_reset: PyTorch's GRU).
void export_rnn(B& b, const nn::RNNAttributes& a) {
  if (a.stateful) throw ValueError("a stateful RNN (its state kept between calls) has no ONNX form here");
  if (a.bidirectional && a.reverse) throw ValueError("a reversed bidirectional RNN has no ONNX form here");
  const int64_t n = a.n_units;
  std::string op;
  std::vector<int64_t> order;
  std::vector<OnnxAttribute> attrs{{"hidden_size", n},
                                   {"direction", std::string(a.bidirectional ? "bidirectional" : a.reverse ? "reverse" : "forward")}};
  if (a.cell == "LSTM") {
    op = "LSTM";
    order = {0, 3, 1, 2};
  } else if (a.cell == "GRU") {
    op = "GRU";
    order = {1, 0, 2};
    attrs.push_back({"linear_before_reset", int64_t{1}});
  } else {
    op = "RNN";
    order = {0};
    const char* act = a.activation.is(nn::tanh) ? "Tanh" : a.activation.is(nn::relu) ? "Relu" : a.activation.is(nn::sigmoid) ? "Sigmoid" : nullptr;
    if (!act) throw ValueError("an RNN cell with activation '" + a.activation.name + "' has no ONNX form (tanh, relu, sigmoid do)");
    const size_t dirs = a.bidirectional ? 2 : 1;
    attrs.push_back({"activations", std::vector<std::string>(dirs, act)});
  }
  const nn::State& st = b.layer().state();
  std::vector<const nn::State*> dirs;
  if (a.bidirectional)
    for (const auto& c : st.children()) dirs.push_back(c.second.get());
  else
    dirs.push_back(&st);
  std::vector<Tensor> ws, rs, bs;
  for (const nn::State* s : dirs) {
    ws.push_back(expand_dims(reorder_gates(s->param("w_ih"), order, n).transpose(), 0));
    rs.push_back(expand_dims(reorder_gates(s->param("w_hh"), order, n).transpose(), 0));
    if (a.bias) bs.push_back(expand_dims(concatenate({reorder_gates(s->param("b_ih"), order, n), reorder_gates(s->param("b_hh"), order, n)}, 0), 0));
  }
  const std::string x = b.fresh("time_major");
  b.node("Transpose", {b.input(0)}, {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  std::vector<std::string> in{x, b.tensor(concatenate(ws, 0), "W"), b.tensor(concatenate(rs, 0), "R")};
  if (a.bias) in.push_back(b.tensor(concatenate(bs, 0), "B"));
  if (a.return_sequences) {
    const std::string y = b.fresh("Y"), yt = b.fresh("Y_batch_major");  // (time, dirs, batch, n) -> (batch, time, dirs, n)
    b.node(op, in, {y}, attrs);
    b.node("Transpose", {y}, {yt}, {{"perm", std::vector<int64_t>{2, 0, 1, 3}}});
    b.node("Reshape", {yt, b.ints({0, 0, -1}, "shape")}, {b.output()});
  } else {
    const std::string yh = b.fresh("Y_h"), yt = b.fresh("Y_h_batch_major");  // (dirs, batch, n) -> (batch, dirs, n)
    b.node(op, in, {"", yh}, attrs);
    b.node("Transpose", {yh}, {yt}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
    b.node("Reshape", {yt, b.ints({0, -1}, "shape")}, {b.output()});
  }
}

void export_attention(B& b, const nn::AttentionAttributes& a) {
  const std::string keep = b.layer().inputs().size() > 3 ? b.input(3) : "";
  attend(b, b.layer().state(), b.input(0), b.input(1), b.input(2), a.n_heads, a.causal, keep, b.output(), a.n_kv_heads, a.rotary_options());
}

// torch.nn.TransformerEncoderLayer's computation in Eval mode (dropout the identity)
void export_encoder(B& b, const nn::TransformerEncoderAttributes& a) {
  const nn::State& s = b.layer().state();
  const nn::State &att = child_state(s, "self_attention"), &ff = child_state(s, "ff"), &n1 = child_state(s, "norm1"), &n2 = child_state(s, "norm2");
  const std::string keep = b.layer().inputs().size() > 1 ? b.input(1) : "";
  const auto feed_forward = [&](const std::string& x) {
    const std::string h = affine(b, x, ff, "w1", "b1", "ff1"), act = b.fresh("ff_act");
    if (!activation(b, a.activation, h, act)) throw ValueError("the activation function '" + a.activation.name + "' has no ONNX form");
    return affine(b, act, ff, "w2", "b2", "ff2");
  };
  const auto add = [&](const std::string& x, const std::string& y, const std::string& tag) {
    const std::string z = b.fresh(tag);
    b.node("Add", {x, y}, {z});
    return z;
  };
  const std::string x = b.input(0);
  if (a.norm_first) {
    const std::string h1 = layer_norm_value(b, x, n1, a.eps, "norm1"), at = b.fresh("attention");
    attend(b, att, h1, h1, h1, a.n_heads, a.causal, keep, at);
    const std::string x1 = add(x, at, "residual1");
    b.node("Add", {x1, feed_forward(layer_norm_value(b, x1, n2, a.eps, "norm2"))}, {b.output()});
    return;
  }
  const std::string at = b.fresh("attention");
  attend(b, att, x, x, x, a.n_heads, a.causal, keep, at);
  const std::string x1 = layer_norm_value(b, add(x, at, "residual1"), n1, a.eps, "norm1");
  layer_norm_value(b, add(x1, feed_forward(x1), "residual2"), n2, a.eps, "norm2", b.output());
}

// transformers' GPT2Block (nn/decoder_block.cpp): x + attn(ln_1(x)), then + c_proj(act(c_fc(ln_2(.))))
void export_gpt_block(B& b, const nn::GptBlockAttributes& a) {
  const nn::State& s = b.layer().state();
  const nn::State &mlp = child_state(s, "mlp"), &fc = child_state(mlp, "c_fc"), &proj = child_state(mlp, "c_proj");
  const std::string keep = b.layer().inputs().size() > 1 ? b.input(1) : "", x = b.input(0), at = b.fresh("attention"),
                    x1 = b.fresh("residual1"), act = b.fresh("mlp_act");
  const std::string h1 = layer_norm_value(b, x, child_state(s, "ln_1"), a.eps, "ln_1");
  attend(b, child_state(s, "attn"), h1, h1, h1, a.n_heads, true, keep, at);
  b.node("Add", {x, at}, {x1});
  const std::string h = affine(b, layer_norm_value(b, x1, child_state(s, "ln_2"), a.eps, "ln_2"), fc, "weight", "bias", "c_fc");
  if (!activation(b, a.activation, h, act)) throw ValueError("the activation function '" + a.activation.name + "' has no ONNX form");
  b.node("Add", {x1, affine(b, act, proj, "weight", "bias", "c_proj")}, {b.output()});
}

// transformers' LlamaDecoderLayer (nn/decoder_block.cpp): x + self_attn(rms(x)), then + mlp(rms(.))
void export_llama_block(B& b, const nn::LlamaBlockAttributes& a) {
  const nn::State& s = b.layer().state();
  const std::string keep = b.layer().inputs().size() > 1 ? b.input(1) : "", x = b.input(0), at = b.fresh("attention"),
                    x1 = b.fresh("residual1");
  const std::string h1 = rms_norm_value(b, x, child_state(s, "input_layernorm").param("weight"), a.eps);
  attend(b, child_state(s, "self_attn"), h1, h1, h1, a.n_heads, true, keep, at, a.n_kv_heads, a.rotary());
  b.node("Add", {x, at}, {x1});
  const std::string h2 = rms_norm_value(b, x1, child_state(s, "post_attention_layernorm").param("weight"), a.eps);
  b.node("Add", {x1, swiglu_value(b, h2, child_state(s, "mlp"))}, {b.output()});
}

// One step of an RNNCell, LSTMCell or GRUCell (nn/recurrent.cpp's cell_step on
// input_projection): inputs x and the state (h, or [h, c] packed), output the next state.
void export_cell(B& b, const nn::CellAttributes& a) {
  const nn::State& s = b.layer().state();
  const int64_t n = a.n_units;
  const bool bias = s.has_param("b_ih");
  const std::string x = b.input(0), st = b.input(1);
  std::string xw = binary(b, "MatMul", x, b.tensor(s.param("w_ih"), "w_ih"), "xw");
  if (a.cell == nn::CellKind::LSTM) {
    if (bias) xw = binary(b, "Add", xw, b.tensor(s.param("b_ih"), "b_ih"), "xw_b");
    if (bias) xw = binary(b, "Add", xw, b.tensor(s.param("b_hh"), "b_hh"), "xw_bb");
    const std::string h = last_axis_slice(b, st, 0, n, "h"), c = last_axis_slice(b, st, n, 2 * n, "c");
    const std::string g = binary(b, "Add", xw, binary(b, "MatMul", h, b.tensor(s.param("w_hh"), "w_hh"), "hw"), "gates");
    const std::string i = unary(b, "Sigmoid", last_axis_slice(b, g, 0, n, "gate_i"), "i"), f = unary(b, "Sigmoid", last_axis_slice(b, g, n, 2 * n, "gate_f"), "f"),
                      cand = unary(b, "Tanh", last_axis_slice(b, g, 2 * n, 3 * n, "gate_g"), "g"),
                      o = unary(b, "Sigmoid", last_axis_slice(b, g, 3 * n, 4 * n, "gate_o"), "o");
    const std::string c2 = binary(b, "Add", binary(b, "Mul", f, c, "fc"), binary(b, "Mul", i, cand, "ig"), "c2");
    const std::string h2 = binary(b, "Mul", o, unary(b, "Tanh", c2, "tanh_c2"), "h2");
    // h2 and c2 may broadcast to different leading sizes than the packed state had: Concat needs one
    b.node("Concat", {h2, c2}, {b.output()}, {{"axis", int64_t{-1}}});
    return;
  }
  if (bias) xw = binary(b, "Add", xw, b.tensor(s.param("b_ih"), "b_ih"), "xw_b");
  std::string hw = binary(b, "MatMul", st, b.tensor(s.param("w_hh"), "w_hh"), "hw");
  if (bias) hw = binary(b, "Add", hw, b.tensor(s.param("b_hh"), "b_hh"), "hw_b");
  if (a.cell == nn::CellKind::RNN) {
    if (!activation(b, a.activation, binary(b, "Add", xw, hw, "pre"), b.output()))
      throw ValueError("the activation function '" + a.activation.name + "' has no ONNX form");
    return;
  }
  const std::string r = unary(b, "Sigmoid", binary(b, "Add", last_axis_slice(b, xw, 0, n, "xr"), last_axis_slice(b, hw, 0, n, "hr"), "r_pre"), "r");
  const std::string z = unary(b, "Sigmoid", binary(b, "Add", last_axis_slice(b, xw, n, 2 * n, "xz"), last_axis_slice(b, hw, n, 2 * n, "hz"), "z_pre"), "z");
  const std::string cand = unary(
      b, "Tanh", binary(b, "Add", last_axis_slice(b, xw, 2 * n, 3 * n, "xn"), binary(b, "Mul", r, last_axis_slice(b, hw, 2 * n, 3 * n, "hn"), "r_hn"), "n_pre"),
      "cand");
  // (1 - z) * cand + z * h = cand + z * (h - cand)
  b.node("Add", {cand, binary(b, "Mul", z, binary(b, "Sub", st, cand, "h_minus_cand"), "z_delta")}, {b.output()});
}

}  // namespace loom::io::detail
