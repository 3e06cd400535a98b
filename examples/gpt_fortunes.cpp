// A small GPT trained on the fortune cookies of Debian's `fortunes` package
// (/usr/share/games/fortunes, about 2.5 MB of text), with a BPE vocabulary trained on the same
// text, then asked to continue a prompt.
//
//   gpt_fortunes [--short] [CORPUS_DIR]
//
// 1. Vocabulary: SentencePiece's BPE trainer (data::train_sentencepiece) learns 2,048 tokens from
//    the training fortunes. The text is kept as it is (no normalization, whitespace runs kept) and
//    bytes no token covers fall back to <0xNN> tokens, so decode(encode(text)) == text.
// 2. Data: every tenth fortune is held out for validation. The token ids of each part become
//    windows of T tokens (data::TokenWindows: views into one tensor, no copy per window), the
//    target of each position being the next token.
// 3. Model: GPT-2's decoder as zoo::gpt builds it (learned token and position embeddings, pre-norm
//    blocks of causal self-attention and a GELU (tanh) feed-forward, a final LayerNorm, and a head
//    to the vocabulary tied to the token embedding; weights drawn from N(0, 0.02), no dropout).
// 4. Training: AdamW with a linear learning-rate warm-up then a cosine decay, stepped per batch,
//    gradients clipped to norm 1, a progress bar, and the validation loss after each epoch in
//    nats per token and per character (comparable with char_lstm's per-character figure).
// 5. Writing: the continuation of a prompt, greedy and sampled (temperature 0.8, top-k 40), by
//    train::generate over a RecomputingModel (each token from the logits of the whole text so far
//    recomputed: no cache), streamed as it comes.
// 6. int8 weights: the validation text's perplexity through train::CachedDecoder with float32
//    weights and with weight-only int8 ones (DecoderOptions::int8_weights, per output channel),
//    their ratio, and the largest and mean difference of their logits.
//
// It exits 1 unless the validation loss ends below the unigram entropy of the validation tokens
// (a model that learned nothing of context cannot get there) and the int8 perplexity is within
// 1 % of the float32 one — in the short form that CI runs, too (a smaller model, 200 steps on a
// part of the corpus).
#include <loom/data/tokenizer.h>
#include <loom/loom.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "fortunes_corpus.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

// The int8 model's validation perplexity over the float32 model's, at most: issue 48's goal, 1 %.
// The short form (CI's) is held to it too: its model (width 64, 2 blocks) came to x1.00004 on an
// AMD EPYC Zen 3 (AVX2), 250 times inside.
constexpr double kInt8Bound = 1.01;

struct Config {
  int64_t vocab = 2048, steps = 128, d_model = 192, n_heads = 6, n_layers = 4, batch = 16, epochs = 2;
  double lr = 1e-3;
  int64_t max_batches = 0;  // per epoch; 0: the whole epoch
  size_t corpus_bytes = 0;  // of the text read; 0: all
};

// The fortunes, each with its "%" separator line, in file order.
std::vector<std::string> read_fortunes(const fs::path& dir, size_t max_bytes) {
  std::vector<std::string> fortunes;
  size_t total = 0;
  for (const auto& f : fortune_files(dir)) {
    std::ifstream in(f, std::ios::binary);
    std::string line, current;
    while (std::getline(in, line)) {
      current += line + "\n";
      if (line == "%") {
        total += current.size();
        fortunes.push_back(std::move(current));
        current.clear();
        if (max_bytes && total >= max_bytes) return fortunes;
      }
    }
    if (!current.empty()) fortunes.push_back(std::move(current));
  }
  return fortunes;
}

// GPT-2's decoder (zoo::gpt: transformers' GPT2LMHeadModel, so that train::CachedDecoder runs it
// and io::save_hf_checkpoint writes it) over (batch, T) ids, T at most `steps`: logits (batch, T, vocab).
zoo::Network gpt(const Config& c) {
  return zoo::gpt({.vocab_size = c.vocab, .n_positions = c.steps, .n_embd = c.d_model, .n_layer = c.n_layers, .n_head = c.n_heads,
                   .activation_function = "gelu_new", .tie_word_embeddings = true});
}

Tensor token_tensor(const std::vector<int32_t>& ids) {
  return from_vector<int64_t>(std::vector<int64_t>(ids.begin(), ids.end()), {static_cast<int64_t>(ids.size())});
}

// The mean cross entropy (nats per token) of the model over side-by-side windows of `ids`.
double validation_loss(const zoo::Network& net, const Tensor& ids, const Config& c) {
  data::DataLoader windows(std::make_shared<data::TokenWindows>(ids, c.steps), {.batch_size = c.batch});
  NoGrad no_grad;
  double total = 0;
  int64_t count = 0;
  for (const data::Batch& b : windows) {
    const Tensor logits = net(b[0]).reshape({-1, c.vocab});
    const int64_t n = b[1].numel();
    total += train::cross_entropy(logits, b[1].reshape({-1})).item<double>() * static_cast<double>(n);
    count += n;
  }
  return total / static_cast<double>(count);
}

// The float32 and the int8 model side by side on the same text.
struct Int8Comparison {
  double f32_loss = 0, int8_loss = 0;  // mean cross entropy, nats per token
  double max_diff = 0, mean_diff = 0;  // |int8 logit - float32 logit| over every position and token
  double max_logit = 0;                // the largest |float32 logit|, for scale
  int64_t windows = 0;
};

// The model's cached decoder with float32 weights and with int8 ones (per output channel: one
// scale per row of each matrix of the blocks and the head) over the windows of T tokens of `ids`
// that validation_loss reads, each fed whole (feed_all: every position's logits).
Int8Comparison compare_int8(const zoo::Network& net, const std::vector<int32_t>& ids, const Config& c) {
  train::CachedDecoder f32(net, {.max_length = c.steps}), q8(net, {.max_length = c.steps, .int8_weights = true});
  NoGrad no_grad;
  Int8Comparison r;
  double diff_sum = 0;
  for (int64_t w = 0; (w + 1) * c.steps + 1 <= static_cast<int64_t>(ids.size()); ++w, ++r.windows) {
    const auto at = ids.begin() + w * c.steps;
    const std::vector<int64_t> window(at, at + c.steps);
    const Tensor target = from_vector<int64_t>(std::vector<int64_t>(at + 1, at + c.steps + 1), {c.steps});
    f32.reset();
    q8.reset();
    const Tensor a = f32.feed_all(window), b = q8.feed_all(window);
    r.f32_loss += train::cross_entropy(a, target).item<double>();
    r.int8_loss += train::cross_entropy(b, target).item<double>();
    const Tensor d = abs(b - a);
    r.max_diff = std::max(r.max_diff, max(d).item<double>());
    diff_sum += mean(d).item<double>();
    r.max_logit = std::max(r.max_logit, max(abs(a)).item<double>());
  }
  const auto n = static_cast<double>(r.windows);
  r.f32_loss /= n;
  r.int8_loss /= n;
  r.mean_diff = diff_sum / n;
  return r;
}

// The entropy (nats per token) of the token frequencies of `ids`: a model blind to context.
double unigram_entropy(const std::vector<int32_t>& ids) {
  std::map<int32_t, double> counts;
  for (int32_t id : ids) counts[id] += 1;
  double h = 0;
  for (const auto& [id, n] : counts) {
    const double p = n / static_cast<double>(ids.size());
    h -= p * std::log(p);
  }
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  const auto [short_run, corpus] = corpus_args(argc, argv, "gpt_fortunes");
  Config c;
  if (short_run) c = {.vocab = 512, .steps = 64, .d_model = 64, .n_heads = 4, .n_layers = 2, .batch = 16, .epochs = 1,
                      .lr = 3e-3, .max_batches = 200, .corpus_bytes = 400'000};

  // 1. the text, split into training and validation fortunes, and a BPE vocabulary of the first
  const std::vector<std::string> fortunes = read_fortunes(corpus, c.corpus_bytes);
  std::string train_text, val_text;
  for (size_t i = 0; i < fortunes.size(); ++i) (i % 10 == 9 ? val_text : train_text) += fortunes[i];
  const fs::path work = fs::temp_directory_path() / ("gpt_fortunes_" + std::to_string(::getpid()));
  fs::create_directories(work);
  std::ofstream(work / "train.txt", std::ios::binary) << train_text;
  data::train_sentencepiece((work / "train.txt").string(), (work / "bpe.model").string(),
                            {.model_type = "bpe", .vocab_size = c.vocab, .character_coverage = 1.0, .byte_fallback = true,
                             .extra = {{"normalization_rule_name", "identity"}, {"remove_extra_whitespaces", "false"}}});
  const auto tokenizer = data::SentencePieceTokenizer::load((work / "bpe.model").string());
  fs::remove_all(work);
  const std::vector<int32_t> train_ids = tokenizer.encode(train_text), val_ids = tokenizer.encode(val_text);
  const double chars_per_token = static_cast<double>(val_text.size()) / static_cast<double>(val_ids.size());
  std::printf("corpus: %zu fortunes; %zu training and %zu validation bytes; %lld BPE tokens, %.2f bytes per token\n",
              fortunes.size(), train_text.size(), val_text.size(), static_cast<long long>(c.vocab), chars_per_token);

  // 2. windows of the token ids: input [i, i+T), target [i+1, i+T+1)
  auto train_windows = std::make_shared<data::TokenWindows>(token_tensor(train_ids), c.steps);
  data::DataLoader loader(train_windows, {.batch_size = c.batch, .shuffle = true, .seed = 3, .drop_last = true});
  const Tensor val_tensor = token_tensor(val_ids);

  // 3. the model
  manual_seed(11);
  const zoo::Network net = gpt(c);
  std::printf("model: %lld parameters\n", static_cast<long long>(net.parameter_count()));

  // 4. AdamW, warm-up over the first 5% of the steps then a cosine decay to 0, clipping at norm 1
  const int64_t per_epoch = c.max_batches ? std::min(c.max_batches, loader.size()) : loader.size();
  const int64_t total_steps = per_epoch * c.epochs;
  auto optimizer = std::make_shared<train::AdamW>(net.parameters(), train::AdamWOptions{.lr = c.lr, .beta2 = 0.95, .weight_decay = 0.1});
  const int64_t warmup = std::max<int64_t>(1, total_steps / 20);
  train::LinearWarmup schedule(*optimizer, warmup, 0.01,
                               std::make_unique<train::CosineAnnealingLR>(*optimizer, total_steps - warmup));
  train::TrainStep step(
      net.graph,
      [&c](const Tensor& logits, const Tensor& target) {
        return train::cross_entropy(logits.reshape({-1, c.vocab}), target.reshape({-1}));
      },
      optimizer, {.clip_grad_norm = 1.0});

  const auto started = std::chrono::steady_clock::now();
  train::ProgressBar progress(stdout, 50);
  double val_loss = 0;
  for (int64_t epoch = 0; epoch < c.epochs; ++epoch) {
    progress.start_epoch(static_cast<int>(epoch + 1), static_cast<int>(c.epochs), per_epoch);
    double running = 0;
    int64_t done = 0;
    for (const data::Batch& b : loader) {
      running += step(b).loss.item<double>();
      schedule.step();
      ++done;
      progress.update(done, c.batch, {{"loss", running / static_cast<double>(done)}, {"lr", optimizer->lr()}});
      if (done == per_epoch) break;  // the short form's cut
    }
    loader.set_epoch(epoch + 1);
    val_loss = validation_loss(net, val_tensor, c);
    progress.end_epoch({{"loss", running / static_cast<double>(done)},
                        {"val_loss", val_loss},
                        {"val_nats_per_char", val_loss / chars_per_token}});
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  // 5. writing, streamed to the terminal token by token
  train::RecomputingModel model(net);
  const auto decode = [&](const std::vector<int64_t>& ids) { return tokenizer.decode(std::vector<int32_t>(ids.begin(), ids.end())); };
  const std::string prompt = "The secret of life is";
  const std::vector<int32_t> prompt_ids = tokenizer.encode(prompt);
  for (const auto& [label, sampling] :
       {std::pair<const char*, train::SamplingOptions>{"greedy", {.temperature = 0}},
        std::pair<const char*, train::SamplingOptions>{"temperature 0.8, top-k 40", {.temperature = 0.8, .top_k = 40}}}) {
    std::printf("\n--- %s ---\n%s", label, prompt.c_str());
    train::generate(model, {prompt_ids.begin(), prompt_ids.end()},
                    {.sampling = sampling, .max_new_tokens = short_run ? 20 : 80, .seed = 7}, decode,
                    [](int64_t, std::string_view text) {
                      std::fwrite(text.data(), 1, text.size(), stdout);
                      std::fflush(stdout);
                      return true;
                    });
    std::printf("\n");
  }

  // 6. int8 weights against float32, through the cached decoder on the validation text
  const Int8Comparison q = compare_int8(net, val_ids, c);
  const double ratio = std::exp(q.int8_loss - q.f32_loss);
  const bool int8_ok = ratio <= kInt8Bound;
  std::printf("\nint8 weights: perplexity %.4f against %.4f in float32 (x%.5f, bound x%.3f) over %lld windows; logits differ by "
              "%.4f at most, %.5f on average (the largest |logit| %.2f): %s\n",
              std::exp(q.int8_loss), std::exp(q.f32_loss), ratio, kInt8Bound, static_cast<long long>(q.windows), q.max_diff, q.mean_diff,
              q.max_logit, int8_ok ? "ok" : "FAILED: int8 perplexity above the bound");

  const double unigram = unigram_entropy(val_ids);
  const bool ok = val_loss < unigram;
  std::printf("validation: %.3f nats per token, %.3f per character (unigram entropy %.3f per token); "
              "trained %lld steps in %.0f s: %s\n",
              val_loss, val_loss / chars_per_token, unigram, static_cast<long long>(total_steps), seconds,
              ok ? "ok" : "FAILED: no better than the token frequencies");
  return ok && int8_ok ? 0 : 1;
}
