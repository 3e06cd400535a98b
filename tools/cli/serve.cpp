// `loom serve`: a model of the store over the Open Inference Protocol v2 (docs/serve.md).
#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli.h"
#include "loom/core/parallel.h"
#include "loom/serve/server.h"
#include "loom/serve/text_server.h"
#include "loom/train/language_model.h"
#include "loom/store/model_registry.h"

namespace loom::cli {

namespace {

// A model folder (config.json): generation over OpenAI's API.
int serve_text(const Args& a, const std::filesystem::path& dir) {
  serve::TextServeOptions options;
  options.host = a.value("--host").value_or("127.0.0.1");
  options.port = static_cast<int>(a.integer("--port", 8000, 0));
  if (options.port > 65535) a.fail("--port must be 0 to 65535");
  options.threads = static_cast<int>(std::min<int64_t>(a.integer("--threads", 32, 1), 1024));
  options.max_connections = a.integer("--max-connections", 10000, 1);
  raise_open_files_limit(options.max_connections);
  options.max_request_bytes = a.integer("--max-request-bytes", 1 << 20, 1);
  options.slots = a.integer("--slots", 8, 1);
  options.max_length = a.integer("--max-length", 0, 0);
  options.max_queue = a.integer("--max-queue", 256, 1);
  options.int8_weights = a.flag("--int8");
  options.model_name = a.value("--model-name").value_or(std::filesystem::absolute(dir).lexically_normal().filename().string());
  if (options.model_name.empty()) options.model_name = "loom";
  if (const char* key = std::getenv("LOOM_API_KEY"); key && *key) options.api_key = key;
  train::LanguageModel model = train::LanguageModel::load(dir.string());
  if (const auto path = a.value("--chat-template")) model.chat_template = train::ChatTemplate::load(*path);
  if (const auto threads = a.value("--compute-threads")) set_num_threads(static_cast<int>(a.integer("--compute-threads", 1, 1)));

  const sigset_t stop_signals = block_stop_signals();
  serve::TextServer server(std::move(model), options);
  server.start();
  std::cout << "serving " << terminal_text(options.model_name) << " (text generation" << (options.int8_weights ? ", int8" : "")
            << ") on http://" << options.host << ":" << server.port() << "/v1" << std::endl;
  int sig = 0;
  sigwait(&stop_signals, &sig);
  server.stop();
  std::cout << "stopped" << std::endl;
  return kExitOk;
}

int run(const Args& a) {
  const std::string ref = a.positional()[0];
  if (std::filesystem::is_regular_file(std::filesystem::path(ref) / "config.json")) return serve_text(a, ref);
  serve::ServeOptions options;
  options.host = a.value("--host").value_or("127.0.0.1");
  options.port = static_cast<int>(a.integer("--port", 8000, 0));
  if (options.port > 65535) a.fail("--port must be 0 to 65535");
  options.max_batch = a.integer("--max-batch", 32, 1);
  options.max_wait_us = a.integer("--max-wait-us", 0, 0);
  options.reload_poll_ms = a.integer("--reload-ms", 1000, 0);
  options.threads = static_cast<int>(std::min<int64_t>(a.integer("--threads", 8, 1), 1024));
  options.max_connections = a.integer("--max-connections", 10000, 1);
  raise_open_files_limit(options.max_connections);
  options.max_request_bytes = a.integer("--max-request-bytes", 16 << 20, 1);

  store::Store s = a.open_store();
  serve::ModelSource source;
  if (const auto [name, version] = split_version(a, ref); version) {
    s.models().get(name, *version);  // NotFoundError now rather than at the first request
    auto models = std::make_shared<store::Models>(s.models());
    source = {name, [v = *version] { return v; }, [models, name = name](int64_t v) { return models->load(name, v); }};
  } else {
    const size_t at = ref.rfind('@');
    const bool has_alias = at != std::string::npos && at > 0 && at + 1 < ref.size();
    source = serve::ModelSource::from_store(s, has_alias ? ref.substr(0, at) : ref, has_alias ? ref.substr(at + 1) : "latest");
  }

  // SIGINT and SIGTERM are taken by sigwait below, in this thread, not by the server's threads
  const sigset_t stop_signals = block_stop_signals();

  serve::Server server(std::move(source), options);
  server.start();
  std::cout << "serving " << terminal_text(ref) << " (version "
            << server.version() << ") on http://" << options.host << ":" << server.port() << "/v2" << std::endl;
  int sig = 0;
  sigwait(&stop_signals, &sig);
  server.stop();
  std::cout << "stopped" << std::endl;
  return kExitOk;
}

}  // namespace

const Group& serve_group() {
  static const Group g{
      "serve", "serve a model over HTTP (Open Inference Protocol v2), or a language model over OpenAI's API",
      {{"", "NAME[@ALIAS|:VERSION] | MODEL_DIR", 1, 1,
        {{"--host", "H", false, "", "the address to listen on (default 127.0.0.1: this machine only)"},
         {"--port", "N", false, "", "the port (default 8000; 0: any free port, printed)"},
         {"--max-batch", "B", false, "", "rows of concurrent requests run as one batch (default 32; 1: no batching)"},
         {"--max-wait-us", "U", false, "", "how long a batch's first request waits for others (default 0: a batch is what queued while the previous one ran)"},
         {"--reload-ms", "M", false, "", "how often the alias is checked (default 1000; 0: never)"},
         {"--threads", "T", false, "", "requests handled at once (default 8; 32 for MODEL_DIR, where a request holds one while it generates); connections are not bound to threads: idle and slow clients hold none"},
         {"--max-connections", "N", false, "", "connections open at once; past it a client is answered 503 (default 10000)"},
         {"--max-request-bytes", "N", false, "", "larger request bodies are refused (default 16777216; 1048576 for MODEL_DIR)"},
         {"--slots", "N", false, "", "MODEL_DIR: sequences generated at once, batched step by step (default 8)"},
         {"--max-length", "N", false, "", "MODEL_DIR: positions of a sequence, prompt and completion (default: the model's)"},
         {"--max-queue", "N", false, "", "MODEL_DIR: requests waiting for a slot; past it, 503 (default 256)"},
         {"--int8", "", false, "", "MODEL_DIR: quantize the weights to int8 when loading"},
         {"--chat-template", "FILE", false, "", "MODEL_DIR: the chat template (JSON; default: the folder's chat_template.json)"},
         {"--model-name", "NAME", false, "", "MODEL_DIR: the model's id in the API (default: the folder's name)"},
         {"--compute-threads", "N", false, "", "MODEL_DIR: threads of the decoder's kernels (default: all cores, or $LOOM_NUM_THREADS)"}},
        "serves the version over HTTP in the Open Inference Protocol v2, as Triton and KServe do (GET /v2/health/ready, "
        "GET /v2/models/NAME, POST /v2/models/NAME/infer, GET /metrics for Prometheus; docs/serve.md), following the "
        "alias (default: latest) as it moves: the version it names then is loaded and served from the next batch on. "
        "SIGINT or SIGTERM stops it: it stops accepting, answers every request it has received (those waiting for a "
        "thread too), closes its connections and exits.\n\n"
        "Given a model folder instead (config.json, safetensors and a tokenizer, as for `loom generate`), serves it over "
        "OpenAI's API: POST /v1/completions and /v1/chat/completions (streamed as server-sent events with \"stream\": "
        "true), GET /v1/models, /health and /metrics, generating the requests side by side with continuous batching. "
        "With $LOOM_API_KEY set, /v1 requests must send it as \"Authorization: Bearer KEY\"",
        run}}};
  return g;
}

}  // namespace loom::cli
