#pragma once
// A web dashboard over a store (docs/ui.md): pages of runs (a table of each metric's final, best
// and worst value; learning curves overlaid as server-drawn SVG over epochs or wall-clock time;
// a diff of hyper-parameters; runs grouped by one of them), models (versions, aliases, lineage,
// the architecture), datasets (versions, fields, a sample query, image previews) and the task
// queue, with the JSON API they read:
//
//   ui::Dashboard dashboard(store::Store::open("runs.db"), {.port = 8080});
//   dashboard.start();   // http://127.0.0.1:8080/
//   dashboard.wait();    // until stop()
//
// `handle` answers one request without a socket (what the tests drive); `start` serves them
// over HTTP on `host` only, 127.0.0.1 unless told otherwise, on the model server's event-driven
// HTTP layer (idle and slow clients hold no thread; header and body deadlines; stop() answers
// every request received). Safe by default:
// every route reads, unless `allow_writes`, and then a writing request (moving an alias,
// cancelling a task) must carry the token in the X-Loom-Token header; every response carries a
// Content-Security-Policy allowing only the dashboard's own scripts, styles and requests. On a
// loopback address, a request naming another host (a DNS rebinding attack: a page of another
// site whose name now resolves to 127.0.0.1) is refused.
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "loom/core/api.h"
#include "loom/store/store.h"

namespace loom::ui {

// One HTTP exchange, without the socket.
struct LOOM_API Request {
  std::string method = "GET";
  std::string path;                           // "/api/runs" as sent, percent-encoded (no query string)
  std::map<std::string, std::string> query;   // the query string's parameters, decoded
  std::string body;
  std::string token;                          // the X-Loom-Token header ("" when absent)
  std::string host;                           // the Host header ("" when absent)
};

struct LOOM_API Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::map<std::string, std::string> headers;  // besides Content-Type
};

struct LOOM_API DashboardOptions {
  std::string host = "127.0.0.1";
  int port = 8080;             // 0: a free port, port() tells which
  bool allow_writes = false;   // moving aliases and cancelling tasks (403 otherwise)
  std::string token;           // the writing requests' token; empty: a random one (random_token)
  int threads = 8;             // requests handled at once (workers; an idle or slow connection holds none)
  int64_t max_connections = 10000;    // open at once; past it a connection is answered 503
  int64_t header_timeout_ms = 10000;  // a request's first byte to the end of its header (408)
  int64_t idle_timeout_ms = 60000;    // a connection waiting for a request is closed after it
};

// 32 hexadecimal digits from OpenSSL's RAND_bytes (128 bits); IOError if it cannot give them.
LOOM_API std::string random_token();

class LOOM_API Dashboard {
 public:
  // ValueError for options out of range.
  Dashboard(store::Store store, DashboardOptions options = {});
  ~Dashboard();  // stops
  Dashboard(const Dashboard&) = delete;
  Dashboard& operator=(const Dashboard&) = delete;

  // Answers one request: the pages, their scripts and styles, and the JSON API under /api
  // (docs/ui.md); errors as JSON ({"error": "..."}, naming what would be valid) with 400, 401
  // (a writing request without the right token), 403 (writes not allowed, or a Host header that
  // is not this machine's while listening on loopback), 404, 405, 409.
  Response handle(const Request& request);

  const std::string& token() const;  // "" unless writes are allowed

  // Listens on host:port in background threads (IOError when the address cannot be bound).
  void start();
  int port() const;  // the bound port once started
  void wait();       // blocks until stop()
  void stop();       // stops accepting; every request received is answered first

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::ui
