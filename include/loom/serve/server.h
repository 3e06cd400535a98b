#pragma once
// A model server speaking the Open Inference Protocol v2 over REST (the protocol of Triton,
// KServe and others; docs/serve.md), for one model of a Store's registry named by an alias:
//
//   serve::Server server(serve::ModelSource::from_store(store::Store::open("runs.db"), "mnist", "production"),
//                        {.port = 8000, .max_batch = 32});
//   server.start();   // GET /v2/health/ready, POST /v2/models/mnist/infer, GET /metrics, ...
//   server.wait();    // until stop()
//
// Concurrent requests are batched (up to max_batch rows: those that queued while the previous
// batch ran, and those arriving within max_wait_us of the first) and run as one call of the graph; each gets its own rows back, equal to what
// predict gives on them alone. When the alias moves to another version the server loads it and
// switches between batches, without dropping a request. `handle` answers one request without a
// socket (what the tests drive); `start` serves them over HTTP on `host` only, 127.0.0.1 unless
// told otherwise: an event loop holds every connection (Boost.Beast on Asio, private to the
// library), idle and slow clients cost no thread, headers and bodies have deadlines, and stop()
// answers every request received before it closes. Every route only reads, so none needs a token.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "loom/core/api.h"
#include "loom/graph/graph.h"
#include "loom/store/store.h"

namespace loom::serve {

struct LOOM_API ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                        // 0: a free port, port() tells which
  int64_t max_batch = 32;                 // rows run together (1: every request alone)
  int64_t max_wait_us = 0;                // how long a batch's first request waits for others (0: it
                                          // takes what queued while the previous batch ran, as Triton's
                                          // default does)
  int64_t max_request_bytes = 16 << 20;   // a larger body is refused (413)
  int64_t max_queue = 4096;               // requests waiting to run; past it, 503
  int64_t reload_poll_ms = 1000;          // how often the alias is checked (0: never)
  int threads = 8;                        // requests handled at once (workers; connections are
                                          // not bound to them: an idle or slow one holds none)
  int64_t max_connections = 10000;        // open at once; past it a connection is answered 503
  int64_t header_timeout_ms = 10000;      // a request's first byte to the end of its header (408)
  int64_t body_timeout_ms = 60000;        // the end of the header to the end of the body (408)
  int64_t idle_timeout_ms = 60000;        // a connection waiting for a request is closed after it
};

// Where the served graph comes from: a name for the protocol, the version in force now, and
// the graph of a version. `current_version` is called every reload_poll_ms; `load` only when the
// version changed.
struct LOOM_API ModelSource {
  std::string name;
  std::function<int64_t()> current_version;
  std::function<Graph(int64_t)> load;

  // The version of model `name` that `alias` names in `store` (an alias or "latest").
  static ModelSource from_store(store::Store store, const std::string& name, const std::string& alias);
  // One fixed graph, served as version 1.
  static ModelSource fixed(const std::string& name, Graph graph);
};

// One HTTP exchange, without the socket.
struct LOOM_API HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // "/v2/models/mnist/infer" as sent, percent-encoded (no query string)
  std::string body;
  std::string host{};  // the Host header ("" when absent)
  // The binary tensor extension's Inference-Header-Content-Length header ("" when absent): the
  // body's first that many bytes are the JSON, the inputs' raw data follows.
  std::string binary_header_length{};
  std::string authorization{};  // the Authorization header ("" when absent): TextServer's api_key
};
struct LOOM_API HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::map<std::string, std::string> headers{};  // besides Content-Type (the binary extension's)
};

class LOOM_API Server {
 public:
  // Loads the source's current version (its errors propagate: nothing is served); ValueError
  // for options out of range.
  explicit Server(ModelSource source, ServeOptions options = {});
  ~Server();  // stops
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Answers one request: every route of the protocol, /metrics, and JSON errors
  // ({"error": "..."}) with 400 (bad request), 403 (a Host header naming another machine while
  // listening on loopback: DNS rebinding), 404 (no such route or model), 405, 413, 503.
  HttpResponse handle(const HttpRequest& request);

  // Listens on host:port in background threads (IOError when the address cannot be bound).
  void start();
  int port() const;  // the bound port once started
  void wait();       // blocks until stop()
  void stop();       // stops accepting; every request received (running, or waiting for a
                     // worker) is answered first, connections between requests are closed

  int64_t version() const;  // the version served now
  bool reload();            // checks the source now; true when it switched to another version

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::serve
