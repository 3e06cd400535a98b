#include "serve/listener.h"

#include <sys/socket.h>

#include "loom/core/error.h"

namespace loom::serve::detail {

void route_every_method(httplib::Server& http, const httplib::Server::Handler& handler) {
  http.Get(".*", handler);
  http.Post(".*", handler);
  http.Put(".*", handler);
  http.Delete(".*", handler);
  http.Patch(".*", handler);
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
