#pragma once
// One HTTP server's life on one address, shared by the model server and the dashboard (the seam
// serve offers ui, tests/layering): bind host:port (0: a free port), listen in a thread of its
// own (TCP_NODELAY; SO_REUSEADDR only), wait until stopped, stop answering requests in flight first.
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace loom::serve::detail {

// Routes every method of every path to `handler` (each caller answers 405 itself, with its own
// error format).
void route_every_method(httplib::Server& http, const httplib::Server::Handler& handler);

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
