#pragma once
// A language model served over OpenAI's API (docs/serve.md, "Generation"), so that OpenAI's
// clients and tools built on them can use it:
//
//   serve::TextServer server(train::LanguageModel::load("gpt2-folder"), {.port = 8000, .slots = 8});
//   server.start();   // POST /v1/completions, POST /v1/chat/completions, GET /v1/models, ...
//   server.wait();    // until stop()
//
// Requests are generated side by side with continuous batching: one engine runs a cached decoder
// of `slots` sequences, and between two of its passes a finished sequence leaves and a waiting one
// joins; every pass reads the weights once for all. Answers stream as server-sent events when
// asked ("stream": true). A sequence's tokens do not depend on the others in its passes. The HTTP
// layer, its limits and its safety rules (127.0.0.1 by default, the Host check, bounded bodies
// and JSON) are Server's.
#include <cstdint>
#include <memory>
#include <string>

#include "loom/core/api.h"
#include "loom/serve/server.h"
#include "loom/train/language_model.h"

namespace loom::serve {

struct LOOM_API TextServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                  // 0: a free port, port() tells which
  std::string model_name = "loom";  // the id clients name in "model" and GET /v1/models lists
  int64_t slots = 8;                // sequences generated at once (more wait for a slot)
  int64_t max_length = 0;           // positions a sequence holds, prompt and completion (0: the model's)
  bool int8_weights = false;        // weight-only int8 (DecoderOptions)
  int64_t int8_group = 0;
  int64_t prefill_chunk = 256;      // a prompt is fed this many tokens per pass (others' tokens come between)
  int64_t max_queue = 256;          // sequences waiting for a slot; past it, 503
  int64_t max_request_bytes = 1 << 20;
  int threads = 32;                 // requests handled at once: a request holds one while it generates
  int64_t max_connections = 10000;
  int64_t header_timeout_ms = 10000;
  int64_t body_timeout_ms = 60000;
  int64_t idle_timeout_ms = 60000;
  // When set, every /v1 request must carry "Authorization: Bearer <api_key>" (401 otherwise), as
  // OpenAI's clients send their api_key. Nothing is written by these routes; the key keeps the
  // model's compute to those given it.
  std::string api_key{};
};

class LOOM_API TextServer {
 public:
  // ValueError for options out of range or a model that is not a zoo GPT or Llama.
  explicit TextServer(train::LanguageModel model, TextServeOptions options = {});
  ~TextServer();  // stops
  TextServer(const TextServer&) = delete;
  TextServer& operator=(const TextServer&) = delete;

  // Answers one request without a socket (a streamed answer's events all in the body): the
  // routes, /metrics, and errors in OpenAI's shape {"error": {"message", "type", "param",
  // "code"}} with 400, 401, 403, 404, 405, 503.
  HttpResponse handle(const HttpRequest& request);

  void start();      // listens on host:port (IOError when it cannot bind)
  int port() const;  // the bound port once started
  void wait();       // blocks until stop()
  void stop();       // answers every request received (streams run to their end), then closes

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::serve
