// The generation server's request handling (serve::TextServer::handle, the socket left out), as
// fuzz_serve: a method (the first byte), a path (up to the first newline) and a body (the rest).
// Every request gets an answer: a success (JSON, or a stream of events each holding JSON), or an
// error of 4xx in OpenAI's shape (503 when the queue is full). A 500, a body that is not JSON, a
// crash or a leak is a finding. The model is a tiny random GPT-2 over the tests' byte-level BPE,
// its context 24 positions, so that no request generates for long.
#include <loom/data/tokenizer.h>
#include <loom/ops/random.h>
#include <loom/serve/text_server.h>
#include <loom/zoo/architectures.h>
#include <nlohmann/json.hpp>

#include <memory>

#include "fuzz/fuzz_common.h"
#include "unit/data/tiny_bpe.h"

namespace {

loom::serve::TextServer& server() {
  static const std::unique_ptr<loom::serve::TextServer> s = [] {
    loom_fuzz::init();
    loom::manual_seed(1);
    loom::train::LanguageModel m;
    m.network = loom::zoo::gpt({.vocab_size = 301, .n_positions = 24, .n_embd = 16, .n_layer = 1, .n_head = 2});
    const auto bpe = std::make_shared<loom::data::BpeTokenizer>(loom::data::BpeTokenizer::from_json(test_tokenizers::tiny_json().dump()));
    m.encode = [bpe](std::string_view text, bool special) {
      const auto ids = bpe->encode(text, special);
      return std::vector<int64_t>(ids.begin(), ids.end());
    };
    // ids between the merges' and <|endoftext|> name no token: decode refuses them, and the
    // server must answer that as a failed request, not fall over
    m.decode = [bpe](const std::vector<int64_t>& ids) { return bpe->decode(std::vector<int32_t>(ids.begin(), ids.end()), true); };
    m.end_tokens = {300};
    m.chat_template = loom::train::ChatTemplate::parse(R"({"system": "S:{content}\n", "user": "U:{content}\n", "generation_prompt": "A:"})");
    return std::make_unique<loom::serve::TextServer>(std::move(m), loom::serve::TextServeOptions{.model_name = "tiny", .slots = 2,
                                                                                                  .max_queue = 8});
  }();
  return *s;
}

bool json_events(const std::string& body) {
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    if (end == std::string::npos) return false;
    const std::string data = body.substr(at + 6, end - at - 6);
    if (data != "[DONE]" && !nlohmann::json::accept(data)) return false;
    at = end;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  loom_fuzz::Request in = loom_fuzz::split_request(data, size);
  const loom::serve::HttpRequest request{std::move(in.method), std::move(in.path), std::move(in.body)};
  const loom::serve::HttpResponse r = server().handle(request);
  const bool model_failed = r.status == 500 && r.body.find("the model failed on this request") != std::string::npos;
  if (r.status >= 500 && r.status != 503 && !model_failed) {
    std::fprintf(stderr, "fuzz_text_serve: status %d for %s %s: %s\n", r.status, request.method.c_str(), request.path.c_str(), r.body.c_str());
    std::abort();
  }
  const bool ok = r.content_type == "application/json"    ? nlohmann::json::accept(r.body)
                  : r.content_type == "text/event-stream" ? json_events(r.body)
                                                          : true;
  if (!ok) {
    std::fprintf(stderr, "fuzz_text_serve: an answer that is not JSON (status %d): %s\n", r.status, r.body.c_str());
    std::abort();
  }
  return 0;
}
