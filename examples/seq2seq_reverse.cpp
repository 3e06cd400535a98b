// Sequence to sequence with attention (Bahdanau et al. 2015; Luong et al. 2015), as in
// TensorLayer's seq2seq tutorial, on a synthetic task: write a string of 8 digits backwards.
//
//   seq2seq_reverse [--short]
//
// The encoder reads the digits (an embedding and a bidirectional LSTM: each position knows the
// whole string); the decoder reads the answer so far, starting from a start token (an embedding
// and an LSTM) and attends over the encoder's states (multi-head attention) to pick the next
// digit. It trains with teacher forcing through Model::fit, then answers new strings greedily,
// one digit at a time, and counts the strings written back exactly. It exits 1 unless at
// least 95 % are (60 % in the short form that CI runs).
#include <loom/loom.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

using namespace loom;

namespace {

constexpr int64_t kLen = 8, kStart = 10, kVocab = 11, kUnits = 64;

// n strings: sources (n, 8), decoder inputs [start, reversed[0..6]] and targets reversed (n, 8).
std::vector<Tensor> make_data(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> src(n * kLen), dec(n * kLen), tgt(n * kLen);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t t = 0; t < kLen; ++t) src[i * kLen + t] = static_cast<int64_t>(rng() % 10);
    for (int64_t t = 0; t < kLen; ++t) tgt[i * kLen + t] = src[i * kLen + (kLen - 1 - t)];
    dec[i * kLen] = kStart;
    for (int64_t t = 1; t < kLen; ++t) dec[i * kLen + t] = tgt[i * kLen + t - 1];
  }
  return {from_vector<int64_t>(src, {n, kLen}), from_vector<int64_t>(dec, {n, kLen}), from_vector<int64_t>(tgt, {n, kLen})};
}

}  // namespace

int main(int argc, char** argv) {
  const bool short_run = argc > 1 && std::string(argv[1]) == "--short";
  const int64_t n_train = short_run ? 4000 : 20000;
  const int epochs = short_run ? 3 : 5;
  const double goal = short_run ? 0.60 : 0.95;
  manual_seed(3);

  // the graph: source ids (N, 8) and decoder ids (N, T) -> logits (N, T, 11)
  nn::Input src(Shape{-1, kLen}, Int64, "source");
  nn::Input dec(Shape{-1, -1}, Int64, "decoder_input");  // any length: it grows while decoding
  nn::Lookup src_emb(src, kVocab, 32, {}, "source_embedding");
  nn::RNN encoder(src_emb, kUnits, {.bidirectional = true}, "encoder");  // (N, 8, 128)
  nn::Lookup dec_emb(dec, kVocab, 32, {}, "decoder_embedding");
  nn::RNN decoder(dec_emb, 2 * kUnits, {}, "decoder");                     // (N, T, 128)
  nn::MultiHeadAttention attend(decoder, encoder, encoder, 4, {}, std::nullopt, "attention");
  nn::Concat both({decoder, attend}, -1, "decoder_and_context");
  nn::Linear logits(both, kVocab, {}, "logits");
  Graph graph = Graph::build({logits}, {src, dec});

  train::Model model(graph,
                     [](const Tensor& y, const Tensor& t) { return train::cross_entropy(y.reshape({-1, kVocab}), t.reshape({-1})); },
                     std::make_shared<train::Adam>(graph.parameters(), train::AdamOptions{.lr = 3e-3}));
  auto train_data = std::make_shared<data::TensorDataset>(make_data(n_train, 1));
  data::DataLoader loader(train_data, {.batch_size = 64, .shuffle = true, .seed = 2});
  auto report = std::make_shared<train::LambdaCallback>();
  report->epoch_end = [](train::Model&, int64_t e, const train::Logs& logs) {
    std::printf("epoch %lld: loss %.4f\n", static_cast<long long>(e + 1), logs.at("loss"));
  };
  model.fit(loader, {.epochs = epochs, .callbacks = {report}, .progress = false});

  // greedy decoding of new strings: the decoder input grows by the digit just written
  const std::vector<Tensor> test = make_data(500, 99);
  const int64_t n_test = test[0].shape()[0];
  const auto run = graph.as_function();
  std::vector<int64_t> written(static_cast<size_t>(n_test * kLen));
  {
    NoGrad no_grad;
    std::vector<int64_t> prefix(static_cast<size_t>(n_test), kStart);  // (N, t), row-major
    for (int64_t t = 1; t <= kLen; ++t) {
      const Tensor out = run({test[0], from_vector<int64_t>(prefix, {n_test, t})})[0];  // (N, t, 11)
      const std::vector<int64_t> next = argmax(out, -1).to_vector<int64_t>();          // (N, t)
      std::vector<int64_t> grown;
      for (int64_t i = 0; i < n_test; ++i) {
        const int64_t digit = next[static_cast<size_t>(i * t + t - 1)];
        written[static_cast<size_t>(i * kLen + t - 1)] = digit;
        grown.insert(grown.end(), prefix.begin() + i * t, prefix.begin() + (i + 1) * t);
        grown.push_back(digit);
      }
      prefix = std::move(grown);
    }
  }
  const std::vector<int64_t> truth = test[2].to_vector<int64_t>(), source = test[0].to_vector<int64_t>();
  int64_t exact = 0;
  for (int64_t i = 0; i < n_test; ++i)
    exact += std::equal(written.begin() + i * kLen, written.begin() + (i + 1) * kLen, truth.begin() + i * kLen);
  for (int64_t i = 0; i < 3; ++i) {
    std::string in, out;
    for (int64_t t = 0; t < kLen; ++t) {
      in.push_back(static_cast<char>('0' + source[static_cast<size_t>(i * kLen + t)]));
      out.push_back(static_cast<char>('0' + written[static_cast<size_t>(i * kLen + t)]));
    }
    std::printf("%s -> %s\n", in.c_str(), out.c_str());
  }
  const double accuracy = static_cast<double>(exact) / static_cast<double>(n_test);
  std::printf("exact match on %lld new strings: %.1f %% (goal %.0f %%)\n", static_cast<long long>(n_test), 100 * accuracy, 100 * goal);
  return accuracy >= goal ? 0 : 1;
}
