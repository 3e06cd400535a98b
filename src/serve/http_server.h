#pragma once
// The HTTP/1.1 server both the model server and the dashboard run on (the seam serve offers ui,
// tests/layering), event-driven: one thread waits on every connection at once (Boost.Asio's
// epoll loop, Boost.Beast's parser, both confined to http_server.cpp), and a small pool of
// workers runs the handler, so that neither idle nor slow clients hold a thread and a handler
// that blocks (inference, a store query) never stops the loop. Deadlines are totals, not idle
// times: a header trickled a byte a second is cut at header_timeout whatever its pace.
// docs/serve.md ("HTTP") says why Beast and what each limit is for.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::serve::detail {

// One request, read whole (its body no larger than max_body_bytes).
struct HttpRequestData {
  std::string method;                                       // as sent: "GET", "POST", ...
  std::string path;                                         // as sent, percent-encoded, without the query
  std::string query;                                        // after '?', as sent ("" when none)
  std::vector<std::pair<std::string, std::string>> headers;  // in order, names as sent
  std::string body;
  // The value of header `name` (any case), "" when absent.
  std::string header(const std::string& name) const;
};

// Writes one piece of a streamed answer, sent as soon as the connection can take it; false once
// the client is gone (it closed the connection, a write failed or took past write_timeout, or the
// server closed it past its drain): the producer should stop.
using StreamWriter = std::function<bool(std::string_view piece)>;

// One answer. Content-Length (or Transfer-Encoding) and Connection are the server's to write.
struct HttpAnswer {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // Content-Type among them
  std::string body;
  // When set, the answer is streamed (server-sent events) and `body` is not sent: the status and
  // headers go out at once with Transfer-Encoding: chunked, then `stream` runs on the handler's
  // worker, each piece it writes going out as one chunk; the answer ends when it returns. A
  // client closing its connection meanwhile is seen at once (the writer answers false), not at
  // the next write.
  std::function<void(const StreamWriter&)> stream{};
};

using HttpHandler = std::function<HttpAnswer(const HttpRequestData&)>;
// The server's own refusals (413, 408, 400, 503, ...) in the caller's format: status and message.
using HttpErrorWriter = std::function<HttpAnswer(int status, const std::string& message)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                     // 0: a free port
  int workers = 8;                  // handlers run at once
  int64_t max_connections = 10000;  // past it a connection is answered 503 and closed
  int64_t max_body_bytes = 1 << 20;  // a larger body is refused (413) while it is read
  std::chrono::milliseconds header_timeout{10000};  // first byte of a request to the end of its header
  std::chrono::milliseconds body_timeout{60000};    // end of the header to the end of the body
  std::chrono::milliseconds idle_timeout{60000};    // a connection waiting for a request's first byte
  std::chrono::milliseconds write_timeout{60000};   // an answer written to a client that does not read
  std::chrono::milliseconds drain_timeout{30000};   // stop(): the longest wait for requests in flight
  // Added to every answer, refusals included, unless the answer sets the same header.
  std::vector<std::pair<std::string, std::string>> default_headers;
};

struct Connection;  // http_server.cpp's

class HttpServer {
 public:
  // Binds host:port (SO_REUSEADDR only: a second server on the same port is refused, not given
  // part of its requests) with a backlog of SOMAXCONN and starts serving; IOError naming `who`
  // and the address when it cannot bind.
  HttpServer(HttpServerOptions options, HttpHandler handler, HttpErrorWriter error, const std::string& who);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  bool running() const;
  void wait();  // until stop()
  // Sleeps `period`, or less when stopped meanwhile: false once stopped (a background poller's loop).
  bool sleep_while_running(std::chrono::milliseconds period);
  // Drains, then returns: stops accepting (connections already in the listen queue are taken in
  // first), answers every request received, in flight or waiting for a worker, each answer
  // closing its connection, gives a header being received 1 s more (then 408), and closes the
  // connections between requests; after drain_timeout what is left is closed. Again: nothing.
  void stop();
  // Connections open now (tests, metrics).
  int64_t connections() const;

 private:
  friend struct Connection;
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// The HTTP server a model server (serve::Server, serve::TextServer) or the dashboard runs between
// its start() and its stop(), held once for the three: port(), wait() and stop() may be called
// from any thread while another starts or stops it.
class HttpServerHolder {
 public:
  // Under the holder's lock: when no server is running, `make()` makes one (with whatever must
  // start with it) and the holder keeps it; when one is running, nothing.
  template <class Make>
  void start(Make&& make) {
    std::lock_guard lock(mutex_);
    if (server_ && server_->running()) return;
    server_ = make();
  }
  int port() const;  // 0 before the first start
  // Until the server stops; a waiter keeps the server it waits on, whatever a later start holds.
  void wait();
  // Stops the server (HttpServer::stop), then runs `after` (what started with it, to end) under
  // the lock, so that a start cannot come between.
  void stop(const std::function<void()>& after = {});

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<HttpServer> server_;
};

// One segment of a path, percent-decoded ("team%2Fmlp" -> "team/mlp"); a '%' not followed by two
// hexadecimal digits stays as it is.
std::string percent_decode(const std::string& segment);

// A query string's parameters ("a=1&b=x+y" -> a: "1", b: "x y"), each decoded; a name given
// twice keeps its last value.
std::vector<std::pair<std::string, std::string>> parse_query(const std::string& query);

// Whether two header names are the same (header names are case-insensitive).
bool same_header_name(std::string_view a, std::string_view b);

// Whether a request naming `host_header` (its Host header, "name[:port]", "[v6]:port") may be
// answered by a server listening on `listen_host`. On a loopback address only requests for
// 127.0.0.1, localhost or [::1] are: a page of another site whose name was made to resolve to
// this machine (DNS rebinding) names its own host. Any host is fine on other addresses, and an
// absent header (HTTP/1.0, a program) too.
bool host_allowed(const std::string& listen_host, const std::string& host_header);

// The HTTP layer's options for a model server whose options name them as ServeOptions does
// (serve::ServeOptions, serve::TextServeOptions): host, port, threads, max_connections,
// max_request_bytes and the three timeouts in milliseconds; every answer gets api_headers().
template <class ServerOptions>
HttpServerOptions http_options(const ServerOptions& o);

// The headers every answer of the model servers (serve::Server, serve::TextServer) carries, their
// refusals included: nothing in them is a page to render, frame or cache.
std::vector<std::pair<std::string, std::string>> api_headers();

// Compares a secret a client sent with the expected one in constant time (how long it takes does
// not tell how much of a guess was right); false when either is empty.
bool same_secret(const std::string& given, const std::string& expected);

template <class ServerOptions>
HttpServerOptions http_options(const ServerOptions& o) {
  HttpServerOptions http;
  http.host = o.host;
  http.port = o.port;
  http.workers = o.threads;
  http.max_connections = o.max_connections;
  http.max_body_bytes = o.max_request_bytes;
  http.header_timeout = std::chrono::milliseconds(o.header_timeout_ms);
  http.body_timeout = std::chrono::milliseconds(o.body_timeout_ms);
  http.idle_timeout = std::chrono::milliseconds(o.idle_timeout_ms);
  http.default_headers = api_headers();  // on every answer, the HTTP layer's own refusals included
  return http;
}

}  // namespace loom::serve::detail
