// The decoder blocks against transformers' (tests/hf/check_blocks.py makes OUT):
//   loom_hf_blocks OUT   for each case of OUT/cases.txt: nn::GptBlock or nn::LlamaBlock built as
//                        OUT/<case>/config.json says, in float64, given transformers' weights
//                        (GPT-2's Conv1D matrices as they are, its c_attn split into q, k and v;
//                        Llama's Linear matrices transposed); its output on transformers' input
//                        and the gradients of sum(output * cotangent) with respect to the input
//                        and every weight against transformers'.
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/grad_mode.h"
#include "loom/io/safetensors.h"
#include "loom/nn/decoder_block.h"
#include "loom/nn/input.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"

using namespace loom;

namespace {

int failures = 0;

// A block's tensor (its state's path) and transformers' (name and how it is laid out there).
struct Pair {
  std::vector<std::string> path;  // children, then the parameter
  std::string hf;
  std::function<Tensor(const Tensor&)> from_hf;  // transformers' tensor -> Loom's
};

nn::State& child(nn::State& s, const std::string& name) {
  for (auto& [k, c] : s.children())
    if (k == name) return *c;
  throw ValueError("no inner state '" + name + "'");
}

Tensor& param(nn::Layer& block, const std::vector<std::string>& path) {
  nn::State* s = &block.state();
  for (size_t i = 0; i + 1 < path.size(); ++i) s = &child(*s, path[i]);
  return s->param(path.back());
}

// max |got - want| / max |of|: `of` the whole of transformers' tensor that `want` is part of (the
// gradient of the key bias, a third of c_attn's, is 0 but for rounding: softmax does not see a
// constant added to a row's scores)
double relative(const Tensor& got, const Tensor& want, const Tensor& of) {
  if (got.shape() != want.shape()) return 1e30;
  return max(abs(got - want)).item<double>() / std::max(max(abs(of)).item<double>(), 1e-300);
}

std::vector<Pair> gpt2_pairs(int64_t d) {
  const auto as_is = [](const Tensor& t) { return t; };
  const auto cols = [d](int64_t i) { return [d, i](const Tensor& t) { return slice(t, -1, i * d, (i + 1) * d); }; };
  std::vector<Pair> p = {{{"ln_1", "weight"}, "ln_1.weight", as_is},         {{"ln_1", "bias"}, "ln_1.bias", as_is},
                         {{"attn", "q_weight"}, "attn.c_attn.weight", cols(0)}, {{"attn", "k_weight"}, "attn.c_attn.weight", cols(1)},
                         {{"attn", "v_weight"}, "attn.c_attn.weight", cols(2)}, {{"attn", "q_bias"}, "attn.c_attn.bias", cols(0)},
                         {{"attn", "k_bias"}, "attn.c_attn.bias", cols(1)},     {{"attn", "v_bias"}, "attn.c_attn.bias", cols(2)},
                         {{"attn", "out_weight"}, "attn.c_proj.weight", as_is}, {{"attn", "out_bias"}, "attn.c_proj.bias", as_is},
                         {{"ln_2", "weight"}, "ln_2.weight", as_is},         {{"ln_2", "bias"}, "ln_2.bias", as_is}};
  for (const char* l : {"c_fc", "c_proj"}) {
    p.push_back({{"mlp", l, "weight"}, std::string("mlp.") + l + ".weight", as_is});
    p.push_back({{"mlp", l, "bias"}, std::string("mlp.") + l + ".bias", as_is});
  }
  return p;
}

std::vector<Pair> llama_pairs(bool bias) {
  const auto as_is = [](const Tensor& t) { return t; };
  const auto transposed = [](const Tensor& t) { return t.transpose().contiguous(); };
  std::vector<Pair> p = {{{"input_layernorm", "weight"}, "input_layernorm.weight", as_is},
                         {{"post_attention_layernorm", "weight"}, "post_attention_layernorm.weight", as_is},
                         {{"mlp", "gate"}, "mlp.gate_proj.weight", transposed},
                         {{"mlp", "up"}, "mlp.up_proj.weight", transposed},
                         {{"mlp", "down"}, "mlp.down_proj.weight", transposed}};
  for (const auto& [mine, theirs] : std::vector<std::pair<std::string, std::string>>{{"q", "q_proj"}, {"k", "k_proj"}, {"v", "v_proj"}, {"out", "o_proj"}}) {
    p.push_back({{"self_attn", mine + "_weight"}, "self_attn." + theirs + ".weight", transposed});
    if (bias) p.push_back({{"self_attn", mine + "_bias"}, "self_attn." + theirs + ".bias", as_is});
  }
  return p;
}

void check_case(const std::string& out, const std::string& c) {
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(out + "/" + c + "/config.json"));
  const io::TensorMap ref = io::load_safetensors(out + "/" + c + "/block.safetensors");
  const bool gpt2 = config.at("family") == "gpt2";
  const int64_t d = config.at(gpt2 ? "n_embd" : "hidden_size");
  nn::Input x(Shape{-1, -1, d}, Float64, "x");
  nn::Layer block;
  std::vector<Pair> pairs;
  // transformers' Llama computes the rotary angles in float32 whatever the model's dtype; Loom in
  // the input's: so float64 Llama blocks agree to about float32's precision, GPT-2's to float64's
  double tolerance = 1e-10;
  if (gpt2) {
    block = nn::GptBlock(x, config.at("n_head"),
                         {.ff_units = config.value("n_inner", int64_t{0}), .eps = config.at("layer_norm_epsilon"), .activation = nn::gelu_tanh},
                         std::nullopt, "block");
    pairs = gpt2_pairs(d);
  } else {
    RotaryOptions rope{.base = config.value("rope_theta", 10000.0)};
    if (config.contains("rope_scaling")) {
      const nlohmann::json& s = config.at("rope_scaling");
      if (s.at("rope_type") == "linear") rope.linear_factor = s.at("factor");
      else {
        rope.llama3_factor = s.at("factor");
        rope.low_freq_factor = s.at("low_freq_factor");
        rope.high_freq_factor = s.at("high_freq_factor");
        rope.original_max_positions = s.at("original_max_position_embeddings");
      }
    }
    const bool bias = config.value("attention_bias", false);
    block = nn::LlamaBlock(x, config.at("num_attention_heads"),
                           {.ff_units = config.at("intermediate_size"), .n_kv_heads = config.at("num_key_value_heads"),
                            .eps = config.value("rms_norm_eps", 1e-6), .rotary = rope, .attention_bias = bias},
                           std::nullopt, "block");
    pairs = llama_pairs(bias);
    tolerance = 1e-5;
  }
  if (pairs.size() != block.parameters().size())
    throw ValueError(std::to_string(block.parameters().size()) + " parameters, " + std::to_string(pairs.size()) + " mapped");
  {
    NoGrad no_grad;
    for (const Pair& p : pairs) param(block, p.path).copy_(p.from_hf(ref.at(p.hf)));
  }
  const Tensor xv = ref.at("x").detach().requires_grad_(true);
  x.set_value(xv);
  const Tensor y = block();
  sum(y * ref.at("cotangent")).backward();
  std::vector<std::pair<std::string, double>> errors = {{"output", relative(y.detach(), ref.at("y"), ref.at("y"))},
                                                        {"grad of the input", relative(xv.grad(), ref.at("grad.x"), ref.at("grad.x"))}};
  for (const Pair& p : pairs) {
    const Tensor& want = ref.at("grad." + p.hf);
    errors.push_back({"grad of " + p.hf + " (" + p.path.back() + ")", relative(param(block, p.path).grad(), p.from_hf(want), want)});
  }
  double worst = 0;
  for (const auto& [what, e] : errors) {
    worst = std::max(worst, e);
    if (!(e <= tolerance)) {
      std::fprintf(stderr, "FAIL %s: %s differs from transformers' by %.3g of its largest magnitude (tolerance %g)\n", c.c_str(),
                   what.c_str(), e, tolerance);
      ++failures;
    }
  }
  std::printf("%s: %s, output and %zu gradients, worst relative difference %.2e (tolerance %g)\n", c.c_str(), block.kind(),
              errors.size() - 1, worst, tolerance);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: loom_hf_blocks OUT (made by tests/hf/check_blocks.py make OUT)\n");
    return 2;
  }
  const std::string out = argv[1];
  std::ifstream cases(out + "/cases.txt");
  int n = 0;
  for (std::string c; std::getline(cases, c);) {
    if (c.empty()) continue;
    ++n;
    try {
      check_case(out, c);
    } catch (const Error& e) {
      std::fprintf(stderr, "FAIL %s: %s\n", c.c_str(), e.what());
      ++failures;
    }
  }
  if (n == 0) {
    std::fprintf(stderr, "no cases in %s/cases.txt: run tests/hf/check_blocks.py make %s first\n", out.c_str(), out.c_str());
    return 2;
  }
  std::printf("%d blocks, %d failures\n", n, failures);
  return failures ? 1 : 0;
}
