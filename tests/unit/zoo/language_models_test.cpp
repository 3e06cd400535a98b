// zoo::gpt and zoo::llama: shapes, transformers' module names, parameter counts (those of
// GPT2LMHeadModel and LlamaForCausalLM for the same configs, as transformers 4.44.2 counts
// them), tied heads, causality, and a JSON round trip. Their logits against transformers are
// the ctest hf_checkpoints_python (tests/hf/).
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/graph/serialize.h>
#include <loom/nn/attention.h>
#include <loom/nn/embedding.h>
#include <loom/nn/input.h>
#include <loom/nn/mode.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/indexing.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>
#include <loom/zoo/architectures.h>

#include <set>
#include <string>

#include "unit/common/core_test_util.h"

using namespace loom;

namespace {

zoo::GptConfig small_gpt() { return {.vocab_size = 50, .n_positions = 16, .n_embd = 32, .n_layer = 2, .n_head = 4}; }
zoo::LlamaConfig small_llama(bool tied) {
  return {.vocab_size = 50, .hidden_size = 32, .intermediate_size = 48, .num_hidden_layers = 2, .num_attention_heads = 4,
          .num_key_value_heads = 2, .tie_word_embeddings = tied};
}

std::set<std::string> layer_names(const Graph& g) {
  std::set<std::string> out;
  for (const nn::Layer& l : g.nodes())
    if (!l.state().all_params().empty()) out.insert(l.name());
  return out;
}

}  // namespace

TEST(ZooLanguageModels, GptHasTransformersNamesAndCount) {
  manual_seed(0);
  const zoo::Network net = zoo::gpt(small_gpt());
  // GPT2LMHeadModel(GPT2Config(vocab_size=50, n_positions=16, n_embd=32, n_layer=2, n_head=4)): 27,584
  EXPECT_EQ(net.parameter_count(), 27584);
  const std::set<std::string> want = {"transformer.wte", "transformer.wpe", "transformer.h.0.ln_1", "transformer.h.0.attn",
                                      "transformer.h.0.ln_2", "transformer.h.0.mlp.c_fc", "transformer.h.0.mlp.c_proj",
                                      "transformer.h.1.ln_1", "transformer.h.1.attn", "transformer.h.1.ln_2",
                                      "transformer.h.1.mlp.c_fc", "transformer.h.1.mlp.c_proj", "transformer.ln_f", "lm_head"};
  EXPECT_EQ(layer_names(net.graph), want);
  // the head is wte's table itself: one tensor, counted once
  EXPECT_TRUE(net.graph.layer("lm_head").state().param("weights").impl() == net.graph.layer("transformer.wte").state().param("weights").impl());
  EXPECT_EQ(net.graph.layer("transformer.h.0.attn").state().param("q_weight").shape(), (Shape{32, 32}));
  nn::ModeScope eval(nn::Mode::Eval);
  const Tensor logits = net(randint(0, 50, {2, 7}));
  EXPECT_EQ(logits.shape(), (Shape{2, 7, 50}));
  // untied (tie_word_embeddings false): lm_head's own (32, 50) weights, 29,184 as transformers counts
  zoo::GptConfig c = small_gpt();
  c.tie_word_embeddings = false;
  const zoo::Network untied = zoo::gpt(c);
  EXPECT_EQ(untied.parameter_count(), 29184);
  EXPECT_NE(untied.graph.layer("lm_head").state().param("weights").impl(), untied.graph.layer("transformer.wte").state().param("weights").impl());
}

TEST(ZooLanguageModels, LlamaHasTransformersNamesAndCounts) {
  manual_seed(0);
  const zoo::Network untied = zoo::llama(small_llama(false)), tied = zoo::llama(small_llama(true));
  // LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
  // num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=...)): 18,720 untied, 17,120 tied
  EXPECT_EQ(untied.parameter_count(), 18720);
  EXPECT_EQ(tied.parameter_count(), 17120);
  const std::set<std::string> want = {"model.embed_tokens", "model.layers.0.input_layernorm", "model.layers.0.self_attn",
                                      "model.layers.0.post_attention_layernorm", "model.layers.0.mlp",
                                      "model.layers.1.input_layernorm", "model.layers.1.self_attn",
                                      "model.layers.1.post_attention_layernorm", "model.layers.1.mlp", "model.norm", "lm_head"};
  EXPECT_EQ(layer_names(untied.graph), want);
  // grouped-query attention: 2 key / value heads of size 8
  const nn::Layer attn = untied.graph.layer("model.layers.0.self_attn");
  EXPECT_EQ(attn.state().param("k_weight").shape(), (Shape{32, 16}));
  EXPECT_EQ(attn.state().param("q_weight").shape(), (Shape{32, 32}));
  EXPECT_FALSE(attn.state().has_param("q_bias"));
  const nn::AttentionAttributes* a = nn::attributes_of<nn::AttentionAttributes>(attn);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->causal && a->rotary);
  EXPECT_EQ(a->n_kv_heads, 2);
  EXPECT_EQ(untied.graph.layer("lm_head").state().param("weights").shape(), (Shape{32, 50}));
  EXPECT_TRUE(tied.graph.layer("lm_head").state().param("weights").impl() == tied.graph.layer("model.embed_tokens").state().param("weights").impl());
  nn::ModeScope eval(nn::Mode::Eval);
  EXPECT_EQ(tied(randint(0, 50, {3, 5})).shape(), (Shape{3, 5, 50}));
}

// A later token changes no earlier position's logits (causal attention), in both families.
TEST(ZooLanguageModels, LogitsAreCausal) {
  manual_seed(1);
  nn::ModeScope eval(nn::Mode::Eval);
  for (const zoo::Network& net : {zoo::gpt(small_gpt()), zoo::llama(small_llama(false))}) {
    SCOPED_TRACE(net.name);
    const Tensor ids = randint(0, 50, {1, 6});
    Tensor changed = ids.copy();
    changed.index_put_({0, 4}, Scalar((ids.index({0, 4}).item<int64_t>() + 1) % 50));
    const Tensor a = net(ids), b = net(changed);
    EXPECT_TRUE(array_equal(slice(a, 1, 0, 4), slice(b, 1, 0, 4)));
    EXPECT_FALSE(array_equal(slice(a, 1, 4, 5), slice(b, 1, 4, 5)));
  }
}

TEST(ZooLanguageModels, GptRefusesSequencesLongerThanItsPositions) {
  const zoo::Network net = zoo::gpt(small_gpt());
  const std::string msg = loom_test::error_message<ShapeError>([&] { net(zeros({1, 17}, Int64)); });
  EXPECT_NE(msg.find("a sequence of 17 positions, longer than its 16 learned positions"), std::string::npos) << msg;
}

TEST(ZooLanguageModels, ConfigsOutOfRangeAreRefusedByName) {
  zoo::LlamaConfig c = small_llama(false);
  c.num_key_value_heads = 3;
  std::string msg = loom_test::error_message<ValueError>([&] { zoo::llama(c); });
  EXPECT_NE(msg.find("num_key_value_heads 3 must divide num_attention_heads 4"), std::string::npos) << msg;
  zoo::GptConfig g = small_gpt();
  g.n_head = 5;
  msg = loom_test::error_message<ValueError>([&] { zoo::gpt(g); });
  EXPECT_NE(msg.find("n_embd 32 must be a multiple of n_head 5"), std::string::npos) << msg;
  g = small_gpt();
  g.activation_function = "gelu_fast";
  msg = loom_test::error_message<ValueError>([&] { zoo::gpt(g); });
  EXPECT_NE(msg.find("activation_function 'gelu_fast'"), std::string::npos) << msg;
}

// Saved and rebuilt from JSON (PositionEmbedding, rotary grouped attention, the tied head), the
// same logits.
TEST(ZooLanguageModels, JsonRoundTripKeepsTheLogits) {
  manual_seed(2);
  nn::ModeScope eval(nn::Mode::Eval);
  zoo::LlamaConfig lc = small_llama(true);
  lc.rope = {.base = 500000.0, .llama3_factor = 8.0, .original_max_positions = 8};
  for (const zoo::Network& net : {zoo::gpt(small_gpt()), zoo::llama(lc)}) {
    SCOPED_TRACE(net.name);
    Graph back = graph_from_json(graph_to_json(net.graph));
    copy_state(net.graph, back);
    EXPECT_EQ(zoo::parameter_count(back), net.parameter_count());
    const Tensor ids = randint(0, 50, {2, 9});
    EXPECT_TRUE(array_equal(back.compile()(ids), net(ids)));
  }
}
