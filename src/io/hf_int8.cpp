#include "io/hf_int8.h"

#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include "loom/core/error.h"
#include "loom/io/hf_checkpoint.h"
#include "loom/nn/linear.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/quantized.h"

namespace loom::io::int8_files {

namespace {

// A linear map of the model as an int8 checkpoint holds it: the key of its weight, the Loom
// (in, out) matrices it stands for, side by side along the outputs (GPT-2's c_attn: q, k and v),
// and whether the float checkpoint stores it (out, in) (nn.Linear's) rather than (in, out)
// (GPT-2's Conv1D). Its int8 form is (out, in) either way: a row of values per output.
struct Int8Map {
  std::string torch;
  std::vector<std::string> loom;
  bool out_in = false;
};

std::vector<Int8Map> int8_maps(const zoo::Network& net) {
  std::vector<Int8Map> maps;
  if (const auto* c = std::get_if<zoo::GptConfig>(&net.config)) {
    for (int64_t i = 0; i < c->n_layer; ++i) {
      const std::string p = "transformer.h." + std::to_string(i), a = p + ".attn/";
      maps.push_back({p + ".attn.c_attn.weight", {a + "q_weight", a + "k_weight", a + "v_weight"}});
      maps.push_back({p + ".attn.c_proj.weight", {a + "out_weight"}});
      maps.push_back({p + ".mlp.c_fc.weight", {p + ".mlp.c_fc/weights"}});
      maps.push_back({p + ".mlp.c_proj.weight", {p + ".mlp.c_proj/weights"}});
    }
  } else if (const auto* c = std::get_if<zoo::LlamaConfig>(&net.config)) {
    for (int64_t i = 0; i < c->num_hidden_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i);
      for (const auto& [hf, loom] : {std::pair{"q_proj", "q"}, {"k_proj", "k"}, {"v_proj", "v"}, {"o_proj", "out"}})
        maps.push_back({p + ".self_attn." + hf + ".weight", {p + ".self_attn/" + loom + "_weight"}, true});
      for (const char* m : {"gate", "up", "down"}) maps.push_back({p + ".mlp." + m + "_proj.weight", {p + ".mlp/" + m}, true});
    }
  } else {
    throw ValueError("save_hf_checkpoint: the network '" + net.name + "' was not built by zoo::gpt or zoo::llama (it has no such config)");
  }
  maps.push_back({"lm_head.weight", {"lm_head/weights"}, true});
  return maps;
}

// The network's (in, out) float matrix a Loom key names; the head's is the embedding's table
// transposed when tied (the matrix the cached decoder multiplies by).
Tensor loom_matrix(const zoo::Network& net, const std::string& key) {
  const size_t slash = key.rfind('/');
  const nn::Layer& layer = net.graph.layer(key.substr(0, slash));
  Tensor w = layer.state().param(key.substr(slash + 1));
  const auto* linear = nn::attributes_of<nn::LinearAttributes>(layer);
  return linear && linear->transpose_weights ? w.transpose() : w;
}

// The inputs per scale of a (K, N) matrix quantized per group of `group` (0: all K).
int64_t group_of(int64_t group, int64_t k) { return group == 0 ? k : std::min(group, k); }

// The group config.json records for the network's own int8 forms (0 when each has one scale per
// output), checked to be one for all of them.
int64_t carried_group(const zoo::Network& net) {
  int64_t group = 0;
  for (const auto& [key, q] : net.int8)
    if (q.group != q.in_features()) {
      if (group != 0 && group != q.group)
        throw ValueError("save_hf_checkpoint: the network's int8 weights mix groups of " + std::to_string(group) + " and " +
                         std::to_string(q.group) + " inputs ('" + key + "'; valid: one group for all)");
      group = q.group;
    }
  for (const auto& [key, q] : net.int8)
    if (q.group != group_of(group, q.in_features()))
      throw ValueError("save_hf_checkpoint: the network's int8 '" + key + "' is per group of " + std::to_string(q.group) +
                       " inputs, the others per " + std::to_string(group) + " (valid: one group for all)");
  return group;
}

QuantizedMatrix int8_of(const zoo::Network& net, const std::string& key, int64_t group) {
  if (net.int8.empty()) {
    const Tensor w = loom_matrix(net, key);
    return quantize_int8(w, group_of(group, w.dim(0)));
  }
  const auto it = net.int8.find(key);
  if (it == net.int8.end()) throw ValueError("save_hf_checkpoint: the network has int8 weights but none for '" + key + "'");
  return it->second;
}

[[noreturn]] void fail(const std::string& dir, const std::string& what) {
  throw HfCheckpointError("load_hf_checkpoint: '" + dir + "': " + what);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The int8 values (N, K) and scales (N, G) of one map, checked: shapes, no -128 (quantize_int8
// makes -127..127, and the kernels assume it), scales finite and not negative.
void check_int8(const std::string& dir, const std::string& key, const Tensor& values, const Tensor& scales, int64_t n, int64_t k,
                int64_t groups) {
  if (values.shape() != Shape{n, k})
    fail(dir, "'" + key + "' has the shape " + shape_str(values.shape()) + " (valid: " + shape_str({n, k}) + ", outputs by inputs)");
  if (scales.shape() != Shape{n, groups})
    fail(dir, "'" + key + kScaleSuffix + "' has the shape " + shape_str(scales.shape()) + " (valid: " + shape_str({n, groups}) +
                  ", outputs by groups of inputs)");
  const auto* v = static_cast<const uint8_t*>(values.data_ptr());
  for (int64_t i = 0; i < values.numel(); ++i)
    if (v[i] == 0x80) fail(dir, "'" + key + "' holds -128 at element " + std::to_string(i) + " (valid: -127 to 127, symmetric)");
  const auto* s = static_cast<const float*>(scales.data_ptr());
  for (int64_t i = 0; i < scales.numel(); ++i)
    if (!std::isfinite(s[i]) || s[i] < 0)
      fail(dir, "'" + key + kScaleSuffix + "' holds " + std::to_string(s[i]) + " at element " + std::to_string(i) +
                    " (valid: finite, >= 0)");
}

}  // namespace

int64_t put_int8_weights(const zoo::Network& net, int64_t group, TensorMap& state, std::set<std::string>& int8) {
  if (!net.int8.empty()) {
    const int64_t carried = carried_group(net);
    if (group != 0 && group != carried)
      throw ValueError("save_hf_checkpoint: int8_group " + std::to_string(group) + ", but the network's int8 weights are per group of " +
                       std::to_string(carried) + " (valid: 0 to write them as they are, or " + std::to_string(carried) + ")");
    group = carried;
  }
  for (const Int8Map& m : int8_maps(net)) {
    std::vector<Tensor> values, scales;
    for (const std::string& key : m.loom) {
      const QuantizedMatrix q = int8_of(net, key, group);
      values.push_back(q.values);
      scales.push_back(q.scales);
    }
    state[m.torch] = values.size() == 1 ? values[0] : concatenate(values, 0);
    state[m.torch + kScaleSuffix] = scales.size() == 1 ? scales[0] : concatenate(scales, 0);
    int8.insert(m.torch);
  }
  return group;
}

void take_int8_weights(const std::string& dir, zoo::Network& net, bool quantized, int64_t group, TensorMap& state,
                       const std::set<std::string>& int8) {
  if (!quantized) {
    if (!int8.empty())
      fail(dir, "'" + *int8.begin() + "' is int8 (I8) but config.json has no quantization_config (valid: float weights, or an int8 folder "
                "that save_hf_checkpoint wrote with int8)");
    return;
  }
  std::set<std::string> taken;
  for (const Int8Map& m : int8_maps(net)) {
    const std::string scale_key = m.torch + kScaleSuffix;
    const auto it = state.find(m.torch);
    if (it == state.end())
      fail(dir, "there is no '" + m.torch + "' (an int8 folder holds the int8 weights of every linear map of the blocks and the head)");
    if (!int8.count(m.torch))
      fail(dir, "'" + m.torch + "' is not int8 (I8) but config.json's quantization_config makes the linear maps int8 (valid: I8 values with F32 '" +
                    scale_key + "')");
    const auto s = state.find(scale_key);
    if (s == state.end()) fail(dir, "the int8 '" + m.torch + "' has no scales (valid: '" + scale_key + "', F32)");
    if (int8.count(scale_key) || s->second.dtype() != Float32)
      fail(dir, "'" + scale_key + "' has the dtype " + (int8.count(scale_key) ? std::string("I8") : std::string(dtype_name(s->second.dtype()))) +
                    " (valid: F32)");
    std::vector<Tensor> parts;
    int64_t n = 0, k = 0;
    for (const std::string& key : m.loom) {
      const Tensor w = loom_matrix(net, key);
      k = w.dim(0);
      n += w.dim(1);
      parts.push_back(w);
    }
    const int64_t per = group_of(group, k), groups = (k + per - 1) / per;
    check_int8(dir, m.torch, it->second, s->second, n, k, groups);
    std::vector<Tensor> floats;
    int64_t row = 0;
    for (size_t j = 0; j < m.loom.size(); ++j) {
      const int64_t rows = parts[j].dim(1);
      QuantizedMatrix q{slice(it->second, 0, row, row + rows).contiguous(), slice(s->second, 0, row, row + rows).contiguous(), per};
      row += rows;
      floats.push_back(dequantize(q));
      net.int8[m.loom[j]] = std::move(q);
    }
    const Tensor w = floats.size() == 1 ? floats[0] : concatenate(floats, 1);
    it->second = m.out_in ? w.transpose().contiguous() : w;
    state.erase(scale_key);
    taken.insert(m.torch);
  }
  for (const std::string& key : int8)
    if (!taken.count(key))
      fail(dir, "'" + key + "' is int8 (I8), but only the linear maps of the blocks and the head are (valid: F32, BF16 or F16)");
  for (const auto& [key, t] : state)
    if (ends_with(key, kScaleSuffix))
      fail(dir, "'" + key + "' is a scale without an int8 weight (valid: only '<weight>" + kScaleSuffix + "' of an int8 linear map)");
}

}  // namespace loom::io::int8_files
