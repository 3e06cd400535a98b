#include "loom/serve/text_server.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>

#include "continuous_batcher.h"
#include "core/json_util.h"
#include "core/utf8.h"
#include "loom/core/error.h"
#include "metrics.h"
#include "openai.h"
#include "serve/http_server.h"

namespace loom::serve {

namespace {

using detail::HttpAnswer;
using detail::HttpRequestData;

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

HttpAnswer json_answer(int status, const nlohmann::json& body) { return {status, {{"Content-Type", "application/json"}}, dump(body)}; }

HttpAnswer error_answer(int status, const std::string& message, const std::string& type = "invalid_request_error",
                        const std::string& param = "") {
  return json_answer(status, detail::error_json(message, type, param));
}

}  // namespace

struct TextServer::Impl {
  train::LanguageModel model;
  TextServeOptions options;
  std::unique_ptr<detail::ContinuousBatcher> batcher;
  int64_t created = 0;  // GET /v1/models' "created": when the server loaded the model
  std::atomic<uint64_t> answers{0};
  // /metrics
  std::mutex metrics_mutex;
  std::map<std::pair<std::string, int>, uint64_t> requests;
  detail::Histogram first_token_seconds{{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
  detail::Histogram pass_sequences{{1, 2, 4, 8, 16, 32, 64}};
  std::atomic<uint64_t> tokens{0};
  detail::HttpServerHolder http;

  void count(const std::string& route, int status) {
    std::lock_guard lock(metrics_mutex);
    ++requests[{route, status}];
  }

  std::string metrics_text() {
    const detail::BatcherStats s = batcher->stats();
    std::lock_guard lock(metrics_mutex);
    std::string t = "# HELP loom_requests_total Requests answered, by route and status.\n# TYPE loom_requests_total counter\n";
    for (const auto& [k, n] : requests)
      t += "loom_requests_total{route=\"" + k.first + "\",status=\"" + std::to_string(k.second) + "\"} " + std::to_string(n) + "\n";
    t += "# HELP loom_generated_tokens_total Tokens generated.\n# TYPE loom_generated_tokens_total counter\n";
    t += "loom_generated_tokens_total " + std::to_string(tokens.load()) + "\n";
    t += "# HELP loom_time_to_first_token_seconds From a request's queueing to its first token.\n"
         "# TYPE loom_time_to_first_token_seconds histogram\n" +
         first_token_seconds.text("loom_time_to_first_token_seconds");
    t += "# HELP loom_pass_sequences Sequences fed by one pass of the decoder.\n# TYPE loom_pass_sequences histogram\n" +
         pass_sequences.text("loom_pass_sequences");
    t += "# HELP loom_sequences_active Sequences in the decoder's slots.\n# TYPE loom_sequences_active gauge\n";
    t += "loom_sequences_active " + std::to_string(s.active) + "\n";
    t += "# HELP loom_sequences_queued Sequences waiting for a slot.\n# TYPE loom_sequences_queued gauge\n";
    t += "loom_sequences_queued " + std::to_string(s.queued) + "\n";
    return t;
  }

  nlohmann::json model_object() const {
    return {{"id", options.model_name}, {"object", "model"}, {"created", created}, {"owned_by", "loom"}};
  }

  HttpAnswer generate(const HttpRequestData& r, bool chat) {
    std::string parse_error;
    const auto body = loom::detail::parse_json(r.body, &parse_error);
    if (!body) return error_answer(400, "the request body is not JSON: " + parse_error);
    detail::TextRequest request;
    try {
      request = detail::parse_text_request(*body, chat, model, options.model_name, batcher->max_length());
    } catch (const detail::OpenAiError& e) {
      return error_answer(e.status, e.message, e.status == 404 ? "not_found_error" : e.type, e.param);
    } catch (const Error& e) {  // the tokenizer's
      return error_answer(400, e.what());
    }
    if (!request.seeded) request.generation.seed = std::random_device{}() * uint64_t{0x100000001} ^ answers.load();
    std::shared_ptr<detail::TextJob> job;
    try {
      job = batcher->submit(train::GenerationState(request.prompt, request.generation, model.decode));
    } catch (const Error& e) {
      return error_answer(400, e.what());
    }
    if (!job) return error_answer(503, "the server is busy: " + std::to_string(options.max_queue) + " requests wait for a slot", "server_error");
    const uint64_t n = ++answers;
    detail::AnswerHeader header{(chat ? "chatcmpl-" : "cmpl-") + std::to_string(created) + "-" + std::to_string(n), created,
                                options.model_name, chat};
    if (!request.stream) {
      while (!job->take().ended) {
      }
      if (!job->error().empty()) return error_answer(500, "the model failed on this request: " + job->error(), "server_error");
      const train::Generation& g = job->result();
      const std::string text = request.echo ? request.prompt_text + g.text : g.text;
      return json_answer(200, detail::text_answer(header, text, detail::finish_reason(g.finish), job->prompt_tokens(),
                                                  static_cast<int64_t>(g.tokens.size())));
    }
    HttpAnswer answer{200, {{"Content-Type", "text/event-stream"}}, ""};
    answer.stream = [job, header, request](const detail::StreamWriter& write) {
      bool first = true;
      const auto send = [&](const std::string& text, const char* finish) {
        const bool ok = write(detail::text_event(header, text, finish, first));
        first = false;
        return ok;
      };
      // a chat stream names the role at once; an echoed prompt comes first
      if ((header.chat && !send("", nullptr)) || (request.echo && !send(request.prompt_text, nullptr))) return job->abandon();
      for (;;) {
        const detail::TextJob::Update u = job->take();
        if (!u.text.empty() && !send(u.text, nullptr)) return job->abandon();  // the client is gone: its sequence leaves
        if (u.ended) break;
      }
      if (!job->error().empty()) {
        write(detail::error_event("the model failed on this request: " + job->error()));
      } else {
        send("", detail::finish_reason(job->result().finish));
        if (request.include_usage)
          write(detail::usage_event(header, job->prompt_tokens(), static_cast<int64_t>(job->result().tokens.size())));
      }
      write(detail::kDoneEvent);
    };
    return answer;
  }

  HttpAnswer route(const HttpRequestData& r, std::string& route_name) {
    if (!detail::host_allowed(options.host, r.header("Host")))
      return error_answer(403, "this server answers requests for 127.0.0.1 or localhost only, not for " +
                                   loom::detail::quote_text(r.header("Host")) +
                                   " (another site's name resolving to this machine); serve on another --host to be reached by name");
    const bool get = r.method == "GET" || r.method == "HEAD";
    const auto only = [&](const char* method) { return error_answer(405, "use " + std::string(method) + " for " + r.path); };
    if (r.path == "/metrics") {
      route_name = "metrics";
      if (!get) return only("GET");
      return {200, {{"Content-Type", "text/plain; version=0.0.4"}}, metrics_text()};
    }
    if (r.path == "/health") {
      route_name = "health";
      if (!get) return only("GET");
      return json_answer(200, {{"status", "ok"}});
    }
    if (r.path.rfind("/v1/", 0) != 0) return error_answer(404, "no route " + loom::detail::quote_text(r.path) + " (the API is under /v1)");
    if (!options.api_key.empty()) {
      const std::string given = r.header("Authorization");
      const std::string bearer = "Bearer ";
      if (given.size() <= bearer.size() || given.compare(0, bearer.size(), bearer) != 0 ||
          !detail::same_secret(given.substr(bearer.size()), options.api_key))
        return error_answer(401, "a missing or wrong API key: send the header \"Authorization: Bearer <key>\" with the server's key");
    }
    if (r.path == "/v1/models") {
      route_name = "models";
      if (!get) return only("GET");
      return json_answer(200, {{"object", "list"}, {"data", nlohmann::json::array({model_object()})}});
    }
    if (r.path.rfind("/v1/models/", 0) == 0) {
      route_name = "models";
      if (!get) return only("GET");
      const std::string id = detail::percent_decode(r.path.substr(11));
      if (id != options.model_name)
        return error_answer(404, "the model " + loom::detail::quote_text(id) + " does not exist (this server serves " +
                                     loom::detail::quote_text(options.model_name) + ")", "not_found_error");
      return json_answer(200, model_object());
    }
    if (r.path == "/v1/completions" || r.path == "/v1/chat/completions") {
      const bool chat = r.path == "/v1/chat/completions";
      route_name = chat ? "chat" : "completions";
      if (r.method != "POST") return only("POST");
      return generate(r, chat);
    }
    return error_answer(404, "no route " + loom::detail::quote_text(r.path));
  }

  HttpAnswer answer(const HttpRequestData& r) {
    std::string route_name = "other";
    HttpAnswer a;
    try {
      a = route(r, route_name);
    } catch (const std::exception& e) {
      a = error_answer(500, std::string("internal error: ") + e.what(), "server_error");
    }
    count(route_name, a.status);
    return a;
  }
};

TextServer::TextServer(train::LanguageModel model, TextServeOptions options) : impl_(std::make_unique<Impl>()) {
  const auto& o = options;
  if (o.slots < 1 || o.max_length < 0 || o.prefill_chunk < 1 || o.max_queue < 1 || o.max_request_bytes < 1 || o.threads < 1 ||
      o.port < 0 || o.port > 65535 || o.max_connections < 1 || o.header_timeout_ms < 1 || o.body_timeout_ms < 1 ||
      o.idle_timeout_ms < 1 || o.model_name.empty())
    throw ValueError("TextServer: options out of range (slots, prefill_chunk, max_queue, max_request_bytes, threads, "
                     "max_connections and the timeouts >= 1; max_length >= 0; port 0 to 65535; a model_name)");
  if (!model.encode || !model.decode) throw ValueError("TextServer: the language model needs its tokenizer's encode and decode");
  impl_->model = std::move(model);
  impl_->options = std::move(options);
  impl_->created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  train::CachedDecoder decoder(impl_->model.network, {.max_length = impl_->options.max_length,
                                                      .slots = impl_->options.slots,
                                                      .int8_weights = impl_->options.int8_weights,
                                                      .int8_group = impl_->options.int8_group});
  Impl* impl = impl_.get();
  detail::ContinuousBatcher::Observers observers;
  observers.pass = [impl](int64_t sequences, int64_t) {
    std::lock_guard lock(impl->metrics_mutex);
    impl->pass_sequences.observe(static_cast<double>(sequences));
  };
  observers.first_token = [impl](double seconds) {
    std::lock_guard lock(impl->metrics_mutex);
    impl->first_token_seconds.observe(seconds);
  };
  observers.token = [impl] { ++impl->tokens; };
  impl_->batcher = std::make_unique<detail::ContinuousBatcher>(std::move(decoder), impl_->options.max_queue,
                                                               impl_->options.prefill_chunk, std::move(observers));
}

TextServer::~TextServer() { stop(); }

HttpResponse TextServer::handle(const HttpRequest& request) {
  HttpRequestData data{request.method, request.path, "", {{"Host", request.host}, {"Authorization", request.authorization}}, request.body};
  HttpAnswer a = impl_->answer(data);
  HttpResponse response{a.status, "application/json", a.body, {}};
  for (const auto& [k, v] : a.headers)
    if (k == "Content-Type") response.content_type = v;
    else response.headers[k] = v;
  if (a.stream) a.stream([&](std::string_view piece) {
      response.body += piece;
      return true;
    });
  return response;
}

void TextServer::start() {
  impl_->http.start([this] {
    detail::HttpServerOptions http = detail::http_options(impl_->options);
    Impl* impl = impl_.get();
    auto refuse = [impl](int status, const std::string& message) {
      impl->count("other", status);
      return error_answer(status, message, status >= 500 ? "server_error" : "invalid_request_error");
    };
    return std::make_shared<detail::HttpServer>(
        std::move(http), [impl](const HttpRequestData& r) { return impl->answer(r); }, refuse, "TextServer");
  });
}

int TextServer::port() const { return impl_->http.port(); }

void TextServer::wait() { impl_->http.wait(); }

void TextServer::stop() { impl_->http.stop(); }

}  // namespace loom::serve
