// `loom serve MODEL_DIR`'s generation under concurrent streaming clients (docs/serve.md,
// "Generation: OpenAI's API"): a TextServer in this process over zoo::gpt's default (GPT-2 small,
// 124M parameters, float32, random weights), driven over loopback HTTP by C clients at once, each
// streaming R completions of 64 tokens after a 32-token prompt (greedy, no end-of-text, so every
// completion is 64 tokens). Prints one JSON line per client count:
//   {"name": "text_serve_gpt2_124m", "clients": C, "threads": T, "tokens_per_s": ...,
//    "per_client_tokens_per_s": ..., "ttft_mean_s": ..., "cpu_tokens_per_s": ...}
// tokens/s in all (wall time), the mean time to first token (the server's own histogram), and
// tokens per second of the process's CPU time divided by the threads (the figure that holds on a
// machine shared with other work). With C = 1 the server decodes one sequence per pass; with
// C = 8 continuous batching feeds eight per pass, reading the weights once for all.
//
//   text_serve_bench [--threads N] [--clients 1,8] [--rounds R]
#include <httplib.h>
#include <loom/core/parallel.h>
#include <loom/data/tokenizer.h>
#include <loom/ops/random.h>
#include <loom/serve/text_server.h>
#include <loom/zoo/architectures.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

using namespace loom;

namespace {

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// A byte-level tokenizer of GPT-2's 50,257 ids: the 256 bytes, then ids that decode to nothing
// (special tokens): a random model's text is not the point here, its tokens are.
train::LanguageModel model() {
  manual_seed(1);
  train::LanguageModel m;
  m.network = zoo::gpt();
  nlohmann::json vocab = nlohmann::json::object(), added = nlohmann::json::array();
  for (int b = 0; b < 256; ++b) vocab[data::BpeTokenizer::byte_char(static_cast<uint8_t>(b))] = b;  // GPT-2's byte alphabet
  for (int id = 256; id < 50257; ++id)
    added.push_back({{"id", id}, {"content", "<|" + std::to_string(id) + "|>"}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  const nlohmann::json tokenizer = {
      {"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added}, {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
                 {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab},
                 {"merges", nlohmann::json::array()}}}};
  const auto bpe = std::make_shared<data::BpeTokenizer>(data::BpeTokenizer::from_json(tokenizer.dump()));
  m.encode = [bpe](std::string_view text, bool special) {
    const auto ids = bpe->encode(text, special);
    return std::vector<int64_t>(ids.begin(), ids.end());
  };
  m.decode = [bpe](const std::vector<int64_t>& ids) { return bpe->decode(std::vector<int32_t>(ids.begin(), ids.end()), true); };
  return m;  // no end tokens: every completion runs to max_tokens
}

// A value of the server's /metrics ("name 12.5" on a line of its own).
double metric(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? 0 : std::stod(text.substr(at + name.size() + 2));
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, rounds = 2;
  std::vector<int> client_counts = {1, 8};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--clients") == 0) {
      client_counts.clear();
      for (const char* p = argv[i + 1]; *p; ++p)
        if (p == argv[i + 1] || p[-1] == ',') client_counts.push_back(std::atoi(p));
    }
  }
  set_num_threads(threads);
  int most = 1;
  for (int c : client_counts) most = std::max(most, c);
  serve::TextServer server(model(), {.port = 0, .model_name = "gpt2", .slots = most, .max_length = 128, .threads = most + 4});
  server.start();
  std::vector<int> prompt(32);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int>(1000 + 37 * i);
  const std::string body = nlohmann::json{{"prompt", prompt}, {"max_tokens", 64}, {"temperature", 0}, {"stream", true}}.dump();
  const auto metrics = [&] { return httplib::Client("127.0.0.1", server.port()).Get("/metrics")->body; };
  for (int clients : client_counts) {
    const std::string before = metrics();
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    for (int k = 0; k < clients; ++k)
      workers.emplace_back([&] {
        httplib::Client c("127.0.0.1", server.port());
        c.set_read_timeout(600, 0);
        for (int r = 0; r < rounds; ++r)
          c.Post("/v1/completions", httplib::Headers{}, body, "application/json");  // the whole stream
      });
    for (auto& w : workers) w.join();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = (cpu_seconds() - c0) / threads;
    const std::string after = metrics();
    const double tokens = metric(after, "loom_generated_tokens_total") - metric(before, "loom_generated_tokens_total");
    const double ttft_sum = metric(after, "loom_time_to_first_token_seconds_sum") - metric(before, "loom_time_to_first_token_seconds_sum");
    const double ttft_n = metric(after, "loom_time_to_first_token_seconds_count") - metric(before, "loom_time_to_first_token_seconds_count");
    std::printf("{\"name\": \"text_serve_gpt2_124m\", \"clients\": %d, \"threads\": %d, \"tokens_per_s\": %.2f, "
                "\"per_client_tokens_per_s\": %.2f, \"ttft_mean_s\": %.3f, \"cpu_tokens_per_s\": %.2f, \"tokens\": %.0f}\n",
                clients, threads, tokens / wall, tokens / wall / clients, ttft_n > 0 ? ttft_sum / ttft_n : 0.0, tokens / cpu, tokens);
    std::fflush(stdout);
  }
  server.stop();
  return 0;
}
