#include "serve/listener.h"

#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <optional>

#include "loom/core/error.h"

namespace loom::serve::detail {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool loopback(const std::string& host) { return host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "[::1]"; }

// The declared body length: nullopt when absent, -1 when not a decimal number.
std::optional<int64_t> content_length(const httplib::Request& req) {
  if (!req.has_header("Content-Length")) return std::nullopt;
  const std::string text = req.get_header_value("Content-Length");
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec == std::errc::result_out_of_range) return std::numeric_limits<int64_t>::max();  // past any limit
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return -1;
  return n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                         : static_cast<int64_t>(n);
}

}  // namespace

void close_after(httplib::Response& res) {
  res.set_header("Connection", "close");
  // cpp-httplib keeps a connection open unless writing the answer failed: the answer goes out
  // through a provider that writes it whole and then says it failed, which ends the connection.
  // (What is left of a refused body is never read, so the next request could not be found in it.)
  auto body = std::make_shared<const std::string>(std::move(res.body));
  res.body.clear();
  std::string type = res.get_header_value("Content-Type");
  res.headers.erase("Content-Type");
  res.set_content_provider(body->size(), type.empty() ? "application/json" : type,
                           [body](size_t offset, size_t length, httplib::DataSink& sink) {
                             sink.write(body->data() + offset, std::min(length, body->size() - offset));
                             return false;
                           });
}

void serve_every_request(httplib::Server& http, const httplib::Server::Handler& handler, size_t max_body_bytes,
                         const ErrorWriter& error) {
  auto refuse = [error](httplib::Response& res, int status, const std::string& message) {
    error(res, status, message);
    close_after(res);
  };
  auto with_body = [handler, max_body_bytes, refuse](const httplib::Request& req, httplib::Response& res,
                                                      const httplib::ContentReader& read) {
    const std::string limit = "the request body is larger than " + std::to_string(max_body_bytes) + " bytes";
    const auto declared = content_length(req);
    if (declared && *declared < 0) return refuse(res, 400, "the Content-Length header is not a number of bytes");
    if (declared && static_cast<uint64_t>(*declared) > max_body_bytes) return refuse(res, 413, limit);
    httplib::Request with = req;
    // Neither a length nor chunks: the body is empty (RFC 9112, 6.3), not "what comes until the
    // client closes", which left such a request waiting for the read timeout.
    std::string encoding = req.get_header_value("Transfer-Encoding");
    std::transform(encoding.begin(), encoding.end(), encoding.begin(), [](unsigned char c) { return std::tolower(c); });
    const bool chunked = encoding.find("chunked") != std::string::npos;
    if (!declared && !chunked) return handler(with, res);
    bool too_large = false;
    const bool read_whole = read([&](const char* data, size_t n) {
      if (with.body.size() + n > max_body_bytes) {
        too_large = true;  // stops reading here: no more than the bound is ever held
        return false;
      }
      with.body.append(data, n);
      return true;
    });
    if (too_large) return refuse(res, 413, limit);
    if (!read_whole) return refuse(res, 400, "the request body could not be read (cut short, or a malformed chunk)");
    handler(with, res);
  };
  http.Get(".*", handler);
  http.Post(".*", with_body);
  http.Put(".*", with_body);
  http.Patch(".*", with_body);
  http.Delete(".*", with_body);  // cpp-httplib offers every DELETE to the content readers
  http.set_error_handler([error](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty() || res.has_header("Content-Type")) return;  // an answer of ours
    const std::string message = res.status == 413   ? "the request is too large"
                                : res.status == 414 ? "the request line is too long"
                                : res.status == 404 ? "no route for this method"
                                                    : "the request could not be read (a malformed request line or header)";
    error(res, res.status, message);
  });
}

std::string raw_path(const httplib::Request& req) {
  const std::string& target = req.target.empty() ? req.path : req.target;
  return target.substr(0, target.find('?'));
}

std::string percent_decode(const std::string& segment) {
  std::string out;
  out.reserve(segment.size());
  for (size_t i = 0; i < segment.size(); ++i) {
    int hi = -1, lo = -1;
    if (segment[i] == '%' && i + 2 < segment.size()) {
      hi = hex_digit(segment[i + 1]);
      lo = hex_digit(segment[i + 2]);
    }
    if (hi >= 0 && lo >= 0) {
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += segment[i];
    }
  }
  return out;
}

bool host_allowed(const std::string& listen_host, const std::string& host_header) {
  if (!loopback(listen_host) || host_header.empty()) return true;
  const std::string name = !host_header.empty() && host_header[0] == '[' ? host_header.substr(0, host_header.find(']') + 1)
                                                                         : host_header.substr(0, host_header.find(':'));
  return loopback(name);
}

Listener::Listener(std::unique_ptr<httplib::Server> http, const std::string& host, int port, const std::string& who)
    : http_(std::move(http)) {
  // SO_REUSEADDR alone: a restart binds at once past TIME_WAIT, but a port another server listens
  // on is refused. cpp-httplib's default adds SO_REUSEPORT, with which a second server (any
  // program of the same user) silently shares the port and takes part of its requests.
  http_->set_socket_options([](auto sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // An answer's last segment leaves at once: with Nagle's algorithm a body written after its
  // headers waited for the client's delayed ACK, 40 ms per request on a kept-alive connection.
  http_->set_tcp_nodelay(true);
  if (port == 0) {
    port = http_->bind_to_any_port(host);
    if (port <= 0) throw IOError(who + ": cannot bind a port on " + host);
  } else if (!http_->bind_to_port(host, port)) {
    throw IOError(who + ": cannot bind " + host + ":" + std::to_string(port) + " (in use, or not an address of this machine)");
  }
  port_ = port;
  thread_ = std::thread([h = http_.get()] { h->listen_after_bind(); });
}

Listener::~Listener() { stop(); }

bool Listener::running() const {
  std::lock_guard lock(mutex_);
  return running_;
}

void Listener::wait() {
  std::unique_lock lock(mutex_);
  stopped_.wait(lock, [&] { return !running_; });
}

bool Listener::sleep_while_running(std::chrono::milliseconds period) {
  std::unique_lock lock(mutex_);
  stopped_.wait_for(lock, period, [&] { return !running_; });
  return running_;
}

void Listener::stop() {
  {
    std::lock_guard lock(mutex_);
    if (!running_) return;
    running_ = false;
  }
  stopped_.notify_all();
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace loom::serve::detail
