// Batch-1 text generation against the machine's limit: a decoder reads every weight once per
// token, so tokens/s can be at most memory bandwidth / bytes of weights. Prints one JSON object
// per line:
//   {"name": "triad", "threads": 1, "gb_per_s": 11.9}
//       STREAM's triad a[i] = b[i] + s * c[i] over three arrays of 2^24 doubles (384 MiB, far
//       past any cache) split between the threads, 24 bytes per element (two reads, one write;
//       the write-allocate read not counted, as STREAM does); the best of 10 passes
//   {"name": "decode_gpt2_124m", "threads": 1, "tokens_per_s": ..., "cpu_tokens_per_s": ...,
//    "bound_tokens_per_s": ..., "weight_bytes": ...}
//       zoo::gpt's default (GPT-2 small: 124M parameters, float32, random weights) through
//       train::CachedDecoder: a 32-token prompt, then 64 tokens one at a time, each fed back
//       (greedy); tokens/s in wall time and in the process's CPU time divided by the threads
//       (the machine may be shared); the bound is triad's bandwidth over the bytes a token reads
//       (CachedDecoder::weight_bytes); "decode_gpt2_124m_int8" the same with int8 weights
//   {"name": "prefill_gpt2_124m_512", "threads": 1, "seconds": ...}
//       one feed of a 512-token prompt from an empty cache
//
//   decode_bench [--threads N]
#include <loom/loom.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

using namespace loom;

namespace {

double wall() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double cpu() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double triad_gb_per_s(int threads) {
  const size_t n = size_t{1} << 24;
  std::vector<double> a(n, 0.0), b(n, 1.0), c(n, 2.0);
  double best = 1e30;
  for (int pass = 0; pass < 10; ++pass) {
    const double t0 = wall();
    std::vector<std::thread> pool;
    for (int k = 0; k < threads; ++k)
      pool.emplace_back([&, k] {
        const size_t from = n * static_cast<size_t>(k) / static_cast<size_t>(threads),
                     to = n * static_cast<size_t>(k + 1) / static_cast<size_t>(threads);
        for (size_t i = from; i < to; ++i) a[i] = b[i] + 3.0 * c[i];
      });
    for (auto& t : pool) t.join();
    best = std::min(best, wall() - t0);
  }
  if (a[n / 2] != 7.0) std::fprintf(stderr, "triad: wrong result\n");
  return 24.0 * static_cast<double>(n) / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
  set_num_threads(threads);
  const double bandwidth = triad_gb_per_s(threads);
  std::printf("{\"name\": \"triad\", \"threads\": %d, \"gb_per_s\": %.2f}\n", threads, bandwidth);

  manual_seed(1);
  const zoo::Network net = zoo::gpt();
  std::vector<int64_t> prompt;
  for (int64_t i = 0; i < 32; ++i) prompt.push_back((i * 7919) % 50257);
  const auto greedy = [](const Tensor& logits) { return argmax(logits).item<int64_t>(); };
  for (const bool int8 : {false, true}) {
    train::CachedDecoder decoder(net, {.max_length = 1024, .int8_weights = int8});
    int64_t next = 0;
    double best_wall = 1e30, best_cpu = 1e30;
    for (int run = 0; run < 3; ++run) {
      decoder.reset();
      next = greedy(decoder.feed(prompt));
      const double w0 = wall(), c0 = cpu();
      for (int k = 0; k < 64; ++k) next = greedy(decoder.feed({next}));
      best_wall = std::min(best_wall, (wall() - w0) / 64);
      best_cpu = std::min(best_cpu, (cpu() - c0) / 64 / threads);
    }
    // the bytes a token reads: the decoder's linear maps and norms (the embeddings' one row each aside)
    const double bytes = static_cast<double>(decoder.weight_bytes());
    std::printf("{\"name\": \"decode_gpt2_124m%s\", \"threads\": %d, \"tokens_per_s\": %.2f, \"cpu_tokens_per_s\": %.2f, "
                "\"bound_tokens_per_s\": %.2f, \"weight_bytes\": %.0f}\n",
                int8 ? "_int8" : "", threads, 1 / best_wall, 1 / best_cpu, bandwidth * 1e9 / bytes, bytes);
  }

  train::CachedDecoder decoder(net, {.max_length = 1024});
  std::vector<int64_t> long_prompt;
  for (int64_t i = 0; i < 512; ++i) long_prompt.push_back((i * 104729) % 50257);
  double best_prefill = 1e30;
  for (int run = 0; run < 2; ++run) {
    decoder.reset();
    const double t0 = wall();
    decoder.feed(long_prompt);
    best_prefill = std::min(best_prefill, wall() - t0);
  }
  std::printf("{\"name\": \"prefill_gpt2_124m_512\", \"threads\": %d, \"seconds\": %.3f}\n", threads, best_prefill);
  std::fprintf(stderr, "%s\n", machine_summary().c_str());
  return 0;
}
