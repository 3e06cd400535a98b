#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/index.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/nn/attention.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/mode.h>
#include <loom/nn/state.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/indexing.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/ops/attention.h>
#include <loom/ops/linalg.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/rotary.h>

using namespace loom;

namespace {
// 0.3 * cos(k * arange(n)), the pattern the PyTorch script used for every parameter.
Tensor pattern(const Shape& s, double k) {
  return (cos(arange(0, double(shape_numel(s)), 1, Float64) * k) * 0.3).reshape(s);
}
void set(nn::State& s, const char* name, const Tensor& v) {
  NoGrad ng;
  s.param(name).copy_(v);
}
nn::State& child(const nn::Layer& l, const std::string& name) {
  for (auto& [k, c] : l.state().children())
    if (k == name) return *c;
  throw std::runtime_error("no child " + name);
}
}  // namespace

// Expected values: torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0, batch_first=True,
// norm_first=...) in float64, eval mode, the same weights (transposed to PyTorch's layout), and
// src_key_padding_mask hiding the last two positions of the second sequence (torch 1.13).
TEST(AttentionLayers, TransformerEncoderMatchesPyTorch) {
  const int64_t E = 8, H = 2, FF = 16, N = 2, L = 5;
  struct Case {
    bool norm_first;
    double sum, y_1_2_3, y_0_4_7;
  };
  for (const Case& c : {Case{false, 4.3005969468860314, -0.13072222680112966, 1.5399498716735818},
                        Case{true, 7.024220885250299, -0.3219623616799234, 1.2355898468871533}}) {
    nn::Input x(Shape{-1, L, E}, Float64, "x");
    nn::Input keep(Shape{-1, L}, Bool, "keep");
    nn::TransformerEncoderLayer enc(x, H, {.ff_units = FF, .dropout = 0.0, .norm_first = c.norm_first}, keep);
    EXPECT_EQ(enc.parameters().size(), 16u);
    int64_t count = 0;
    for (const Tensor& p : enc.parameters()) count += p.numel();
    EXPECT_EQ(count, 600);  // sum(p.numel() for p in torch_layer.parameters())
    nn::State& att = child(enc, "self_attention");
    set(att, "q_weight", pattern({E, E}, 0.11));
    set(att, "k_weight", pattern({E, E}, 0.23));
    set(att, "v_weight", pattern({E, E}, 0.31));
    set(att, "out_weight", pattern({E, E}, 0.47));
    set(att, "q_bias", pattern({E}, 0.5));
    set(att, "k_bias", pattern({E}, 0.6));
    set(att, "v_bias", pattern({E}, 0.7));
    set(att, "out_bias", pattern({E}, 0.8));
    nn::State& ff = child(enc, "ff");
    set(ff, "w1", pattern({E, FF}, 0.13));
    set(ff, "b1", pattern({FF}, 0.9));
    set(ff, "w2", pattern({FF, E}, 0.17));
    set(ff, "b2", pattern({E}, 1.1));
    set(child(enc, "norm1"), "weight", pattern({E}, 1.3) + 1.0);
    set(child(enc, "norm1"), "bias", pattern({E}, 1.5));
    set(child(enc, "norm2"), "weight", pattern({E}, 1.7) + 1.0);
    set(child(enc, "norm2"), "bias", pattern({E}, 1.9));
    x.set_value((sin(arange(0, double(N * L * E), 1, Float64) * 0.37)).reshape({N, L, E}));
    keep.set_value(from_vector<bool>({true, true, true, true, true, true, true, true, false, false}, {N, L}));
    Tensor y = enc();
    EXPECT_NEAR(sum(y).item<double>(), c.sum, 1e-9);
    EXPECT_NEAR(y.at({1, 2, 3}), c.y_1_2_3, 1e-10);
    EXPECT_NEAR(y.at({0, 4, 7}), c.y_0_4_7, 1e-10);
  }
}

TEST(AttentionLayers, CausalAttentionIgnoresTheFuture) {
  nn::Input x(Shape{-1, 4, 6}, Float32, "x");
  nn::MultiHeadAttention att(x, x, x, 3, {.causal = true});
  Tensor a = uniform({1, 4, 6});
  Tensor b = a.copy();
  b.index_put_({0, 3}, uniform({6}));  // change only the last position
  x.set_value(a);
  Tensor ya = att();
  x.set_value(b);
  Tensor yb = att();
  // earlier positions cannot see position 3
  EXPECT_TRUE(allclose(ya.index({0, Slice(0, 3)}), yb.index({0, Slice(0, 3)}), 1e-6, 1e-7));
  EXPECT_FALSE(allclose(ya.index({0, 3}), yb.index({0, 3})));
  EXPECT_THROW(nn::MultiHeadAttention(x, x, x, 4), ValueError);  // 6 units do not split into 4 heads
}

// Grouped-query attention: 6 heads on 2 key / value heads equals ordinary multi-head attention
// whose key and value weights repeat each key / value head's columns for its 3 query heads.
TEST(AttentionLayers, GroupedQueryAttentionEqualsRepeatedKeyValueHeads) {
  const int64_t E = 12, H = 6, KV = 2, D = E / H, N = 2, L = 5, S = 7;
  nn::Input q(Shape{-1, L, E}, Float64, "q"), kv(Shape{-1, S, E}, Float64, "kv");
  nn::Input keep(Shape{-1, S}, Bool, "keep");
  nn::MultiHeadAttention gqa(q, kv, kv, H, {.causal = false, .n_kv_heads = KV}, keep);
  nn::MultiHeadAttention mha(q, kv, kv, H, {.causal = false}, keep);
  EXPECT_EQ(gqa.state().param("k_weight").shape(), (Shape{E, KV * D}));
  EXPECT_EQ(gqa.state().param("v_bias").shape(), (Shape{KV * D}));
  EXPECT_EQ(gqa.options().get_int("n_kv_heads"), KV);
  // the same parameters, the key / value ones widened: head h reads key / value head h / 3
  for (const char* name : {"q_weight", "out_weight", "q_bias", "out_bias"}) set(mha.state(), name, gqa.state().param(name).detach() + 0.0);
  std::vector<int64_t> cols;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t d = 0; d < D; ++d) cols.push_back(h / (H / KV) * D + d);
  const Tensor idx = from_vector<int64_t>(cols, {E});
  for (const char* name : {"k_weight", "v_weight"}) {
    set(gqa.state(), name, uniform({E, KV * D}, -0.5, 0.5, Float64));
    set(mha.state(), name, take(gqa.state().param(name).detach(), idx, 1));
  }
  for (const char* name : {"k_bias", "v_bias"}) {
    set(gqa.state(), name, uniform({KV * D}, -0.5, 0.5, Float64));
    set(mha.state(), name, take(gqa.state().param(name).detach(), idx, 0));
  }
  q.set_value(uniform({N, L, E}, -1, 1, Float64));
  kv.set_value(uniform({N, S, E}, -1, 1, Float64));
  keep.set_value(from_vector<bool>({true, true, true, true, true, true, true, true, true, true, false, false, false, false}, {N, S}));
  EXPECT_TRUE(allclose(gqa(), mha(), 1e-12, 1e-12));
  // n_kv_heads must divide n_heads
  std::string m;
  try {
    nn::MultiHeadAttention(q, kv, kv, H, {.n_kv_heads = 4});
  } catch (const ValueError& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("n_kv_heads 4 must divide n_heads 6"), std::string::npos) << m;
}

// Rotary position embedding in the layer (Llama's attention): the queries' and keys' heads turned
// by loom::rotary_embedding (checked against PyTorch in tests/reference) before the causal,
// grouped attention; the options saved and read back; odd head sizes and bad bases refused.
TEST(AttentionLayers, RotaryEmbeddingTurnsTheQueriesAndKeysHeads) {
  const int64_t E = 16, H = 4, KV = 2, D = E / H, N = 2, L = 6;
  const RotaryOptions rope{.base = 500000.0, .llama3_factor = 8.0, .original_max_positions = 4};
  nn::Input x(Shape{-1, L, E}, Float64, "x");
  nn::MultiHeadAttention att(x, x, x, H, {.causal = true, .bias = false, .n_kv_heads = KV, .rotary = rope}, std::nullopt, "self_attn");
  const Tensor v = uniform({N, L, E}, -1, 1, Float64);
  x.set_value(v);
  const nn::State& s = att.state();
  const auto heads = [&](const char* w, int64_t h) { return permute(reshape(matmul(v, s.param(w)), {N, L, h, D}), {0, 2, 1, 3}); };
  const Tensor qh = rotary_embedding(heads("q_weight", H), 0, rope), kh = rotary_embedding(heads("k_weight", KV), 0, rope);
  const Tensor o = scaled_dot_product_attention(qh, kh, heads("v_weight", KV), Tensor(), true, std::nullopt, 0.0, true);
  const Tensor want = matmul(reshape(permute(o, {0, 2, 1, 3}), {N, L, E}), s.param("out_weight"));
  EXPECT_TRUE(allclose(att(), want, 1e-12, 1e-12));
  // without the rotation the layer computes something else
  nn::MultiHeadAttention plain(x, x, x, H, {.causal = true, .bias = false, .n_kv_heads = KV});
  for (const char* name : {"q_weight", "k_weight", "v_weight", "out_weight"}) set(plain.state(), name, s.param(name).detach() + 0.0);
  EXPECT_FALSE(allclose(plain(), want, 1e-6, 1e-6));
  EXPECT_TRUE(att.options().get_bool("rotary"));
  EXPECT_EQ(att.options().get_float("rotary_base"), 500000.0);
  nn::Input odd(Shape{-1, 3, 6}, Float32, "odd");
  EXPECT_THROW(nn::MultiHeadAttention(odd, odd, odd, 2, {.rotary = RotaryOptions{}}), ValueError);  // head size 3
  EXPECT_THROW(nn::MultiHeadAttention(x, x, x, H, {.rotary = RotaryOptions{.base = 0.5}}), ValueError);
}

// Dropout on the attention weights: only in training, reproducible from the layer's generator.
TEST(AttentionLayers, AttentionDropoutOnlyInTraining) {
  nn::Input x(Shape{-1, 6, 8}, Float32, "x");
  nn::MultiHeadAttention drop(x, x, x, 2, {.dropout = 0.5});
  nn::MultiHeadAttention plain(x, x, x, 2, {});
  for (const char* name : {"q_weight", "k_weight", "v_weight", "out_weight"}) set(plain.state(), name, drop.state().param(name).detach() + 0.0f);
  x.set_value(uniform({3, 6, 8}));
  EXPECT_TRUE(allclose(drop(), plain()));  // evaluation: no dropout
  Tensor trained;
  {
    nn::ModeScope train(nn::Mode::Train);
    trained = drop();
  }
  EXPECT_FALSE(allclose(trained, plain()));
}
