// Hugging Face checkpoints in Loom (tests/hf/check_hf.py makes OUT):
//   loom_hf_check OUT   for each case of OUT/cases.txt: io::load_hf_checkpoint(OUT/<case>/hf),
//                       then transformers' parameter names, shapes and count (params.txt) against
//                       the network's (through io::hf_torch_map), its logits against transformers'
//                       (io.safetensors) within 1e-4 of their largest magnitude, and
//                       io::save_hf_checkpoint into OUT/<case>/loom (and, in bfloat16 shards,
//                       OUT/<case>/loom_bf16_shards) for check_hf.py check; for
//                       the *_generate cases, greedy generation through train::CachedDecoder
//                       against transformers' generate(), token for token.
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "loom/core/error.h"
#include "loom/io/hf_checkpoint.h"
#include "loom/io/safetensors.h"
#include "loom/nn/mode.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/reduction.h"
#include "loom/train/decoder.h"
#include "loom/train/generation.h"

using namespace loom;

namespace {

constexpr double kTolerance = 1e-4;  // relative to the reference logits' largest magnitude
constexpr size_t kPrompt = 8;        // tokens before generation (check_hf.py's PROMPT)
int failures = 0;

void fail(const std::string& c, const std::string& what) {
  std::fprintf(stderr, "FAIL %s: %s\n", c.c_str(), what.c_str());
  ++failures;
}

std::string shape_text(const Shape& s) {
  std::string out;
  for (int64_t d : s) out += " " + std::to_string(d);
  return out;
}

// Greedy decoding through the cached decoder against transformers' generate(do_sample=False):
// the same tokens after the same 8-token prompt, stopping at the same end-of-text token.
void check_generation(const std::string& c, const zoo::Network& net, const io::TensorMap& ref) {
  const std::vector<int64_t> ids = ref.at("input_ids")[0].to_vector<int64_t>();
  const std::vector<int64_t> want = ref.at("generated").to_vector<int64_t>();
  train::CachedDecoder decoder(net);
  const train::Generation got =
      train::generate(decoder, {ids.begin(), ids.begin() + kPrompt},
                      {.sampling = {.temperature = 0}, .max_new_tokens = 128, .stop_tokens = {ref.at("eos").to_vector<int64_t>()[0]}});
  size_t same = 0;
  while (same < want.size() && same < got.tokens.size() && want[same] == got.tokens[same]) ++same;
  if (got.tokens != want)
    fail(c, "greedy generation differs from transformers' at new token " + std::to_string(same) + " of " + std::to_string(want.size()));
  std::printf("%s: greedy generation through the cached decoder, %zu new tokens, equal to transformers' generate() for %zu\n",
              c.c_str(), got.tokens.size(), same);
}

void check_case(const std::string& out, const std::string& c) {
  const std::string folder = out + "/" + c;
  const zoo::Network net = io::load_hf_checkpoint(folder + "/hf");

  // transformers' named parameters (tied ones once) against Loom's tensors in transformers' names
  std::ifstream params(folder + "/params.txt");
  int64_t count = 0;
  params >> count;
  std::map<std::string, std::string> want;  // name -> shape
  std::string line;
  std::getline(params, line);
  while (std::getline(params, line)) {
    const size_t space = line.find(' ');
    want[line.substr(0, space)] = space == std::string::npos ? "" : line.substr(space);
  }
  std::map<std::string, std::string> have;
  for (const auto& [name, t] : io::torch_state_from_graph(net.graph, io::hf_torch_map(net))) have[name] = shape_text(t.shape());
  if (have != want) {
    for (const auto& [n, s] : want)
      if (!have.count(n) || have[n] != s) fail(c, "transformers' '" + n + "' (" + s + " ) is " + (have.count(n) ? "(" + have[n] + " ) in Loom" : "not in Loom"));
    for (const auto& [n, s] : have)
      if (!want.count(n)) fail(c, "Loom's '" + n + "' is not a parameter of transformers' model");
  }
  if (net.parameter_count() != count)
    fail(c, "Loom counts " + std::to_string(net.parameter_count()) + " parameters, transformers " + std::to_string(count));

  const io::TensorMap ref = io::load_safetensors(folder + "/io.safetensors");
  nn::ModeScope eval(nn::Mode::Eval);
  const Tensor logits = net(ref.at("input_ids"));
  const Tensor& want_logits = ref.at("logits");
  double rel = 1;
  if (logits.shape() != want_logits.shape()) {
    fail(c, "logits of shape " + shape_str(logits.shape()) + ", transformers' " + shape_str(want_logits.shape()));
  } else {
    rel = max(abs(logits - want_logits)).item<double>() / max(abs(want_logits)).item<double>();
    if (!(rel <= kTolerance)) fail(c, "logits differ by " + std::to_string(rel) + " of their largest magnitude");
  }
  std::printf("%s: %zu named parameters, %lld in all, as transformers'; logits %s, max relative difference %.2e\n", c.c_str(),
              have.size(), static_cast<long long>(count), shape_str(logits.shape()).c_str(), rel);
  if (ref.count("generated")) check_generation(c, net, ref);
  io::save_hf_checkpoint(net, folder + "/loom");
  // and in bfloat16, in shards of at most 16 kB, as save_pretrained(max_shard_size) writes them
  io::save_hf_checkpoint(net, folder + "/loom_bf16_shards", {.dtype = BFloat16, .max_shard_bytes = 16000});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: loom_hf_check OUT (made by tests/hf/check_hf.py make OUT)\n");
    return 2;
  }
  const std::string out = argv[1];
  std::ifstream cases(out + "/cases.txt");
  if (!cases) {
    std::fprintf(stderr, "no %s/cases.txt: run tests/hf/check_hf.py make %s first\n", out.c_str(), out.c_str());
    return 2;
  }
  int n = 0;
  for (std::string c; std::getline(cases, c);) {
    if (c.empty()) continue;
    ++n;
    try {
      check_case(out, c);
    } catch (const Error& e) {
      fail(c, e.what());
    }
  }
  if (n == 0) fail("cases.txt", "no cases");
  std::printf("%d cases, %d failures\n", n, failures);
  return failures ? 1 : 0;
}
