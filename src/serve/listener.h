#pragma once
// One HTTP server's life on one address, shared by the model server and the dashboard (the seam
// serve offers ui, tests/layering): bind host:port (0: a free port), listen in a thread of its
// own (TCP_NODELAY; SO_REUSEADDR only), wait until stopped, stop answering requests in flight first.
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace loom::serve::detail {

// Writes an error answer in a server's own format (a JSON {"error": message}) with `status`.
using ErrorWriter = std::function<void(httplib::Response& res, int status, const std::string& message)>;

// Routes every method of every path to `handler` (each caller answers 405 itself, with its own
// error format), the body read here rather than by cpp-httplib: bounded by `max_body_bytes` while
// it is read, whatever the transfer encoding (cpp-httplib reads a chunked body whole, however
// large), a Content-Length past the bound refused before a byte of the body is read (cpp-httplib
// read and discarded it first, or waited for its read timeout when the client sent less), and
// any content type taken as it is (cpp-httplib parses an application/x-www-form-urlencoded body,
// curl's and urllib's default, as form fields and refuses one over 8 KiB). Such refusals (413;
// 400 for a body that could not be read) are written by `error` and end the connection, since
// the rest of the body is never read. cpp-httplib's own refusals (a malformed request line or
// header) are written by `error` too.
void serve_every_request(httplib::Server& http, const httplib::Server::Handler& handler, size_t max_body_bytes,
                         const ErrorWriter& error);

// Ends an answer (already given its status, headers and body) by closing the connection after it.
void close_after(httplib::Response& res);

// The path of a request as the client sent it (percent-encoded, without the query): the one to
// split, since cpp-httplib's decoded path turns an encoded '/' in a name into a separator.
std::string raw_path(const httplib::Request& req);
// One segment of a path, percent-decoded ("team%2Fmlp" -> "team/mlp"); a '%' not followed by two
// hexadecimal digits stays as it is.
std::string percent_decode(const std::string& segment);

// Whether a request naming `host_header` (its Host header, "name[:port]", "[v6]:port") may be
// answered by a server listening on `listen_host`. On a loopback address only requests for
// 127.0.0.1, localhost or [::1] are: a page of another site whose name was made to resolve to
// this machine (DNS rebinding) names its own host. Any host is fine on other addresses, and an
// absent header (HTTP/1.0, a program) too.
bool host_allowed(const std::string& listen_host, const std::string& host_header);

class Listener {
 public:
  // Binds `http` to host:port and starts listening; IOError naming `who` and the address when it
  // cannot bind (in use, or not an address of this machine).
  Listener(std::unique_ptr<httplib::Server> http, const std::string& host, int port, const std::string& who);
  ~Listener();  // stops
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  int port() const { return port_; }
  bool running() const;
  void wait();  // until stop()
  // Sleeps `period`, or less when stopped meanwhile: false once stopped (a background poller's loop).
  bool sleep_while_running(std::chrono::milliseconds period);
  void stop();  // stops accepting, answers the requests in flight, joins; again: nothing

 private:
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::condition_variable stopped_;
  bool running_ = true;
};

}  // namespace loom::serve::detail
