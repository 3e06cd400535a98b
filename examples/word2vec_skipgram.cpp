// Word embeddings by skip-gram with negative sampling (word2vec, Mikolov et al. 2013), as in
// TensorLayer's word2vec tutorial, on a corpus from a Debian package: the fortune cookies of
// `fortunes` (/usr/share/games/fortunes, about 460,000 words).
//
//   word2vec_skipgram [--short] [CORPUS_DIR]
//
// 1. The text becomes lowercase words (letters and apostrophes); words seen fewer than 5 times
//    are dropped; frequent words are subsampled (kept with probability sqrt(t/f) + t/f).
// 2. Each word predicts the words around it (a window of up to 4 either side, shrunk at random
//    as word2vec does): for a (center, context) pair the loss is -log s(u_context . v_center)
//    - sum over K negatives drawn from unigram^0.75 of log s(-u_negative . v_center).
// 3. Adam on batches of 512 pairs, its learning rate decaying linearly to zero as word2vec's.
// It prints the nearest neighbours (cosine) of a few words and exits 1 unless the loss fell by
// a quarter and the embeddings place each query's neighbours closer than random words.
#include <loom/loom.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "fortunes_corpus.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kDim = 64, kNegatives = 5, kWindow = 4, kMinCount = 5, kBatch = 512;
constexpr double kSubsample = 1e-3;

// Every fortune file split into lowercase words.
std::vector<std::string> read_words(const fs::path& dir) {
  std::vector<std::string> words;
  for (const auto& f : fortune_files(dir)) {
    std::ifstream in(f, std::ios::binary);
    std::string word;
    char c;
    while (in.get(c)) {
      const auto u = static_cast<unsigned char>(c);
      if (std::isalpha(u) || (c == '\'' && !word.empty())) {
        word.push_back(static_cast<char>(std::tolower(u)));
      } else if (!word.empty()) {
        while (!word.empty() && word.back() == '\'') word.pop_back();
        if (!word.empty()) words.push_back(word);
        word.clear();
      }
    }
  }
  return words;
}

}  // namespace

int main(int argc, char** argv) {
  const auto [short_run, corpus] = corpus_args(argc, argv, "word2vec_skipgram");

  // 1. words, vocabulary, subsampling
  const std::vector<std::string> words = read_words(corpus);
  std::unordered_map<std::string, int64_t> counts;
  for (const auto& w : words) ++counts[w];
  std::vector<std::pair<std::string, int64_t>> by_count;
  for (const auto& [w, n] : counts)
    if (n >= kMinCount) by_count.emplace_back(w, n);
  std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  std::unordered_map<std::string, int64_t> id;
  std::vector<std::string> vocab;
  std::vector<double> freq;
  int64_t total = 0;
  for (const auto& [w, n] : by_count) total += n;
  for (const auto& [w, n] : by_count) {
    id[w] = static_cast<int64_t>(vocab.size());
    vocab.push_back(w);
    freq.push_back(static_cast<double>(n) / static_cast<double>(total));
  }
  const auto V = static_cast<int64_t>(vocab.size());
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<int64_t> stream;
  for (const auto& w : words) {
    auto it = id.find(w);
    if (it == id.end()) continue;
    const double f = freq[static_cast<size_t>(it->second)];
    if (unit(rng) < std::sqrt(kSubsample / f) + kSubsample / f) stream.push_back(it->second);
  }
  std::printf("corpus: %zu words, vocabulary %lld (seen >= %lld times), %zu after subsampling\n", words.size(),
              static_cast<long long>(V), static_cast<long long>(kMinCount), stream.size());

  // negatives: a table in which each word fills a share proportional to count^0.75
  std::vector<int64_t> table;
  {
    double norm = 0;
    for (double f : freq) norm += std::pow(f, 0.75);
    for (int64_t w = 0; w < V; ++w)
      table.insert(table.end(), static_cast<size_t>(std::ceil(1e6 * std::pow(freq[static_cast<size_t>(w)], 0.75) / norm)), w);
  }
  const Tensor neg_table = from_vector<int64_t>(table, {static_cast<int64_t>(table.size())});

  // 2. parameters: input and output vectors small and random
  manual_seed(11);
  Generator gen(12);
  Tensor w_in = normal({V, kDim}, 0.0, 0.1, Float32, default_device(), &gen).requires_grad_();
  Tensor w_out = normal({V, kDim}, 0.0, 0.1, Float32, default_device(), &gen).requires_grad_();
  // Adam rather than word2vec's plain SGD: with the loss a mean over a batch of 512 pairs, a
  // rare word's rows get a tiny gradient; Adam's per-weight scaling moves them all alike.
  const double lr0 = 0.01;
  train::Adam opt({w_in, w_out}, train::AdamOptions{.lr = lr0});

  const int64_t epochs = short_run ? 1 : 5;
  const size_t pairs_cap = short_run ? 200000 : SIZE_MAX;  // the short form trains on a prefix
  std::vector<int64_t> centers, contexts;
  double first_loss = 0, last_loss = 0;
  int64_t steps = 0;
  const double steps_total = static_cast<double>(epochs) * std::min<double>(static_cast<double>(stream.size()) * kWindow, static_cast<double>(pairs_cap)) / kBatch;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    centers.clear();
    contexts.clear();
    for (size_t i = 0; i < stream.size() && centers.size() < pairs_cap; ++i) {
      const auto b = static_cast<int64_t>(rng() % kWindow) + 1;  // the window shrunk at random
      for (int64_t o = -b; o <= b; ++o) {
        const int64_t j = static_cast<int64_t>(i) + o;
        if (o == 0 || j < 0 || j >= static_cast<int64_t>(stream.size())) continue;
        centers.push_back(stream[i]);
        contexts.push_back(stream[static_cast<size_t>(j)]);
      }
    }
    std::vector<size_t> order(centers.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    double epoch_loss = 0;
    int64_t epoch_steps = 0;
    for (size_t s = 0; s + kBatch <= order.size(); s += kBatch) {
      std::vector<int64_t> c(kBatch), x(kBatch);
      for (int64_t k = 0; k < kBatch; ++k) {
        c[static_cast<size_t>(k)] = centers[order[s + static_cast<size_t>(k)]];
        x[static_cast<size_t>(k)] = contexts[order[s + static_cast<size_t>(k)]];
      }
      const Tensor center = from_vector<int64_t>(c, {kBatch}), context = from_vector<int64_t>(x, {kBatch});
      const Tensor negatives = take(neg_table, randint(0, static_cast<int64_t>(table.size()), {kBatch, kNegatives}, Int64, default_device(), &gen), 0);
      opt.set_lr(lr0 * std::max(1e-4, 1.0 - static_cast<double>(steps) / steps_total));
      opt.zero_grad();
      const Tensor v = embedding(w_in, center);                                            // (B, D)
      const Tensor u = embedding(w_out, context);                                          // (B, D)
      const Tensor n = embedding(w_out, negatives);                                        // (B, K, D)
      const Tensor pos = sum(u * v, {1});                                                   // (B,)
      const Tensor neg = matmul(n, v.reshape({kBatch, kDim, 1})).reshape({kBatch, kNegatives});  // (B, K)
      // -log s(pos) = softplus(-pos); -log s(-neg) = softplus(neg)
      const Tensor loss = mean(softplus(-pos) + sum(softplus(neg), {1}));
      loss.backward();
      opt.step();
      const double l = loss.item<double>();
      if (steps == 0) first_loss = l;
      epoch_loss += l;
      ++epoch_steps;
      ++steps;
    }
    last_loss = epoch_loss / static_cast<double>(std::max<int64_t>(1, epoch_steps));
    std::printf("epoch %lld: %lld steps, mean loss %.4f\n", static_cast<long long>(epoch + 1), static_cast<long long>(epoch_steps),
                last_loss);
  }

  // 3. nearest neighbours by cosine similarity of the input vectors
  const Tensor e = w_in.detach();
  const Tensor unit_rows = e / sqrt(sum(e * e, {1}, /*keepdims=*/true) + 1e-12);
  const std::vector<float> u = unit_rows.to_vector<float>();
  auto cosine = [&](int64_t a, int64_t b) {
    double d = 0;
    for (int64_t k = 0; k < kDim; ++k) d += u[static_cast<size_t>(a * kDim + k)] * u[static_cast<size_t>(b * kDim + k)];
    return d;
  };
  bool ok = last_loss < first_loss * 0.75;
  double near_sum = 0, random_sum = 0;
  int64_t near_n = 0, random_n = 0;
  for (const std::string q : {"love", "money", "god", "computer", "woman", "night", "war", "beer"}) {
    auto it = id.find(q);
    if (it == id.end()) continue;
    std::vector<std::pair<double, int64_t>> sims;
    for (int64_t w = 0; w < V; ++w)
      if (w != it->second) sims.emplace_back(cosine(it->second, w), w);
    std::partial_sort(sims.begin(), sims.begin() + 5, sims.end(), std::greater<>());
    std::printf("%-9s ->", q.c_str());
    for (int k = 0; k < 5; ++k) {
      std::printf(" %s (%.2f)", vocab[static_cast<size_t>(sims[static_cast<size_t>(k)].second)].c_str(), sims[static_cast<size_t>(k)].first);
      near_sum += sims[static_cast<size_t>(k)].first;
      ++near_n;
    }
    std::printf("\n");
    for (int k = 0; k < 50; ++k) {
      random_sum += cosine(it->second, static_cast<int64_t>(rng() % static_cast<uint64_t>(V)));
      ++random_n;
    }
  }
  const double near = near_sum / static_cast<double>(std::max<int64_t>(1, near_n));
  const double random = random_sum / static_cast<double>(std::max<int64_t>(1, random_n));
  std::printf("loss %.4f -> %.4f; mean cosine of the 5 nearest %.3f, of random words %.3f\n", first_loss, last_loss, near, random);
  ok = ok && near > random + 0.2;
  std::printf("%s\n", ok ? "ok" : "FAILED: the loss did not fall by a quarter, or neighbours are no closer than random words");
  return ok ? 0 : 1;
}
