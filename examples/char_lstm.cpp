// A character-level LSTM language model that writes text, as in TensorLayer's and Karpathy's
// char-RNN tutorials, on a corpus from a Debian package: the fortune cookies of `fortunes`
// (/usr/share/games/fortunes, about 2.5 MB of text).
//
//   char_lstm [--short] [CORPUS_DIR]
//
// The text is a stream of byte ids; zoo::lstm_lm (an embedding, two LSTM layers, a linear
// layer to the byte vocabulary) learns to predict each next character from the 64 before it,
// trained one compiled train::TrainStep at a time with Adam and gradients clipped to norm 5.
// Then it writes 400 characters after a prompt, sampling each from the predicted distribution
// sharpened by a temperature of 0.7. It exits 1 unless the model predicts characters better
// than their frequencies alone do: its cross entropy below 0.6 of the unigram entropy (0.85 in
// the short form, 150 steps, that CI runs).
#include <loom/loom.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fortunes_corpus.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kSteps = 64, kBatch = 32, kEmbedding = 32, kHidden = 256;

std::string read_corpus(const fs::path& dir) {
  std::string text;
  for (const auto& f : fortune_files(dir)) {
    std::ifstream in(f, std::ios::binary);
    text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const auto [short_run, corpus] = corpus_args(argc, argv, "char_lstm");

  // the characters that occur, as ids 0..V-1, and the unigram entropy to beat
  const std::string text = read_corpus(corpus);
  std::map<unsigned char, int64_t> counts;
  for (unsigned char c : text) ++counts[c];
  std::vector<int64_t> id_of(256, -1);
  std::string chars;
  double entropy = 0;
  for (const auto& [c, n] : counts) {
    id_of[c] = static_cast<int64_t>(chars.size());
    chars.push_back(static_cast<char>(c));
    const double p = static_cast<double>(n) / static_cast<double>(text.size());
    entropy -= p * std::log(p);
  }
  const auto V = static_cast<int64_t>(chars.size());
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = id_of[static_cast<unsigned char>(text[i])];
  std::printf("corpus: %zu characters, %lld distinct; unigram entropy %.3f nats per character\n", text.size(),
              static_cast<long long>(V), entropy);

  // the model and one compiled training step: logits (B, T, V) against the next characters
  manual_seed(5);
  zoo::Network net = zoo::lstm_lm(V, kEmbedding, kHidden, 2);
  auto opt = std::make_shared<train::Adam>(net.parameters(), train::AdamOptions{.lr = 3e-3});
  train::TrainStep step(
      net.graph, [V](const Tensor& logits, const Tensor& t) { return train::cross_entropy(logits.reshape({-1, V}), t.reshape({-1})); },
      opt, train::TrainStepOptions{.clip_grad_norm = 5.0});

  // random windows of the text: input ids[i, i+T), target ids[i+1, i+T+1)
  const int64_t n_steps = short_run ? 150 : 2000;
  std::mt19937_64 rng(9);
  std::uniform_int_distribution<size_t> start(0, ids.size() - kSteps - 2);
  double recent = 0;
  int64_t recent_n = 0;
  for (int64_t s = 1; s <= n_steps; ++s) {
    std::vector<int64_t> x(kBatch * kSteps), y(kBatch * kSteps);
    for (int64_t b = 0; b < kBatch; ++b) {
      const size_t at = start(rng);
      for (int64_t t = 0; t < kSteps; ++t) {
        x[static_cast<size_t>(b * kSteps + t)] = ids[at + static_cast<size_t>(t)];
        y[static_cast<size_t>(b * kSteps + t)] = ids[at + static_cast<size_t>(t) + 1];
      }
    }
    const double loss = step({from_vector<int64_t>(x, {kBatch, kSteps}), from_vector<int64_t>(y, {kBatch, kSteps})}).loss.item<double>();
    if (s > n_steps - 20) {  // the last steps' mean: the model's cross entropy now
      recent += loss;
      ++recent_n;
    }
    if (s % (short_run ? 50 : 250) == 0) std::printf("step %lld: loss %.3f\n", static_cast<long long>(s), loss);
  }
  const double final_loss = recent / static_cast<double>(recent_n);

  // writing: each next character drawn from softmax(logits / temperature) of the last 64
  const std::string prompt = "The ";
  std::string out = prompt;
  std::vector<int64_t> context;
  for (unsigned char c : prompt) context.push_back(id_of[c] >= 0 ? id_of[c] : 0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  {
    NoGrad no_grad;
    for (int k = 0; k < 400; ++k) {
      const size_t from = context.size() > static_cast<size_t>(kSteps) ? context.size() - kSteps : 0;
      const std::vector<int64_t> window(context.begin() + static_cast<std::ptrdiff_t>(from), context.end());
      const Tensor logits = net(from_vector<int64_t>(window, {1, static_cast<int64_t>(window.size())}));
      const Tensor last = logits.reshape({-1, V}).astype(Float64);
      const std::vector<double> z = last.to_vector<double>();
      const size_t off = (window.size() - 1) * static_cast<size_t>(V);
      double top = -1e300, total = 0;
      for (int64_t v = 0; v < V; ++v) top = std::max(top, z[off + static_cast<size_t>(v)]);
      std::vector<double> p(static_cast<size_t>(V));
      for (int64_t v = 0; v < V; ++v) total += p[static_cast<size_t>(v)] = std::exp((z[off + static_cast<size_t>(v)] - top) / 0.7);
      double r = unit(rng) * total;
      int64_t pick = 0;
      while (pick + 1 < V && (r -= p[static_cast<size_t>(pick)]) > 0) ++pick;
      context.push_back(pick);
      out.push_back(chars[static_cast<size_t>(pick)]);
    }
  }
  std::printf("\n--- written by the model ---\n%s\n---\n", out.c_str());
  // the short form (CI) only has to beat the frequencies; the full run has to beat them well
  const double bound = short_run ? 0.85 : 0.6;
  const bool ok = final_loss < bound * entropy && out.size() == prompt.size() + 400;
  std::printf("cross entropy %.3f nats per character (unigram %.3f, bound %.3f): %s\n", final_loss, entropy, bound * entropy,
              ok ? "ok" : "FAILED: not far enough below the character frequencies' entropy");
  return ok ? 0 : 1;
}
