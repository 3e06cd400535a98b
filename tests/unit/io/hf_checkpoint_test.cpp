// io::load_hf_checkpoint and io::save_hf_checkpoint on folders laid out as transformers writes
// them: round trips, the split rule of GPT-2's c_attn, 16-bit weights, shards, and the strict
// refusals of a hostile or broken folder (unknown model types, settings Loom does not model,
// sizes out of range, weights too small for the config, shard names outside the folder, missing,
// unexpected and misshapen keys); int8 folders, bit for bit, and their refusals. Against
// transformers itself: the ctest hf_checkpoints_python.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/core/file.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/io/hf_checkpoint.h>
#include <loom/io/safetensors.h>
#include <loom/io/torch_weights.h>
#include <loom/nn/mode.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/quantized.h>
#include <loom/ops/random.h>
#include <loom/zoo/architectures.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::error_message;
using loom_test::TempDir;
using nlohmann::json;

namespace {

zoo::GptConfig small_gpt() { return {.vocab_size = 40, .n_positions = 16, .n_embd = 32, .n_layer = 2, .n_head = 4}; }
zoo::LlamaConfig small_llama(bool tied) {
  return {.vocab_size = 40, .hidden_size = 32, .intermediate_size = 48, .num_hidden_layers = 2, .num_attention_heads = 4,
          .num_key_value_heads = 2, .rms_norm_eps = 1e-5, .tie_word_embeddings = tied};
}

json read_config(const std::string& dir) { return json::parse(read_file(dir + "/config.json")); }
// (a plain write: the hostile-values test writes hundreds, and an atomic write's fsyncs would dominate it)
void write_config(const std::string& dir, const json& j) { std::ofstream(dir + "/config.json", std::ios::trunc) << j.dump(); }

Tensor logits(const zoo::Network& net, const Tensor& ids) {
  nn::ModeScope eval(nn::Mode::Eval);
  return net(ids);
}

// A saved GPT-2 whose config.json gets `edit`, loaded: the error's message.
template <class Edit>
std::string gpt_error_after(const TempDir& tmp, Edit edit) {
  const std::string dir = tmp / "gpt";
  io::save_hf_checkpoint(zoo::gpt(small_gpt()), dir);
  json j = read_config(dir);
  edit(j);
  write_config(dir, j);
  return error_message<io::HfCheckpointError>([&] { io::load_hf_checkpoint(dir); });
}

}  // namespace

TEST(HfCheckpoint, GptRoundTripKeepsLogitsAndConfig) {
  TempDir tmp;
  manual_seed(0);
  for (bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    zoo::GptConfig c = small_gpt();
    c.n_inner = 40;
    c.activation_function = "gelu_pytorch_tanh";
    c.tie_word_embeddings = tied;
    const zoo::Network net = zoo::gpt(c);
    const std::string dir = tmp / (tied ? "tied" : "untied");
    io::save_hf_checkpoint(net, dir);
    EXPECT_EQ(read_config(dir).at("model_type"), "gpt2");
    const io::TensorMap saved = io::load_safetensors(dir + "/model.safetensors");
    EXPECT_EQ(saved.count("lm_head.weight"), tied ? 0u : 1u);  // tied: transformers re-ties it
    EXPECT_EQ(saved.at("transformer.h.1.attn.c_attn.weight").shape(), (Shape{32, 96}));
    const zoo::Network back = io::load_hf_checkpoint(dir);
    const auto& bc = std::get<zoo::GptConfig>(back.config);
    EXPECT_EQ(bc.n_inner, 40);
    EXPECT_EQ(bc.activation_function, "gelu_pytorch_tanh");
    EXPECT_EQ(bc.tie_word_embeddings, tied);
    const Tensor ids = randint(0, 40, {2, 7});
    EXPECT_TRUE(array_equal(logits(back, ids), logits(net, ids)));
  }
}

TEST(HfCheckpoint, LlamaRoundTripsTiedAndUntied) {
  TempDir tmp;
  manual_seed(1);
  zoo::LlamaConfig tied = small_llama(true), untied = small_llama(false);
  tied.rope = {.base = 500000.0, .llama3_factor = 8.0, .low_freq_factor = 1.0, .high_freq_factor = 4.0, .original_max_positions = 8};
  untied.rope.linear_factor = 2.0;
  untied.attention_bias = true;
  for (const zoo::LlamaConfig& c : {tied, untied}) {
    SCOPED_TRACE(c.tie_word_embeddings ? "tied" : "untied");
    const zoo::Network net = zoo::llama(c);
    const std::string dir = tmp / (c.tie_word_embeddings ? "tied" : "untied");
    io::save_hf_checkpoint(net, dir);
    EXPECT_EQ(io::load_safetensors(dir + "/model.safetensors").count("lm_head.weight"), c.tie_word_embeddings ? 0u : 1u);
    const zoo::Network back = io::load_hf_checkpoint(dir);
    const auto& bc = std::get<zoo::LlamaConfig>(back.config);
    EXPECT_EQ(bc.rope.base, c.rope.base);
    EXPECT_EQ(bc.rope.llama3_factor, c.rope.llama3_factor);
    EXPECT_EQ(bc.rope.linear_factor, c.rope.linear_factor);
    EXPECT_EQ(bc.rope.original_max_positions, c.rope.original_max_positions);
    EXPECT_EQ(bc.attention_bias, c.attention_bias);
    EXPECT_EQ(back.parameter_count(), net.parameter_count());
    const Tensor ids = randint(0, 40, {2, 11});
    EXPECT_TRUE(array_equal(logits(back, ids), logits(net, ids)));
  }
}

// GPT-2's c_attn is q, k and v side by side: the split rule cuts its columns (and its bias) in three.
TEST(HfCheckpoint, CAttnSplitsIntoQueryKeyValue) {
  manual_seed(2);
  const zoo::Network net = zoo::gpt(small_gpt());
  const io::TensorMap state = io::torch_state_from_graph(net.graph, io::hf_torch_map(net));
  const nn::State& attn = net.graph.layer("transformer.h.0.attn").state();
  const std::vector<Tensor> qkv = split(state.at("transformer.h.0.attn.c_attn.weight"), 3, 1);
  EXPECT_TRUE(array_equal(qkv[0], attn.param("q_weight")));
  EXPECT_TRUE(array_equal(qkv[2], attn.param("v_weight")));
  EXPECT_TRUE(array_equal(split(state.at("transformer.h.0.attn.c_attn.bias"), 3, 0)[1], attn.param("k_bias")));
  // and a packed tensor that does not cut evenly is named
  io::TensorMap bad = state;
  bad["transformer.h.0.attn.c_attn.weight"] = zeros({32, 95});
  const std::string msg = error_message<ValueError>([&] { io::convert_torch_state(net.graph, bad, io::hf_torch_map(net)); });
  EXPECT_NE(msg.find("'transformer.h.0.attn.c_attn.weight' -> split into 'transformer.h.0.attn/q_weight', 'transformer.h.0.attn/k_weight', "
                     "'transformer.h.0.attn/v_weight' has shape (32, 95), which does not split into 3 equal pieces along axis 1"),
            std::string::npos)
      << msg;
  io::TorchRule both("a", "b");
  both.split = {"c", "d"};
  io::TorchMap m;
  m.rules = {both};
  EXPECT_NE(error_message<ValueError>([&] { io::convert_torch_state(net.graph, {}, m); }).find("leave `loom` empty with `split`"),
            std::string::npos);
}

// Missing, unexpected and misshapen keys: one HfCheckpointError naming each.
TEST(HfCheckpoint, StrictLoadNamesEveryBadKey) {
  TempDir tmp;
  const std::string dir = tmp / "gpt";
  io::save_hf_checkpoint(zoo::gpt(small_gpt()), dir);
  io::TensorMap state = io::load_safetensors(dir + "/model.safetensors");
  state.erase("transformer.h.1.ln_2.bias");
  state["transformer.h.0.attn.rotary"] = zeros({2});
  state["transformer.h.0.mlp.c_fc.weight"] = zeros({128, 32});  // transposed: nn.Linear's layout, not Conv1D's
  io::save_safetensors(dir + "/model.safetensors", state, {{"format", "pt"}});
  const std::string msg = error_message<io::HfCheckpointError>([&] { io::load_hf_checkpoint(dir); });
  EXPECT_NE(msg.find("no rule maps the PyTorch keys 'transformer.h.0.attn.rotary'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no PyTorch key fills the graph's 'transformer.h.1.ln_2/bias'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'transformer.h.0.mlp.c_fc.weight' -> 'transformer.h.0.mlp.c_fc/weights' has shape (128, 32) but the graph expects (32, 128)"),
            std::string::npos)
      << msg;
}

TEST(HfCheckpoint, RefusesWhatLoomDoesNotModel) {
  TempDir tmp;
  std::string msg = gpt_error_after(tmp, [](json& j) { j["model_type"] = "bert"; });
  EXPECT_NE(msg.find("model_type is \"bert\" (valid: gpt2, llama)"), std::string::npos) << msg;
  msg = gpt_error_after(tmp, [](json& j) { j["scale_attn_by_inverse_layer_idx"] = true; });
  EXPECT_NE(msg.find("scale_attn_by_inverse_layer_idx to true"), std::string::npos) << msg;
  msg = gpt_error_after(tmp, [](json& j) { j["n_embd"] = "32"; });
  EXPECT_NE(msg.find("n_embd is \"32\" (valid: an integer in [1, 65536])"), std::string::npos) << msg;

  const std::string dir = tmp / "llama";
  io::save_hf_checkpoint(zoo::llama(small_llama(false)), dir);
  json j = read_config(dir);
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  write_config(dir, j);
  msg = error_message<io::HfCheckpointError>([&] { io::load_hf_checkpoint(dir); });
  EXPECT_NE(msg.find("rope_scaling is {\"factor\":2.0,\"rope_type\":\"dynamic\"} (valid: null, or rope_type default, linear or llama3)"),
            std::string::npos)
      << msg;
  j = read_config(dir);
  j["rope_scaling"] = nullptr;
  j["mlp_bias"] = true;
  write_config(dir, j);
  msg = error_message<io::HfCheckpointError>([&] { io::load_hf_checkpoint(dir); });
  EXPECT_NE(msg.find("mlp_bias to true"), std::string::npos) << msg;
}

// Sizes are bounded, and the files must hold the weights the config implies, before the network
// is allocated: a config of a 2^22-token vocabulary over a small file is refused at once.
TEST(HfCheckpoint, SizesAreCheckedBeforeAllocating) {
  TempDir tmp;
  std::string msg = gpt_error_after(tmp, [](json& j) { j["n_layer"] = 100000; });
  EXPECT_NE(msg.find("n_layer is 100000 (valid: an integer in [1, 1024])"), std::string::npos) << msg;
  const auto start = std::chrono::steady_clock::now();
  msg = gpt_error_after(tmp, [](json& j) {
    j["vocab_size"] = 1 << 22;
    j["n_embd"] = 4096;
    j["n_head"] = 32;
  });
  EXPECT_NE(msg.find("config.json implies"), std::string::npos) << msg;
  EXPECT_NE(msg.find("at least 2 per parameter are needed"), std::string::npos) << msg;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
}

// Shards named by model.safetensors.index.json: loaded as one state; a name leaving the folder
// or a key in another shard than the index says is refused.
TEST(HfCheckpoint, ShardsLoadAndStayInsideTheFolder) {
  TempDir tmp;
  manual_seed(3);
  const zoo::Network net = zoo::llama(small_llama(false));
  const std::string dir = tmp / "llama";
  io::save_hf_checkpoint(net, dir);
  const io::TensorMap state = io::load_safetensors(dir + "/model.safetensors");
  std::filesystem::remove(dir + "/model.safetensors");
  io::TensorMap a, b;
  json map = json::object();
  for (const auto& [k, t] : state) {
    const bool first = k.rfind("model.layers.1.", 0) != 0;
    (first ? a : b)[k] = t;
    map[k] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  io::save_safetensors(dir + "/model-00001-of-00002.safetensors", a, {{"format", "pt"}});
  io::save_safetensors(dir + "/model-00002-of-00002.safetensors", b, {{"format", "pt"}});
  const auto write_index = [&](const json& weight_map) {
    write_file_atomic(dir + "/model.safetensors.index.json", json{{"metadata", json::object()}, {"weight_map", weight_map}}.dump());
  };
  write_index(map);
  const Tensor ids = randint(0, 40, {1, 6});
  EXPECT_TRUE(array_equal(logits(io::load_hf_checkpoint(dir), ids), logits(net, ids)));

  for (const char* escape : {"../model-00001-of-00002.safetensors", "/etc/passwd", "shards/../../x.safetensors"}) {
    json m = map;
    m["model.norm.weight"] = escape;
    write_index(m);
    const std::string msg = error_message<io::HfCheckpointError>([&] { io::load_hf_checkpoint(dir); });
    EXPECT_NE(msg.find(std::string("names the shard '") + escape + "', which is not a file inside the folder"), std::string::npos) << msg;
  }
  json m = map;
  m["model.norm.weight"] = "model-00002-of-00002.safetensors";  // it is in the first
  write_index(m);
  const std::string msg = error_message<io::HfCheckpointError>([&] { io::load_hf_checkpoint(dir); });
  EXPECT_NE(msg.find("'model.norm.weight' in model-00001-of-00002.safetensors (the index says model-00002-of-00002.safetensors)"),
            std::string::npos)
      << msg;
}

// bfloat16 and float16 weights are widened to float32; other dtypes are refused.
TEST(HfCheckpoint, SixteenBitWeightsBecomeFloat32) {
  TempDir tmp;
  manual_seed(4);
  const zoo::Network net = zoo::gpt(small_gpt());
  const std::string dir = tmp / "gpt";
  io::save_hf_checkpoint(net, dir);
  const io::TensorMap state = io::load_safetensors(dir + "/model.safetensors");
  for (DType d : {BFloat16, Float16}) {
    SCOPED_TRACE(dtype_name(d));
    io::TensorMap narrow;
    for (const auto& [k, t] : state) narrow[k] = t.astype(d);
    io::save_safetensors(dir + "/model.safetensors", narrow, {{"format", "pt"}});
    const zoo::Network back = io::load_hf_checkpoint(dir);
    const Tensor w = back.graph.layer("transformer.h.1.attn").state().param("k_weight");
    EXPECT_EQ(w.dtype(), Float32);
    EXPECT_TRUE(array_equal(w, split(narrow.at("transformer.h.1.attn.c_attn.weight"), 3, 1)[1].astype(Float32)));
  }
  io::TensorMap wide = state;
  wide["transformer.ln_f.bias"] = state.at("transformer.ln_f.bias").astype(Float64);
  io::save_safetensors(dir + "/model.safetensors", wide, {{"format", "pt"}});
  const std::string msg = error_message<io::HfCheckpointError>([&] { io::load_hf_checkpoint(dir); });
  EXPECT_NE(msg.find("'transformer.ln_f.bias' in model.safetensors has dtype float64 (valid: float32, bfloat16, float16)"), std::string::npos)
      << msg;
}

// Saved in bfloat16 or float16 and in shards: the files hold the rounded weights, the index names
// every key's shard, config.json names the dtype, and loading gives the rounded weights back as
// float32; saving again as one float32 file leaves no shard or index behind (the loader would
// take the index first).
TEST(HfCheckpoint, SavesSixteenBitWeightsAndShards) {
  TempDir tmp;
  manual_seed(6);
  const zoo::Network net = zoo::llama(small_llama(false));
  const std::string dir = tmp / "llama";
  const Tensor w = net.graph.layer("model.layers.1.mlp").state().param("gate");
  for (DType d : {BFloat16, Float16}) {
    SCOPED_TRACE(dtype_name(d));
    io::save_hf_checkpoint(net, dir, {.dtype = d, .max_shard_bytes = 8000});
    EXPECT_FALSE(std::filesystem::exists(dir + "/model.safetensors"));
    const json index = json::parse(read_file(dir + "/model.safetensors.index.json"));
    std::set<std::string> shards;
    int64_t total = 0;
    for (const auto& [key, file] : index.at("weight_map").items()) {
      shards.insert(file.get<std::string>());
      const io::TensorMap t = io::load_safetensors(dir + "/" + file.get<std::string>());
      ASSERT_TRUE(t.count(key)) << key;
      EXPECT_EQ(t.at(key).dtype(), d) << key;
      total += static_cast<int64_t>(t.at(key).nbytes());
    }
    EXPECT_GE(shards.size(), 3u);
    EXPECT_TRUE(shards.count("model-00001-of-0000" + std::to_string(shards.size()) + ".safetensors"));
    EXPECT_EQ(index.at("metadata").at("total_size").get<int64_t>(), total);
    for (const std::string& f : shards) EXPECT_LE(std::filesystem::file_size(dir + "/" + f), 8000u + 4096u) << f;  // (and its header)
    EXPECT_EQ(read_config(dir).at("torch_dtype"), d == BFloat16 ? "bfloat16" : "float16");
    const zoo::Network back = io::load_hf_checkpoint(dir);
    const Tensor got = back.graph.layer("model.layers.1.mlp").state().param("gate");
    EXPECT_EQ(got.dtype(), Float32);
    EXPECT_TRUE(array_equal(got, w.astype(d).astype(Float32)));
    EXPECT_FALSE(array_equal(got, w));  // (rounded)
  }
  io::save_hf_checkpoint(net, dir);
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_TRUE(e.path().filename() == "model.safetensors" || e.path().filename() == "config.json") << e.path();
  EXPECT_TRUE(array_equal(io::load_hf_checkpoint(dir).graph.layer("model.layers.1.mlp").state().param("gate"), w));
  EXPECT_EQ(read_config(dir).at("torch_dtype"), "float32");
  EXPECT_THROW(io::save_hf_checkpoint(net, dir, {.dtype = Int32}), ValueError);
  EXPECT_THROW(io::save_hf_checkpoint(net, dir, {.max_shard_bytes = -1}), ValueError);
}

TEST(HfCheckpoint, SavingNeedsALanguageModel) {
  TempDir tmp;
  const std::string msg = error_message<ValueError>([&] { io::save_hf_checkpoint(zoo::mlp(4, {8}, 2), tmp / "mlp"); });
  EXPECT_NE(msg.find("was not built by zoo::gpt or zoo::llama"), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(tmp / "mlp"));
}

// Every field of both families' config.json set to values of every JSON type, out of range or
// absurd: each load either succeeds or throws a loom::Error (the config's own HfCheckpointError,
// a weight that no longer fits), never another exception, and never allocates past what the
// files hold (a large vocabulary over a small file is refused before the network is built).
TEST(HfCheckpoint, HostileConfigValuesGiveLoomErrors) {
  TempDir tmp;
  const std::vector<json> values = {json("x"), json(-1), json(0), json(1), json(3), json(1e300), json(int64_t{1} << 62),
                                    json(0.5), json::array(), json::object(), json(true), json(nullptr),
                                    json{{"rope_type", "llama3"}, {"factor", 1e300}}};
  int loaded = 0, refused = 0;
  for (const bool gpt : {true, false}) {
    const std::string dir = tmp / (gpt ? "gpt" : "llama");
    if (gpt) io::save_hf_checkpoint(zoo::gpt(small_gpt()), dir);
    else io::save_hf_checkpoint(zoo::llama(small_llama(false)), dir);
    const json original = read_config(dir);
    for (const auto& [key, unused] : original.items())
      for (const json& v : values) {
        SCOPED_TRACE(key + " = " + v.dump());
        json j = original;
        j[key] = v;
        write_config(dir, j);
        try {
          io::load_hf_checkpoint(dir);
          ++loaded;
        } catch (const Error&) {
          ++refused;
        } catch (const std::exception& e) {
          ADD_FAILURE() << "not a loom::Error: " << e.what();
        }
      }
  }
  EXPECT_GT(refused, 100);
  EXPECT_GT(loaded, 10);  // null (the default) and values that keep the model, such as another epsilon
}

// A path that is no folder is an IOError; a folder of PyTorch pickles only says to save safetensors.
TEST(HfCheckpoint, FoldersWithoutSafetensorsAreNamed) {
  TempDir tmp;
  EXPECT_NE(error_message<IOError>([&] { io::load_hf_checkpoint(tmp / "absent"); }).find("is not a folder"), std::string::npos);
  const std::string dir = tmp / "gpt";
  io::save_hf_checkpoint(zoo::gpt(small_gpt()), dir);
  std::filesystem::rename(dir + "/model.safetensors", dir + "/pytorch_model.bin");
  const std::string msg = error_message<io::HfCheckpointError>([&] { io::load_hf_checkpoint(dir); });
  EXPECT_NE(msg.find("no model.safetensors or model.safetensors.index.json (only PyTorch pickles: save with "
                     "save_pretrained(safe_serialization=True))"),
            std::string::npos)
      << msg;
}

namespace {

// The tensors of a saved folder's model.safetensors, with the names of its I8 ones.
io::TensorMap read_model(const std::string& dir, std::set<std::string>& int8) {
  return io::load_safetensors(dir + "/model.safetensors", nullptr, &int8);
}
void write_model(const std::string& dir, const io::TensorMap& tensors, const std::set<std::string>& int8) {
  io::save_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}}, int8);
}

// Whether the head reads the token table (vocab 40, width 32: (40, 32) rather than (32, 40)).
bool tied(const zoo::Network& net) { return net.graph.layer("lm_head").state().param("weights").dim(0) == 40; }

// The (in, out) matrix of a parameter "<layer>/<name>" ("lm_head/weights": the head's, the token
// table transposed when tied).
Tensor matrix(const zoo::Network& net, const std::string& key) {
  const size_t slash = key.rfind('/');
  Tensor w = net.graph.layer(key.substr(0, slash)).state().param(key.substr(slash + 1));
  return key == "lm_head/weights" && tied(net) ? w.transpose() : w;
}

}  // namespace

// An int8 folder holds each linear map's int8 values (I8, outputs by inputs) and F32 scales, and
// loads them back bit for bit, without quantizing again; saving what was loaded writes the same
// bytes.
TEST(HfCheckpoint, Int8WeightsRoundTripBitForBit) {
  TempDir tmp;
  for (const int64_t group : {int64_t{0}, int64_t{16}}) {
    manual_seed(21);
    for (const zoo::Network& net : {zoo::gpt(small_gpt()), zoo::llama(small_llama(false)), zoo::llama(small_llama(true))}) {
      const std::string dir = tmp / (net.name + std::to_string(group)), again = dir + "_again";
      io::save_hf_checkpoint(net, dir, {.int8 = true, .int8_group = group});
      EXPECT_EQ(read_config(dir)["quantization_config"],
                json({{"quant_method", "loom_int8"}, {"bits", 8}, {"group_size", group}, {"symmetric", true}}));
      std::set<std::string> int8;
      const io::TensorMap file = read_model(dir, int8);
      const std::string attn = net.name == "gpt" ? "transformer.h.1.attn.c_attn.weight" : "model.layers.1.self_attn.q_proj.weight";
      ASSERT_TRUE(int8.count(attn) && int8.count("lm_head.weight")) << net.name;
      const int64_t rows = net.name == "gpt" ? 96 : 32, groups = group == 0 ? 1 : 2;
      EXPECT_EQ(file.at(attn).shape(), (Shape{rows, 32}));
      EXPECT_EQ(file.at(attn + "_scale").shape(), (Shape{rows, groups}));
      EXPECT_EQ(file.at(attn + "_scale").dtype(), Float32);

      const zoo::Network back = io::load_hf_checkpoint(dir);
      const size_t maps = net.name == "gpt" ? 2 * 6 + 1 : 2 * 7 + 1;  // q, k, v, out, two (three) MLP maps per block, the head
      ASSERT_EQ(back.int8.size(), maps) << net.name;
      for (const auto& [key, q] : back.int8) {
        const Tensor w = matrix(net, key);
        const QuantizedMatrix want = quantize_int8(w, group == 0 ? 0 : std::min(group, w.dim(0)));
        EXPECT_TRUE(array_equal(q.values, want.values) && array_equal(q.scales, want.scales)) << net.name << " " << key;
        EXPECT_EQ(q.group, want.group) << key;
        // the graph holds their dequantized copies (a tied head is the float token table)
        if (key != "lm_head/weights" || !tied(net)) EXPECT_TRUE(array_equal(matrix(back, key), dequantize(q))) << key;
      }
      io::save_hf_checkpoint(back, again, {.int8 = true});
      EXPECT_EQ(read_file(again + "/model.safetensors"), read_file(dir + "/model.safetensors")) << net.name;
      // another group cannot be asked of weights already int8
      if (group == 16) EXPECT_THROW(io::save_hf_checkpoint(back, again, {.int8 = true, .int8_group = 8}), ValueError);
    }
  }
}

// What is wrong with an int8 folder is named: a scale missing, misshapen, of another dtype or
// negative, a float weight where int8 is due, a value of -128, int8 without quantization_config,
// a scale with no weight, another quantization method.
TEST(HfCheckpoint, Int8FoldersThatDoNotHoldTogetherAreRefusedByName) {
  TempDir tmp;
  const std::string dir = tmp / "gpt";
  io::save_hf_checkpoint(zoo::gpt(small_gpt()), dir, {.int8 = true});
  std::set<std::string> int8;
  const io::TensorMap good = read_model(dir, int8);
  const json config = read_config(dir);
  const std::string w = "transformer.h.0.mlp.c_fc.weight", s = w + "_scale";
  // the folder after `edit` of its tensors (and int8 names), loaded: the error's message
  const auto error_after = [&](auto edit) {
    io::TensorMap t = good;
    std::set<std::string> names = int8;
    edit(t, names);
    write_model(dir, t, names);
    return error_message<io::HfCheckpointError>([&] { io::load_hf_checkpoint(dir); });
  };
  std::string msg = error_after([&](io::TensorMap& t, std::set<std::string>&) { t.erase(s); });
  EXPECT_NE(msg.find("'" + w + "' has no scales (valid: '" + s + "', F32)"), std::string::npos) << msg;
  msg = error_after([&](io::TensorMap& t, std::set<std::string>&) { t[s] = ones({128, 2}); });
  EXPECT_NE(msg.find("'" + s + "' has the shape (128, 2) (valid: (128, 1)"), std::string::npos) << msg;
  msg = error_after([&](io::TensorMap& t, std::set<std::string>&) { t[s] = t[s].astype(Float16); });
  EXPECT_NE(msg.find("'" + s + "' has the dtype float16 (valid: F32)"), std::string::npos) << msg;
  msg = error_after([&](io::TensorMap& t, std::set<std::string>&) { t[s] = full({128, 1}, -1.0); });
  EXPECT_NE(msg.find("'" + s + "' holds -1"), std::string::npos) << msg;
  msg = error_after([&](io::TensorMap& t, std::set<std::string>& n) {
    n.erase(w);
    t[w] = zeros({32, 128});
  });
  EXPECT_NE(msg.find("'" + w + "' is not int8 (I8)"), std::string::npos) << msg;
  msg = error_after([&](io::TensorMap& t, std::set<std::string>&) { t[w] = zeros({128, 16}, UInt8); });
  EXPECT_NE(msg.find("'" + w + "' has the shape (128, 16) (valid: (128, 32)"), std::string::npos) << msg;
  msg = error_after([&](io::TensorMap& t, std::set<std::string>&) { t[w] = full({128, 32}, 128.0, UInt8); });
  EXPECT_NE(msg.find("'" + w + "' holds -128"), std::string::npos) << msg;
  msg = error_after([&](io::TensorMap& t, std::set<std::string>&) { t["transformer.h.0.ln_1.weight_scale"] = ones({32}); });
  EXPECT_NE(msg.find("'transformer.h.0.ln_1.weight_scale' is a scale without an int8 weight"), std::string::npos) << msg;
  msg = error_after([&](io::TensorMap& t, std::set<std::string>& n) {
    t.erase("lm_head.weight");
    n.erase("lm_head.weight");
  });
  EXPECT_NE(msg.find("there is no 'lm_head.weight'"), std::string::npos) << msg;
  // int8 tensors in a folder that says nothing of int8 (a larger vocabulary: its float table
  // passes the 2 bytes per parameter of a float folder); another method's config
  const std::string wide = tmp / "wide";
  zoo::GptConfig c = small_gpt();
  c.vocab_size = 400;
  io::save_hf_checkpoint(zoo::gpt(c), wide, {.int8 = true});
  json plain = read_config(wide);
  plain.erase("quantization_config");
  write_config(wide, plain);
  msg = error_message<io::HfCheckpointError>([&] { io::load_hf_checkpoint(wide); });
  EXPECT_NE(msg.find("is int8 (I8) but config.json has no quantization_config"), std::string::npos) << msg;
  write_model(dir, good, int8);
  json gptq = config;
  gptq["quantization_config"]["quant_method"] = "gptq";
  write_config(dir, gptq);
  msg = error_message<io::HfCheckpointError>([&] { io::load_hf_checkpoint(dir); });
  EXPECT_NE(msg.find("quant_method \"gptq\" (valid: {\"quant_method\": \"loom_int8\""), std::string::npos) << msg;
  write_config(dir, config);
  EXPECT_NO_THROW(io::load_hf_checkpoint(dir));
}
