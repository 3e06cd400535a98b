#include "loom/serve/server.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <mutex>
#include <thread>

#include "batcher.h"
#include "core/json_util.h"
#include "core/utf8.h"
#include "loom/core/error.h"
#include "loom/core/grad_mode.h"
#include "loom/nn/mode.h"
#include "loom/store/model_registry.h"
#include "metrics.h"
#include "protocol.h"
#include "serve/http_server.h"

namespace loom::serve {

ModelSource ModelSource::from_store(store::Store store, const std::string& name, const std::string& alias) {
  auto models = std::make_shared<store::Models>(store.models());
  return {name, [models, name, alias] { return models->get(name, alias).version; },
          [models, name](int64_t version) { return models->load(name, version); }};
}

ModelSource ModelSource::fixed(const std::string& name, Graph graph) {
  return {name, [] { return int64_t{1}; }, [graph](int64_t) { return graph; }};
}

namespace detail {

// One loaded version: its graph as a function and what the protocol says about it.
struct Loaded {
  int64_t version = 0;
  Graph graph;
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> run;
  std::vector<TensorSpec> inputs, outputs;
  // Requests may share a batch: every output has exactly one row per input row (Batcher).
  bool batchable = false;
};

}  // namespace detail

namespace {

using detail::BadRequest;
using detail::Loaded;
using detail::TensorSpec;
using Clock = std::chrono::steady_clock;

// Whether the graph maps rows to rows, by its layers' shape rules: every input has an open
// leading (batch) dimension and, compiled for a batch of b rows, every output has b rows, for two
// sizes of b (one size could match a fixed leading size by chance). A concatenation along the
// batch axis, ids flattened into one list of embeddings or a sum over the batch fail it: their
// requests run alone, since a request's rows could not be cut out of a shared batch's outputs.
bool rows_follow_batch(const Graph& graph) {
  for (const int64_t rows : {int64_t{2}, int64_t{3}}) {
    CompileOptions options;
    for (const auto& l : graph.inputs()) {
      Shape shape = l.shape();
      if (shape.empty() || shape[0] != -1) return false;
      shape[0] = rows;
      options.input_shapes.push_back(shape);
    }
    // the shape rules only: no pass changes what the outputs are
    options.remove_dead_nodes = options.eliminate_common_subexpressions = options.fold_constants = false;
    options.fuse_conv_epilogues = options.blocked_layouts = options.fuse_elementwise = false;
    try {
      for (const Shape& out : graph.compile(options).output_shapes())
        if (out.empty() || out[0] != rows) return false;
    } catch (const Error&) {  // the rules cannot size it for that batch: no proof
      return false;
    }
  }
  return !graph.inputs().empty();
}

std::shared_ptr<const Loaded> load_version(const ModelSource& source, int64_t version) {
  auto m = std::make_shared<Loaded>();
  m->version = version;
  m->graph = source.load(version);
  m->run = m->graph.as_function();
  for (const auto& l : m->graph.inputs()) m->inputs.push_back({l.name(), l.dtype(), l.shape()});
  for (const auto& l : m->graph.outputs()) m->outputs.push_back({l.name(), l.dtype(), l.shape()});
  m->batchable = rows_follow_batch(m->graph);
  return m;
}

// Invalid UTF-8 from a request (an unknown name echoed in an error, a parser's message quoting
// the bad byte) becomes U+FFFD instead of making dump() throw.
std::string dump_json(const nlohmann::json& body) { return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

HttpResponse json_response(int status, const nlohmann::json& body) { return {status, "application/json", dump_json(body), {}}; }

HttpResponse error(int status, const std::string& message) {
  return json_response(status, {{"error", message}});
}

// The path's segments, each percent-decoded after the split: "team%2Fmlp" is one segment
// "team/mlp", a model name with a slash.
std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    const size_t j = path.find('/', i);
    const size_t end = j == std::string::npos ? path.size() : j;
    if (end > i) parts.push_back(detail::percent_decode(path.substr(i, end - i)));
    i = end;
  }
  return parts;
}

// How many segments from p[at] spell `name`: one when encoded ("team%2Fmlp"), or as many as it
// has parts when sent with its slashes as they are (tritonclient quotes names keeping '/');
// 0 when they do not spell it.
size_t name_segments(const std::vector<std::string>& p, size_t at, const std::string& name) {
  if (at < p.size() && p[at] == name) return 1;
  std::string joined;
  for (size_t k = at; k < p.size() && joined.size() < name.size(); ++k) {
    joined += (k == at ? "" : "/") + p[k];
    if (joined == name) return k - at + 1;
  }
  return 0;
}

}  // namespace

struct Server::Impl {
  ModelSource source;
  ServeOptions options;
  detail::Metrics metrics;
  mutable std::mutex model_mutex;
  std::shared_ptr<const Loaded> model;
  std::mutex reload_mutex;  // one reload at a time
  std::unique_ptr<detail::Batcher> batcher;
  detail::HttpServerHolder http;
  std::thread poller;

  std::shared_ptr<const Loaded> current() const {
    std::lock_guard lock(model_mutex);
    return model;
  }

  static detail::BatchResult run(const Loaded& m, const std::vector<Tensor>& inputs) {
    NoGrad no_grad;
    nn::ModeScope eval(nn::Mode::Eval);
    return {m.run(inputs), m.version};
  }

  HttpResponse metadata(const Loaded& m) const {
    nlohmann::json inputs = nlohmann::json::array(), outputs = nlohmann::json::array();
    for (const auto& s : m.inputs) inputs.push_back(detail::spec_json(s));
    for (const auto& s : m.outputs) outputs.push_back(detail::spec_json(s));
    return json_response(200, {{"name", source.name},
                               {"versions", {std::to_string(m.version)}},
                               {"platform", "loom"},
                               {"inputs", inputs},
                               {"outputs", outputs}});
  }

  // A boolean member `key` of the object `parent["parameters"]`, `fallback` when absent; BadRequest
  // when it is there and not a boolean.
  static bool flag(const nlohmann::json& parent, const char* key, bool fallback) {
    if (!parent.contains("parameters")) return fallback;
    const auto& p = parent["parameters"];
    if (!p.is_object()) throw BadRequest("\"parameters\" must be an object");
    if (!p.contains(key)) return fallback;
    if (!p[key].is_boolean()) throw BadRequest(std::string("parameter \"") + key + "\" must be true or false");
    return p[key].get<bool>();
  }

  HttpResponse infer(const std::shared_ptr<const Loaded>& model, const HttpRequest& r) {
    const Loaded& m = *model;
    // The binary tensor extension: the JSON is the body's first Inference-Header-Content-Length
    // bytes, raw input data follows.
    std::string_view text = r.body, binary;
    if (!r.binary_header_length.empty()) {
      size_t n = 0;
      const std::string& h = r.binary_header_length;
      const auto [end, ec] = std::from_chars(h.data(), h.data() + h.size(), n);
      if (ec != std::errc() || end != h.data() + h.size() || n > r.body.size())
        return error(400, "the Inference-Header-Content-Length header is " + loom::detail::quote_text(r.binary_header_length) +
                              ": it must be the length of the JSON at the body's start (0 to " + std::to_string(r.body.size()) + ")");
      text = text.substr(0, n);
      binary = std::string_view(r.body).substr(n);
    }
    std::string parse_error;
    const auto json = loom::detail::parse_json(text, &parse_error);
    if (!json) return error(400, "the request body is not JSON: " + parse_error);
    std::vector<Tensor> inputs;
    std::vector<size_t> wanted;      // positions of the outputs asked for
    std::vector<bool> as_binary;     // each in the binary extension
    try {
      inputs = detail::parse_inputs(*json, m.inputs, binary);
      // the protocol's id is a string, echoed; a number would come back changed or not at all
      if (json->contains("id") && !(*json)["id"].is_string())
        throw BadRequest("\"id\" must be a string (it is echoed in the answer), not " + std::string((*json)["id"].type_name()));
      const bool all_binary = flag(*json, "binary_data_output", false);
      if (json->contains("outputs")) {
        const auto& outs = (*json)["outputs"];
        if (!outs.is_array()) throw BadRequest("\"outputs\" must be an array of {\"name\"}");
        for (const auto& o : outs) {
          if (!o.is_object() || !o.contains("name") || !o["name"].is_string())
            throw BadRequest("each requested output must be an object with a string \"name\"");
          const std::string name = o["name"].get<std::string>();
          size_t k = 0;
          while (k < m.outputs.size() && m.outputs[k].name != name) ++k;
          if (k == m.outputs.size()) {
            std::string valid;
            for (const auto& s : m.outputs) valid += (valid.empty() ? "'" : ", '") + s.name + "'";
            throw BadRequest("unknown output " + loom::detail::quote_text(name) + " (the model's outputs: " + valid + ")");
          }
          wanted.push_back(k);
          as_binary.push_back(flag(o, "binary_data", all_binary));
        }
      }
      if (wanted.empty())
        for (size_t k = 0; k < m.outputs.size(); ++k) wanted.push_back(k), as_binary.push_back(all_binary);
    } catch (const BadRequest& e) {
      return error(400, e.what());
    }
    auto future = batcher->submit(std::move(inputs), model, m.batchable);
    if (!future) return error(503, "the server is busy: " + std::to_string(options.max_queue) + " requests are waiting");
    detail::BatchResult result;
    try {
      result = future->get();
    } catch (const Error& e) {  // a shape the graph cannot take, found when it ran
      return error(400, std::string("the model could not run on these inputs: ") + e.what());
    }
    nlohmann::json out = {{"model_name", source.name}, {"model_version", std::to_string(result.version)}};
    if (json->contains("id")) out["id"] = (*json)["id"];
    out["outputs"] = nlohmann::json::array();
    std::string raw;  // the binary outputs' bytes, after the JSON
    for (size_t i = 0; i < wanted.size(); ++i) {
      const size_t k = wanted[i];
      const std::string& name = k < m.outputs.size() ? m.outputs[k].name : std::to_string(k);
      out["outputs"].push_back(as_binary[i] ? detail::output_binary(name, result.outputs.at(k), raw)
                                            : detail::output_json(name, result.outputs.at(k)));
    }
    HttpResponse response = json_response(200, out);
    if (std::find(as_binary.begin(), as_binary.end(), true) != as_binary.end()) {
      response.headers["Inference-Header-Content-Length"] = std::to_string(response.body.size());
      response.content_type = "application/octet-stream";
      response.body += raw;
    }
    return response;
  }

  HttpResponse route(const HttpRequest& r, std::string& route_name) {
    if (!detail::host_allowed(options.host, r.host))
      return error(403, "this server answers requests for 127.0.0.1 or localhost only, not for " + loom::detail::quote_text(r.host) +
                            " (another site's name resolving to this machine); serve on another --host to be reached by name");
    const auto p = split_path(r.path);
    const bool get = r.method == "GET" || r.method == "HEAD";
    auto only = [&](const char* method) {
      return error(405, "use " + std::string(method) + " for " + r.path);
    };
    if (p.size() == 1 && p[0] == "metrics") {
      route_name = "metrics";
      if (!get) return only("GET");
      return {200, "text/plain; version=0.0.4", metrics.text(current()->version, batcher->queued()), {}};
    }
    if (p.empty() || p[0] != "v2") return error(404, "no route " + loom::detail::quote_text(r.path) + " (the API is under /v2)");
    if (p.size() == 1) {
      route_name = "server";
      if (!get) return only("GET");
      return json_response(200, {{"name", "loom"}, {"version", "0.1.0"}, {"extensions", nlohmann::json::array()}});
    }
    if (p.size() == 3 && p[1] == "health" && (p[2] == "live" || p[2] == "ready")) {
      route_name = "health";
      if (!get) return only("GET");
      return json_response(200, {{p[2], true}});
    }
    if (p.size() >= 3 && p[1] == "models") {
      const size_t named = name_segments(p, 2, source.name);
      if (named == 0)
        return error(404, "no model " + loom::detail::quote_text(p[2]) + " (this server serves " + loom::detail::quote_text(source.name) +
                              (source.name.find('/') != std::string::npos ? ", its '/' sent as %2F or as it is" : "") + ")");
      size_t next = 2 + named;
      const auto m = current();  // one version for the whole request: it also answers an infer
      if (p.size() >= next + 2 && p[next] == "versions") {
        if (p[next + 1] != std::to_string(m->version))
          return error(404, "model " + loom::detail::quote_text(source.name) + " version " + loom::detail::quote_text(p[next + 1]) +
                                " is not served (serving version " + std::to_string(m->version) + ")");
        next += 2;
      }
      if (p.size() == next) {
        route_name = "metadata";
        if (!get) return only("GET");
        return metadata(*m);
      }
      if (p.size() == next + 1 && p[next] == "ready") {
        route_name = "ready";
        if (!get) return only("GET");
        return json_response(200, {{"name", source.name}, {"ready", true}});
      }
      if (p.size() == next + 1 && p[next] == "infer") {
        route_name = "infer";
        if (r.method != "POST") return only("POST");
        return infer(m, r);
      }
    }
    return error(404, "no route " + loom::detail::quote_text(r.path));
  }
};

Server::Server(ModelSource source, ServeOptions options) : impl_(std::make_unique<Impl>()) {
  if (source.name.empty() || !source.current_version || !source.load)
    throw ValueError("Server: the model source needs a name, current_version and load");
  if (options.max_batch < 1 || options.max_wait_us < 0 || options.max_request_bytes < 1 || options.max_queue < 1 ||
      options.reload_poll_ms < 0 || options.threads < 1 || options.port < 0 || options.port > 65535 ||
      options.max_connections < 1 || options.header_timeout_ms < 1 || options.body_timeout_ms < 1 || options.idle_timeout_ms < 1)
    throw ValueError("Server: options out of range (max_batch, max_queue, max_request_bytes, threads, max_connections, "
                     "header_timeout_ms, body_timeout_ms, idle_timeout_ms >= 1; max_wait_us, reload_poll_ms >= 0; port 0 to 65535)");
  impl_->source = std::move(source);
  impl_->options = std::move(options);
  impl_->model = load_version(impl_->source, impl_->source.current_version());
  Impl* impl = impl_.get();
  impl_->batcher = std::make_unique<detail::Batcher>(
      [](const Loaded& m, const std::vector<Tensor>& inputs) { return Impl::run(m, inputs); },
      [impl](int64_t requests, int64_t rows) { impl->metrics.batch(requests, rows); }, impl_->options.max_batch,
      impl_->options.max_wait_us, impl_->options.max_queue);
}

Server::~Server() { stop(); }

HttpResponse Server::handle(const HttpRequest& request) {
  const auto t0 = Clock::now();
  std::string route_name = "other";
  HttpResponse response;
  try {
    response = impl_->route(request, route_name);
  } catch (const std::exception& e) {
    response = error(500, std::string("internal error: ") + e.what());
  }
  impl_->metrics.request(route_name, response.status, std::chrono::duration<double>(Clock::now() - t0).count());
  return response;
}

int64_t Server::version() const { return impl_->current()->version; }

bool Server::reload() {
  std::lock_guard lock(impl_->reload_mutex);
  try {
    const int64_t v = impl_->source.current_version();
    if (v == impl_->current()->version) return false;
    auto next = load_version(impl_->source, v);
    {
      std::lock_guard model_lock(impl_->model_mutex);
      impl_->model = std::move(next);
    }
    impl_->metrics.reload(true);
    return true;
  } catch (const std::exception&) {
    impl_->metrics.reload(false);  // keep serving the version in force
    throw;
  }
}

void Server::start() {
  // under the holder's lock: the earlier start's poller joined, the server made, its poller started
  impl_->http.start([this] {
    if (impl_->poller.joinable()) impl_->poller.join();  // an earlier start's, stopped
    detail::HttpServerOptions http = detail::http_options(impl_->options);
    auto serve = [this](const detail::HttpRequestData& req) {
      const HttpResponse r = handle({req.method, req.path, req.body, req.header("Host"), req.header("Inference-Header-Content-Length")});
      detail::HttpAnswer answer{r.status, {{"Content-Type", r.content_type}}, r.body};
      for (const auto& h : r.headers) answer.headers.emplace_back(h.first, h.second);
      return answer;
    };
    // refusals before the request reaches handle (a body past the limit or too slow, a malformed
    // request, the connection cap): JSON errors as handle's, counted in /metrics
    auto refuse = [this](int status, const std::string& message) {
      impl_->metrics.request("other", status, 0);
      return detail::HttpAnswer{status, {{"Content-Type", "application/json"}}, dump_json(nlohmann::json{{"error", message}})};
    };
    auto listener = std::make_shared<detail::HttpServer>(std::move(http), serve, refuse, "Server");
    if (impl_->options.reload_poll_ms > 0)
      impl_->poller = std::thread([this, listener] {
        while (listener->sleep_while_running(std::chrono::milliseconds(impl_->options.reload_poll_ms))) {
          try {
            reload();
          } catch (const std::exception&) {  // counted in /metrics; the old version keeps serving
          }
        }
      });
    return listener;
  });
}

int Server::port() const { return impl_->http.port(); }

void Server::wait() { impl_->http.wait(); }

void Server::stop() {
  impl_->http.stop([this] {
    if (impl_->poller.joinable()) impl_->poller.join();
  });
}

}  // namespace loom::serve
