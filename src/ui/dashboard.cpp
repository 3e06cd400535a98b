// The dashboard's routing, safety checks and HTTP server (loom/ui/dashboard.h).
#include "loom/ui/dashboard.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>

#include "core/utf8.h"
#include "loom/core/error.h"
#include "serve/http_server.h"
#include "ui/api.h"

namespace loom::ui {

using detail::HttpError;

std::string random_token() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw IOError("random_token: OpenSSL's RAND_bytes could not give 16 random bytes");
  std::string hex;
  char b[3];
  for (unsigned char c : bytes) {
    std::snprintf(b, sizeof b, "%02x", c);
    hex += b;
  }
  return hex;
}

namespace {

// Only the dashboard's own scripts, styles, images and API: nothing inline, nothing fetched
// from elsewhere, no framing.
constexpr const char* kPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// The path's segments, each percent-decoded after the split (the page encodes names with
// encodeURIComponent: a model "team/mlp" is the one segment "team%2Fmlp").
std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t i = 1;
  while (i <= path.size()) {
    const size_t j = std::min(path.find('/', i), path.size());
    parts.push_back(serve::detail::percent_decode(path.substr(i, j - i)));
    i = j + 1;
  }
  if (!parts.empty() && parts.back().empty()) parts.pop_back();  // a trailing slash
  return parts;
}

// The headers every answer carries, errors included.
const std::map<std::string, std::string>& security_headers() {
  static const std::map<std::string, std::string> headers = {{"Content-Security-Policy", kPolicy},
                                                             {"X-Content-Type-Options", "nosniff"},
                                                             {"Referrer-Policy", "no-referrer"},
                                                             {"X-Frame-Options", "DENY"},
                                                             {"Cache-Control", "no-store"}};
  return headers;
}

}  // namespace

struct Dashboard::Impl {
  explicit Impl(store::Store s) : store(std::move(s)) {}
  store::Store store;
  DashboardOptions options;
  serve::detail::HttpServerHolder http;

  Response route(const Request& r) {
    if (r.path.empty() || r.path[0] != '/') throw HttpError(400, "the path must start with '/'");
    if (!serve::detail::host_allowed(options.host, r.host))
      throw HttpError(403, "this dashboard answers requests for 127.0.0.1 or localhost only, not for " +
                               loom::detail::quote_text(r.host) + " (another site's name resolving to this machine)");
    const bool writing = r.method != "GET" && r.method != "HEAD";
    if (r.path.rfind("/api/", 0) != 0) {
      if (writing) throw HttpError(405, "use GET for " + r.path);
      const detail::Asset* asset = detail::find_asset(r.path == "/" ? "/index.html" : r.path);
      if (!asset) throw HttpError(404, "no page " + loom::detail::quote_text(r.path) + " (the dashboard is at /, its API under /api)");
      return {200, asset->content_type, asset->body, {}};
    }
    if (writing) {
      if (r.method != "POST") throw HttpError(405, "use GET, or POST for writing requests, not " + loom::detail::quote_text(r.method));
      if (!options.allow_writes)
        throw HttpError(403, "this dashboard is read-only: writing requests (moving an alias, cancelling a task) need 'loom ui --allow-writes'");
      if (!serve::detail::same_secret(r.token, options.token))
        throw HttpError(401, std::string("a writing request needs the token 'loom ui' printed at start, in the X-Loom-Token header (") +
                                 (r.token.empty() ? "none was given" : "the one given is not it") + ")");
    }
    std::vector<std::string> p = split_path(r.path.substr(4));
    if (p.empty()) throw HttpError(404, "no route /api (valid: /api/runs, /api/models, /api/datasets, /api/tasks)");
    if (p[0] == "runs") return detail::runs_api(store, r, p);
    if (p[0] == "models") return detail::models_api(store, r, p, writing);
    if (p[0] == "datasets") return detail::datasets_api(store, r, p);
    if (p[0] == "tasks") return detail::tasks_api(store, r, p, writing);
    throw HttpError(404, "no route " + loom::detail::quote_text(r.path) + " (valid: /api/runs, /api/models, /api/datasets, /api/tasks)");
  }
};

Dashboard::Dashboard(store::Store store, DashboardOptions options) : impl_(std::make_unique<Impl>(std::move(store))) {
  if (options.threads < 1 || options.port < 0 || options.port > 65535 || options.max_connections < 1 ||
      options.header_timeout_ms < 1 || options.idle_timeout_ms < 1)
    throw ValueError("Dashboard: options out of range (threads, max_connections, header_timeout_ms, idle_timeout_ms >= 1; "
                     "port 0 to 65535)");
  if (options.allow_writes && options.token.empty()) options.token = random_token();
  if (!options.allow_writes) options.token.clear();
  if (options.allow_writes && options.token.size() < 16)
    throw ValueError("Dashboard: a token of at least 16 characters is needed (empty: a random one)");
  impl_->options = std::move(options);
}

Dashboard::~Dashboard() { stop(); }

const std::string& Dashboard::token() const { return impl_->options.token; }

Response Dashboard::handle(const Request& request) {
  Response response;
  try {
    response = impl_->route(request);
  } catch (const HttpError& e) {
    response = detail::json_response({{"error", e.what()}}, e.status());
  } catch (const ValueError& e) {
    response = detail::json_response({{"error", e.what()}}, 400);
  } catch (const std::exception& e) {
    response = detail::json_response({{"error", std::string("internal error: ") + e.what()}}, 500);
  }
  for (const auto& [name, value] : security_headers()) response.headers[name] = value;
  return response;
}

void Dashboard::start() {
  impl_->http.start([this] {
    const DashboardOptions& o = impl_->options;
    serve::detail::HttpServerOptions http;
    http.host = o.host;
    http.port = o.port;
    http.workers = o.threads;
    http.max_connections = o.max_connections;
    http.max_body_bytes = 1 << 20;  // the writing requests' bodies are a few bytes
    http.header_timeout = std::chrono::milliseconds(o.header_timeout_ms);
    http.idle_timeout = std::chrono::milliseconds(o.idle_timeout_ms);
    // on every answer, the HTTP layer's own refusals included
    http.default_headers.assign(security_headers().begin(), security_headers().end());
    auto serve = [this](const serve::detail::HttpRequestData& req) {
      Request r{req.method, req.path, {}, req.body, req.header("X-Loom-Token"), req.header("Host")};
      for (auto& [name, value] : serve::detail::parse_query(req.query)) r.query[name] = value;
      const Response out = handle(r);
      // JSON and SVG are sent as UTF-8, said so (a browser would guess otherwise); the pages,
      // scripts and styles carry their own type
      const std::string& type = out.content_type;
      const bool text = type == "application/json" || type == "image/svg+xml";
      serve::detail::HttpAnswer answer{out.status, {{"Content-Type", text ? type + "; charset=utf-8" : type}}, out.body};
      for (const auto& h : out.headers) answer.headers.emplace_back(h.first, h.second);
      return answer;
    };
    auto refuse = [](int status, const std::string& message) {
      Response r = detail::json_response({{"error", message}}, status);
      return serve::detail::HttpAnswer{status, {{"Content-Type", "application/json; charset=utf-8"}}, r.body};
    };
    return std::make_shared<serve::detail::HttpServer>(std::move(http), serve, refuse, "Dashboard");
  });
}

int Dashboard::port() const { return impl_->http.port(); }

void Dashboard::wait() { impl_->http.wait(); }

void Dashboard::stop() { impl_->http.stop(); }

}  // namespace loom::ui
