#include "loom/io/hf_checkpoint.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <type_traits>
#include <utility>
#include <variant>

#include "core/json_util.h"
#include "io/hf_int8.h"
#include "loom/core/file.h"
#include "loom/io/model_file.h"
#include "loom/io/safetensors.h"
#include "loom/ops/elementwise.h"

namespace loom::io {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Bounds on config.json's sizes, checked before anything is allocated: each well above the
// released models of both families (Llama 3's 128,256 tokens, 16,384 units, 126 layers, 53,248
// MLP units), so that only a hostile or broken config meets them.
constexpr int64_t kMaxVocab = int64_t{1} << 22;
constexpr int64_t kMaxWidth = int64_t{1} << 16;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxInner = int64_t{1} << 18;
constexpr int64_t kMaxPositions = int64_t{1} << 24;
constexpr uint64_t kMaxConfigBytes = uint64_t{1} << 20;  // config.json
constexpr uint64_t kMaxIndexBytes = uint64_t{64} << 20;  // model.safetensors.index.json (a key per tensor)

[[noreturn]] void fail(const std::string& dir, const std::string& what) {
  throw HfCheckpointError("load_hf_checkpoint: '" + dir + "': " + what);
}

// A small JSON file of the folder, its size bounded before it is read.
json read_json(const std::string& dir, const std::string& name, uint64_t most) {
  const std::string path = (fs::path(dir) / name).string();
  {
    const RegularFile f(path, "load_hf_checkpoint");
    if (f.size() > most)
      fail(dir, name + " has " + std::to_string(f.size()) + " bytes (valid: at most " + std::to_string(most) + ")");
  }
  std::string error;
  std::optional<json> j = detail::parse_json(read_file(path), &error);
  if (!j) fail(dir, name + " is not valid JSON: " + error);
  if (!j->is_object()) fail(dir, name + " is not a JSON object");
  return *j;
}

// config.json's fields, each read with its type and range checked; an absent (or null) field
// keeps transformers' default.
struct ConfigReader {
  const std::string& dir;
  const json& j;
  bool has(const char* key) const { return j.contains(key) && !j.at(key).is_null(); }
  int64_t integer(const char* key, int64_t fallback, int64_t lo, int64_t hi) const {
    if (!has(key)) return fallback;
    const std::optional<int64_t> v = detail::json_to_int(j.at(key), lo, hi);
    if (!v)
      fail(dir, std::string("config.json's ") + key + " is " + j.at(key).dump() + " (valid: an integer in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "])");
    return *v;
  }
  double number(const char* key, double fallback, double lo, double hi) const { return number_in(j, key, fallback, lo, hi, ""); }
  double number_in(const json& o, const char* key, double fallback, double lo, double hi, const std::string& where) const {
    if (!o.contains(key) || o.at(key).is_null()) return fallback;
    const std::optional<double> v = o.at(key).is_number() ? detail::json_to_float(o.at(key)) : std::nullopt;
    if (!v || !(*v >= lo && *v <= hi))
      fail(dir, "config.json's " + where + key + " is " + o.at(key).dump() + " (valid: a number in [" + detail::json_float_text(lo) + ", " +
                    detail::json_float_text(hi) + "])");
    return *v;
  }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j.at(key).is_boolean()) fail(dir, std::string("config.json's ") + key + " is " + j.at(key).dump() + " (valid: true or false)");
    return j.at(key).get<bool>();
  }
  std::string text(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j.at(key).is_string()) fail(dir, std::string("config.json's ") + key + " is " + j.at(key).dump() + " (valid: a string)");
    return j.at(key).get<std::string>();
  }
  // a setting that changes the model's arithmetic in a way Loom's graph does not: only its default
  void only(const char* key, bool expected, const char* why) const {
    if (boolean(key, expected) != expected)
      fail(dir, std::string("config.json sets ") + key + " to " + (expected ? "false" : "true") + ", which Loom's " + why + " (valid: " +
                    (expected ? "true" : "false") + ")");
  }
};

zoo::GptConfig read_gpt(const ConfigReader& r) {
  zoo::GptConfig c;
  c.vocab_size = r.integer("vocab_size", c.vocab_size, 1, kMaxVocab);
  c.n_positions = r.integer("n_positions", c.n_positions, 1, kMaxPositions);
  c.n_embd = r.integer("n_embd", c.n_embd, 1, kMaxWidth);
  c.n_layer = r.integer("n_layer", c.n_layer, 1, kMaxLayers);
  c.n_head = r.integer("n_head", c.n_head, 1, kMaxHeads);
  c.n_inner = r.integer("n_inner", 0, 1, kMaxInner);
  c.activation_function = r.text("activation_function", c.activation_function);
  c.layer_norm_epsilon = r.number("layer_norm_epsilon", c.layer_norm_epsilon, 0, 1);
  c.initializer_range = r.number("initializer_range", c.initializer_range, 0, 1e3);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", c.tie_word_embeddings);
  r.only("scale_attn_weights", true, "attention always scales by 1/sqrt(head size)");
  r.only("scale_attn_by_inverse_layer_idx", false, "attention does not scale by the layer's index");
  r.only("add_cross_attention", false, "decoder has no cross-attention");
  if (c.n_embd % c.n_head != 0)
    fail(r.dir, "config.json's n_embd " + std::to_string(c.n_embd) + " is not a multiple of n_head " + std::to_string(c.n_head));
  return c;
}

zoo::LlamaConfig read_llama(const ConfigReader& r) {
  zoo::LlamaConfig c;
  c.vocab_size = r.integer("vocab_size", c.vocab_size, 1, kMaxVocab);
  c.hidden_size = r.integer("hidden_size", c.hidden_size, 1, kMaxWidth);
  c.intermediate_size = r.integer("intermediate_size", c.intermediate_size, 1, kMaxInner);
  c.num_hidden_layers = r.integer("num_hidden_layers", c.num_hidden_layers, 1, kMaxLayers);
  c.num_attention_heads = r.integer("num_attention_heads", c.num_attention_heads, 1, kMaxHeads);
  c.num_key_value_heads = r.integer("num_key_value_heads", c.num_attention_heads, 1, kMaxHeads);
  c.max_position_embeddings = r.integer("max_position_embeddings", c.max_position_embeddings, 1, kMaxPositions);
  c.rms_norm_eps = r.number("rms_norm_eps", c.rms_norm_eps, 0, 1);
  c.initializer_range = r.number("initializer_range", c.initializer_range, 0, 1e3);
  c.rope.base = r.number("rope_theta", c.rope.base, 1, 1e12);
  c.attention_bias = r.boolean("attention_bias", c.attention_bias);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", c.tie_word_embeddings);
  r.only("mlp_bias", false, "SwiGLU has no biases");
  const std::string act = r.text("hidden_act", "silu");
  if (act != "silu") fail(r.dir, "config.json's hidden_act is '" + act + "' (valid: silu, Llama's SwiGLU)");
  const int64_t heads = c.num_attention_heads, kv = c.num_key_value_heads;
  if (c.hidden_size % heads != 0)
    fail(r.dir, "config.json's hidden_size " + std::to_string(c.hidden_size) + " is not a multiple of num_attention_heads " + std::to_string(heads));
  if (r.has("head_dim") && r.integer("head_dim", 0, 1, kMaxWidth) != c.hidden_size / heads)
    fail(r.dir, "config.json's head_dim " + r.j.at("head_dim").dump() + " differs from hidden_size / num_attention_heads " +
                    std::to_string(c.hidden_size / heads) + " (valid: equal)");
  if (kv > heads || heads % kv != 0)
    fail(r.dir, "config.json's num_key_value_heads " + std::to_string(kv) + " does not divide num_attention_heads " + std::to_string(heads));
  if ((c.hidden_size / heads) % 2 != 0)
    fail(r.dir, "the head size " + std::to_string(c.hidden_size / heads) + " is odd (valid: even, for the rotary embedding)");
  if (r.has("rope_scaling")) {
    const json& s = r.j.at("rope_scaling");
    if (!s.is_object()) fail(r.dir, "config.json's rope_scaling is " + s.dump() + " (valid: null or an object)");
    // transformers reads "rope_type", and "type" from configs written before it
    const json* type = s.contains("rope_type") ? &s.at("rope_type") : s.contains("type") ? &s.at("type") : nullptr;
    const std::string t = type && type->is_string() ? type->get<std::string>() : "";
    if (t == "linear") {
      c.rope.linear_factor = r.number_in(s, "factor", 0, 1, 1e6, "rope_scaling.");
      if (!s.contains("factor")) fail(r.dir, "config.json's rope_scaling of type linear has no factor");
    } else if (t == "llama3") {
      for (const char* k : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
        if (!s.contains(k)) fail(r.dir, std::string("config.json's rope_scaling of type llama3 has no ") + k);
      c.rope.llama3_factor = r.number_in(s, "factor", 0, 1, 1e6, "rope_scaling.");
      c.rope.low_freq_factor = r.number_in(s, "low_freq_factor", 0, 1e-6, 1e6, "rope_scaling.");
      c.rope.high_freq_factor = r.number_in(s, "high_freq_factor", 0, 1e-6, 1e6, "rope_scaling.");
      const std::optional<int64_t> o = detail::json_to_int(s.at("original_max_position_embeddings"), 1, kMaxPositions);
      if (!o) fail(r.dir, "config.json's rope_scaling.original_max_position_embeddings is " + s.at("original_max_position_embeddings").dump() +
                              " (valid: an integer in [1, " + std::to_string(kMaxPositions) + "])");
      c.rope.original_max_positions = *o;
      if (!(c.rope.high_freq_factor > c.rope.low_freq_factor))
        fail(r.dir, "config.json's rope_scaling has high_freq_factor not above low_freq_factor");
    } else if (t != "default") {
      fail(r.dir, "config.json's rope_scaling is " + s.dump() + " (valid: null, or rope_type default, linear or llama3)");
    }
  }
  return c;
}

// The parameters a config implies, counted as the zoo builds them (the files must hold at
// least two bytes for each: bfloat16), before the network is allocated.
int64_t parameter_count(const zoo::GptConfig& c) {
  const int64_t e = c.n_embd, inner = c.n_inner > 0 ? c.n_inner : 4 * e;
  const int64_t block = 2 * e + (3 * e * e + 3 * e) + (e * e + e) + 2 * e + (e * inner + inner) + (inner * e + e);
  return c.vocab_size * e * (c.tie_word_embeddings ? 1 : 2) + c.n_positions * e + c.n_layer * block + 2 * e;
}
int64_t parameter_count(const zoo::LlamaConfig& c) {
  const int64_t h = c.hidden_size, kv = h / c.num_attention_heads * c.num_key_value_heads;
  const int64_t attention = 2 * h * h + 2 * h * kv + (c.attention_bias ? 2 * h + 2 * kv : 0);
  const int64_t block = 2 * h + attention + 3 * h * c.intermediate_size;
  return c.vocab_size * h * (c.tie_word_embeddings ? 1 : 2) + c.num_hidden_layers * block + h;
}

// Whether a file is there; a folder that cannot be read (permissions) reads as absent, and the
// read that follows names the reason, as an IOError rather than std::filesystem's exception.
bool present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

// A shard's name from the index: a file of the folder, never a path out of it.
void check_shard_name(const std::string& dir, const std::string& name) {
  const fs::path p(name);
  bool escapes = name.empty() || p.is_absolute() || p.has_root_path() || name.find('\0') != std::string::npos;
  for (const fs::path& part : p) escapes = escapes || part == "..";
  if (escapes)
    fail(dir, "model.safetensors.index.json names the shard '" + name +
                  "', which is not a file inside the folder (valid: a relative path without '..')");
}

// config.json's quantization_config: absent for float weights, else Loom's int8 (hf_int8.h) and
// its group (0: one scale per output).
struct Quantization {
  bool int8 = false;
  int64_t group = 0;
};

Quantization read_quantization(const ConfigReader& r) {
  if (!r.has("quantization_config")) return {};
  const json& q = r.j.at("quantization_config");
  const std::string valid = std::string(" (valid: {\"quant_method\": \"") + int8_files::kInt8QuantMethod +
                            "\", \"bits\": 8, \"group_size\": 0 or more}, as save_hf_checkpoint writes it with int8)";
  if (!q.is_object()) fail(r.dir, "config.json's quantization_config is " + q.dump() + valid);
  if (!q.contains("quant_method") || q.at("quant_method") != int8_files::kInt8QuantMethod)
    fail(r.dir, "config.json's quantization_config has quant_method " + (q.contains("quant_method") ? q.at("quant_method").dump() : "absent") +
                valid);
  if (!q.contains("bits") || detail::json_to_int(q.at("bits"), 8, 8) != 8)
    fail(r.dir, "config.json's quantization_config has bits " + (q.contains("bits") ? q.at("bits").dump() : "absent") + valid);
  const std::optional<int64_t> g = q.contains("group_size") ? detail::json_to_int(q.at("group_size"), 0, kMaxInner) : std::nullopt;
  if (!g) fail(r.dir, "config.json's quantization_config has group_size " + (q.contains("group_size") ? q.at("group_size").dump() : "absent") + valid);
  if (q.contains("symmetric") && q.at("symmetric") != true)
    fail(r.dir, "config.json's quantization_config has symmetric " + q.at("symmetric").dump() + valid);
  return {true, *g};
}

// The folder's weights by key: model.safetensors, or the shards the index names (each key in
// the shard the index says, no shard holding keys the index does not list), converted to float32
// but for int8 ones (kept as their bytes, their keys in *int8) and their scales (kept as they are,
// for take_int8_weights to check). The files must hold `min_bytes` per parameter (2: bfloat16;
// 1: int8).
TensorMap read_weights(const std::string& dir, int64_t parameters, uint64_t min_bytes, std::set<std::string>& int8) {
  const fs::path folder(dir);
  std::vector<std::string> files;
  std::map<std::string, std::string> shard_of;  // key -> shard, from the index
  if (present(folder / "model.safetensors.index.json")) {
    const json index = read_json(dir, "model.safetensors.index.json", kMaxIndexBytes);
    if (!index.contains("weight_map") || !index.at("weight_map").is_object())
      fail(dir, "model.safetensors.index.json has no weight_map object");
    std::set<std::string> seen;
    for (const auto& [key, shard] : index.at("weight_map").items()) {
      if (!shard.is_string()) fail(dir, "model.safetensors.index.json maps '" + key + "' to " + shard.dump() + " (valid: a file name)");
      const std::string name = shard.get<std::string>();
      check_shard_name(dir, name);
      shard_of[key] = name;
      if (seen.insert(name).second) files.push_back(name);
    }
    if (files.empty()) fail(dir, "model.safetensors.index.json's weight_map is empty");
  } else if (present(folder / "model.safetensors")) {
    files.push_back("model.safetensors");
  } else {
    const bool pickle = present(folder / "pytorch_model.bin") || present(folder / "pytorch_model.bin.index.json");
    fail(dir, std::string("no model.safetensors or model.safetensors.index.json") +
                  (pickle ? " (only PyTorch pickles: save with save_pretrained(safe_serialization=True))" : ""));
  }
  // the data the config implies must be there before the network is allocated for it
  uint64_t bytes = 0;
  for (const std::string& f : files) {
    const std::string path = (folder / f).string();
    bytes += RegularFile(path, "load_hf_checkpoint").size();
  }
  if (bytes / min_bytes < static_cast<uint64_t>(parameters))
    fail(dir, "config.json implies " + std::to_string(parameters) + " parameters but the weight files hold " + std::to_string(bytes) +
                  " bytes (at least " + std::to_string(min_bytes) + " per parameter are needed)");

  TensorMap out;
  std::vector<std::string> misplaced;
  for (const std::string& f : files) {
    std::set<std::string> int8_here;
    for (auto& [key, t] : load_safetensors((folder / f).string(), nullptr, &int8_here)) {
      if (!shard_of.empty()) {
        auto it = shard_of.find(key);
        if (it == shard_of.end() || it->second != f) {
          misplaced.push_back("'" + key + "' in " + f + (it == shard_of.end() ? " (not in the index)" : " (the index says " + it->second + ")"));
          continue;
        }
      }
      const bool raw = int8_here.count(key) || key.ends_with(int8_files::kScaleSuffix);
      if (int8_here.count(key)) int8.insert(key);
      else if (t.dtype() != Float32 && t.dtype() != BFloat16 && t.dtype() != Float16)
        fail(dir, "'" + key + "' in " + f + " has dtype " + dtype_name(t.dtype()) + " (valid: float32, bfloat16, float16)");
      if (!out.emplace(key, raw || t.dtype() == Float32 ? t : t.astype(Float32)).second) fail(dir, "'" + key + "' is in two shards");
    }
  }
  for (const auto& [key, shard] : shard_of)
    if (!out.count(key)) misplaced.push_back("'" + key + "' is not in " + shard + ", where the index puts it");
  if (!misplaced.empty()) {
    std::string s;
    for (size_t i = 0; i < misplaced.size() && i < 12; ++i) s += "\n  - " + misplaced[i];
    if (misplaced.size() > 12) s += "\n  - ... (" + std::to_string(misplaced.size()) + " in all)";
    fail(dir, "the shards do not match model.safetensors.index.json:" + s);
  }
  return out;
}

// Keys as the base model saves them (GPT2Model's "h.0...", LlamaModel's "layers.0..."), as
// transformers' from_pretrained accepts them, given the causal LM's prefix.
TensorMap with_prefix(TensorMap state, const std::string& prefix) {
  bool bare = true;
  for (const auto& [k, t] : state) bare = bare && k.rfind(prefix, 0) != 0;
  if (!bare) return state;
  TensorMap out;
  for (auto& [k, t] : state) out.emplace(k == "lm_head.weight" ? k : prefix + k, t);
  return out;
}

json gpt_json(const zoo::GptConfig& c) {
  json j = {{"model_type", "gpt2"},
            {"architectures", {"GPT2LMHeadModel"}},
            {"vocab_size", c.vocab_size},
            {"n_positions", c.n_positions},
            {"n_embd", c.n_embd},
            {"n_layer", c.n_layer},
            {"n_head", c.n_head},
            {"n_inner", c.n_inner > 0 ? json(c.n_inner) : json(nullptr)},
            {"activation_function", c.activation_function},
            {"layer_norm_epsilon", c.layer_norm_epsilon},
            {"initializer_range", c.initializer_range},
            {"scale_attn_weights", true},
            {"tie_word_embeddings", c.tie_word_embeddings},
            {"torch_dtype", "float32"}};
  return j;
}

json llama_json(const zoo::LlamaConfig& c) {
  json scaling = nullptr;
  if (c.rope.llama3_factor > 0)
    scaling = {{"rope_type", "llama3"},
               {"factor", c.rope.llama3_factor},
               {"low_freq_factor", c.rope.low_freq_factor},
               {"high_freq_factor", c.rope.high_freq_factor},
               {"original_max_position_embeddings", c.rope.original_max_positions}};
  else if (c.rope.linear_factor != 1.0)
    scaling = {{"rope_type", "linear"}, {"factor", c.rope.linear_factor}};
  json j = {{"model_type", "llama"},
            {"architectures", {"LlamaForCausalLM"}},
            {"vocab_size", c.vocab_size},
            {"hidden_size", c.hidden_size},
            {"intermediate_size", c.intermediate_size},
            {"num_hidden_layers", c.num_hidden_layers},
            {"num_attention_heads", c.num_attention_heads},
            {"num_key_value_heads", c.num_key_value_heads > 0 ? c.num_key_value_heads : c.num_attention_heads},
            {"max_position_embeddings", c.max_position_embeddings},
            {"rms_norm_eps", c.rms_norm_eps},
            {"rope_theta", c.rope.base},
            {"rope_scaling", scaling},
            {"attention_bias", c.attention_bias},
            {"mlp_bias", false},
            {"hidden_act", "silu"},
            {"tie_word_embeddings", c.tie_word_embeddings},
            {"initializer_range", c.initializer_range},
            {"torch_dtype", "float32"}};
  return j;
}

}  // namespace

TorchMap hf_torch_map(const zoo::Network& network) {
  TorchMap map;
  auto same = [&](const std::string& torch, const std::string& loom) { map.rules.push_back({torch, loom, TorchLayout::Same}); };
  auto transposed = [&](const std::string& torch, const std::string& loom) { map.rules.push_back({torch, loom, TorchLayout::Transpose}); };
  if (const auto* c = std::get_if<zoo::GptConfig>(&network.config)) {
    same("transformer.wte.weight", "transformer.wte/weights");
    same("transformer.wpe.weight", "transformer.wpe/weights");
    for (int64_t i = 0; i < c->n_layer; ++i) {
      const std::string p = "transformer.h." + std::to_string(i);
      for (const char* ln : {".ln_1", ".ln_2"})
        for (const char* t : {"weight", "bias"}) same(p + ln + "." + t, p + ln + "/" + t);
      // c_attn is a Conv1D (in, 3 * out): q, k and v side by side in its columns (and its bias)
      const std::string a = p + ".attn/";
      map.rules.push_back(TorchRule(p + ".attn.c_attn.weight", {a + "q_weight", a + "k_weight", a + "v_weight"}, 1));
      map.rules.push_back(TorchRule(p + ".attn.c_attn.bias", {a + "q_bias", a + "k_bias", a + "v_bias"}, 0));
      same(p + ".attn.c_proj.weight", a + "out_weight");
      same(p + ".attn.c_proj.bias", a + "out_bias");
      for (const char* fc : {".mlp.c_fc", ".mlp.c_proj"}) {
        same(p + fc + ".weight", p + fc + "/weights");  // Conv1D: (in, out), as Loom's Linear
        same(p + fc + ".bias", p + fc + "/bias");
      }
    }
    same("transformer.ln_f.weight", "transformer.ln_f/weight");
    same("transformer.ln_f.bias", "transformer.ln_f/bias");
    // a tied head is wte (saved by some writers all the same); the causal mask buffers of older files
    if (c->tie_word_embeddings) map.ignore.push_back("lm_head.weight");
    else transposed("lm_head.weight", "lm_head/weights");
    map.ignore.push_back("transformer.h.{i}.attn.bias");
    map.ignore.push_back("transformer.h.{i}.attn.masked_bias");
    return map;
  }
  if (const auto* c = std::get_if<zoo::LlamaConfig>(&network.config)) {
    same("model.embed_tokens.weight", "model.embed_tokens/weights");
    for (int64_t i = 0; i < c->num_hidden_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i);
      same(p + ".input_layernorm.weight", p + ".input_layernorm/weight");
      same(p + ".post_attention_layernorm.weight", p + ".post_attention_layernorm/weight");
      for (const auto& [hf, loom] : {std::pair{"q_proj", "q"}, {"k_proj", "k"}, {"v_proj", "v"}, {"o_proj", "out"}}) {
        transposed(p + ".self_attn." + hf + ".weight", p + ".self_attn/" + loom + "_weight");
        if (c->attention_bias) same(p + ".self_attn." + hf + ".bias", p + ".self_attn/" + loom + "_bias");
      }
      for (const char* m : {"gate", "up", "down"}) transposed(p + ".mlp." + m + "_proj.weight", p + ".mlp/" + m);
    }
    same("model.norm.weight", "model.norm/weight");
    if (c->tie_word_embeddings) map.ignore.push_back("lm_head.weight");  // embed_tokens, if written anyway
    else transposed("lm_head.weight", "lm_head/weights");
    map.ignore.push_back("model.layers.{i}.self_attn.rotary_emb.inv_freq");  // a buffer of older files, recomputed
    return map;
  }
  throw ValueError("hf_torch_map: the network '" + network.name + "' was not built by zoo::gpt or zoo::llama (it has no such config)");
}

namespace {

// The network of `config` with the folder's weights: int8 ones kept as such (net.int8) and their
// dequantized copies in the graph.
template <class Config>
zoo::Network load_network(const std::string& dir, const ConfigReader& r, const Config& c, const char* prefix) {
  const Quantization q = read_quantization(r);
  std::set<std::string> int8;
  TensorMap state = read_weights(dir, parameter_count(c), q.int8 ? 1 : 2, int8);
  zoo::Network net;
  if constexpr (std::is_same_v<Config, zoo::GptConfig>) net = zoo::gpt(c);
  else net = zoo::llama(c);
  state = with_prefix(std::move(state), prefix);
  std::set<std::string> int8_keys;  // as with_prefix named them
  for (const std::string& k : int8) int8_keys.insert(state.count(k) || k == "lm_head.weight" ? k : prefix + k);
  int8_files::take_int8_weights(dir, net, q.int8, q.group, state, int8_keys);
  try {
    load_torch_state(net.graph, state, hf_torch_map(net), "'" + dir + "'");
  } catch (const ValueError& e) {
    throw HfCheckpointError(e.what());
  }
  return net;
}

}  // namespace

zoo::Network load_hf_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw IOError("load_hf_checkpoint: '" + dir + "' is not a folder");
  const json j = read_json(dir, "config.json", kMaxConfigBytes);
  const ConfigReader r{dir, j};
  const std::string type = r.text("model_type", "");
  if (type == "gpt2") return load_network(dir, r, read_gpt(r), "transformer.");
  if (type == "llama") return load_network(dir, r, read_llama(r), "model.");
  fail(dir, "config.json's model_type is " + (j.contains("model_type") ? j.at("model_type").dump() : std::string("absent")) +
                " (valid: gpt2, llama)");
}

namespace {

// Removes the shards (model-*.safetensors) of `folder` not named in `keep`: those of an earlier
// checkpoint, split otherwise or not at all now.
void remove_other_shards(const fs::path& folder, const std::set<std::string>& keep) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string f = entry.path().filename().string();
    if (f.rfind("model-", 0) == 0 && f.size() > 12 && f.compare(f.size() - 12, 12, ".safetensors") == 0 && !keep.count(f))
      stale.push_back(entry.path());
  }
  for (const fs::path& p : stale) fs::remove(p, ec);
}

// The weights into dir: one model.safetensors (max_shard_bytes 0), or shards of at most
// max_shard_bytes of tensors each, in the state's order, and their index; then the files of the
// other layout, left by an earlier checkpoint, removed (the loader prefers an index).
void write_weights(const std::string& dir, const TensorMap& state, const std::set<std::string>& int8, int64_t max_shard_bytes) {
  const fs::path folder(dir);
  // transformers refuses safetensors files whose metadata lacks format "pt"
  const Metadata pt{{"format", "pt"}};
  std::error_code ec;
  if (max_shard_bytes == 0) {
    save_safetensors((folder / "model.safetensors").string(), state, pt, int8);
    fs::remove(folder / "model.safetensors.index.json", ec);
    remove_other_shards(folder, {});
    return;
  }
  std::vector<TensorMap> shards(1);
  int64_t in_last = 0, total = 0;
  for (const auto& [key, t] : state) {
    const int64_t bytes = static_cast<int64_t>(t.nbytes());
    if (in_last > 0 && in_last + bytes > max_shard_bytes) {
      shards.emplace_back();
      in_last = 0;
    }
    shards.back().emplace(key, t);
    in_last += bytes;
    total += bytes;
  }
  json weight_map = json::object();
  std::set<std::string> names;
  const auto name = [&](size_t i) {
    char b[64];
    std::snprintf(b, sizeof b, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    return std::string(b);
  };
  for (size_t i = 0; i < shards.size(); ++i) {
    std::set<std::string> shard_int8;
    for (const auto& [key, t] : shards[i]) {
      if (int8.count(key)) shard_int8.insert(key);
      weight_map[key] = name(i);
    }
    names.insert(name(i));
    save_safetensors((folder / name(i)).string(), shards[i], pt, shard_int8);
  }
  write_file_atomic((folder / "model.safetensors.index.json").string(),
                    json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) + "\n");
  fs::remove(folder / "model.safetensors", ec);
  remove_other_shards(folder, names);
}

}  // namespace

void save_hf_checkpoint(const zoo::Network& network, const std::string& dir, const HfSaveOptions& options) {
  json config;
  if (const auto* c = std::get_if<zoo::GptConfig>(&network.config)) config = gpt_json(*c);
  else if (const auto* c = std::get_if<zoo::LlamaConfig>(&network.config)) config = llama_json(*c);
  else throw ValueError("save_hf_checkpoint: the network '" + network.name + "' was not built by zoo::gpt or zoo::llama (it has no such config)");
  if (options.int8_group < 0)
    throw ValueError("save_hf_checkpoint: int8_group " + std::to_string(options.int8_group) + " (valid: 0 for one scale per output, or >= 1)");
  const char* dtype_name = options.dtype == DType::Float32 ? "float32" : options.dtype == DType::BFloat16 ? "bfloat16"
                                                           : options.dtype == DType::Float16 ? "float16" : nullptr;
  if (!dtype_name)
    throw ValueError(std::string("save_hf_checkpoint: dtype ") + loom::dtype_name(options.dtype) + " (valid: float32, bfloat16, float16)");
  if (options.max_shard_bytes < 0)
    throw ValueError("save_hf_checkpoint: max_shard_bytes " + std::to_string(options.max_shard_bytes) + " (valid: 0 for one file, or more)");
  TensorMap state = torch_state_from_graph(network.graph, hf_torch_map(network));
  std::set<std::string> int8;
  if (options.int8) {
    const int64_t group = int8_files::put_int8_weights(network, options.int8_group, state, int8);
    config["quantization_config"] = {{"quant_method", int8_files::kInt8QuantMethod}, {"bits", 8}, {"group_size", group}, {"symmetric", true}};
  }
  if (options.dtype != DType::Float32) {
    for (auto& [key, t] : state)
      if (!int8.count(key) && !(options.int8 && key.size() > 6 && key.compare(key.size() - 6, 6, "_scale") == 0) && is_floating(t.dtype()))
        t = astype(t, options.dtype);
    config["torch_dtype"] = dtype_name;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IOError("save_hf_checkpoint: cannot make the folder '" + dir + "': " + ec.message());
  write_weights(dir, state, int8, options.max_shard_bytes);
  write_file_atomic((fs::path(dir) / "config.json").string(), config.dump(2) + "\n");
}

}  // namespace loom::io
