#pragma once
// A loopback TCP connection for the HTTP requests a well-behaved client never sends (a chunked
// body without end, a Content-Length larger than what follows, a malformed request line, a
// header sent a byte at a time), and the crowds of them the load tests hold open, shared by the
// model server's and the dashboard's tests. Every wait is bounded.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace loom_test {

class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  // Adopts a connected socket (one of connect_many's).
  static RawConnection adopt(int fd) { return RawConnection(fd, true); }
  RawConnection(RawConnection&& o) noexcept : fd_(o.fd_), connected_(o.connected_) { o.fd_ = -1; }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  bool connected() const { return connected_; }

  // Sends `data`, waiting at most `timeout` for room: the bytes sent (fewer when the peer closed,
  // reset, or stopped reading).
  size_t send(std::string_view data, std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    size_t sent = 0;
    while (sent < data.size()) {
      pollfd p{fd_, POLLOUT, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0 || (p.revents & (POLLERR | POLLHUP))) break;
      const ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    return sent;
  }

  // What arrives until the peer closes (or resets) or `timeout` passes.
  std::string read_all(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string out;
    char buf[65536];
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) break;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  RawConnection(int fd, bool connected) : fd_(fd), connected_(connected) {}
  int fd_ = -1;
  bool connected_ = false;
};

// The status of an HTTP answer's text ("HTTP/1.1 413 Payload Too Large ..." -> 413), 0 if none.
inline int status_of(const std::string& answer) {
  if (answer.rfind("HTTP/1.", 0) != 0 || answer.size() < 12) return 0;
  return std::atoi(answer.substr(9, 3).c_str());
}

// Whether the answer's headers hold `line` ("X-Content-Type-Options: nosniff"), case as sent.
inline bool has_header_line(const std::string& answer, const std::string& line) {
  const std::string head = answer.substr(0, answer.find("\r\n\r\n")) + "\r\n";
  return head.find("\r\n" + line + "\r\n") != std::string::npos;
}

// Raises this process's open-file limit to its hard limit: the load tests hold a thousand
// connections, both ends in this process. The limit reached (the soft one when it cannot be raised).
inline rlim_t raise_open_files() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &r) != 0) ::getrlimit(RLIMIT_NOFILE, &r);
  }
  return r.rlim_cur;
}

// Opens `n` loopback connections to `port` at once (non-blocking connects, then one wait for all
// of them, at most `timeout`): the sockets connected, in blocking mode again. A connect refused,
// reset or still pending at the deadline counts in `failed`.
inline std::vector<int> connect_many(int port, int n, std::chrono::milliseconds timeout, int* failed) {
  std::vector<int> pending, done;
  *failed = 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < n; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      ++*failed;
      continue;
    }
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      done.push_back(fd);
    } else if (errno == EINPROGRESS) {
      pending.push_back(fd);
    } else {
      ::close(fd);
      ++*failed;
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pending.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    std::vector<pollfd> ps;
    for (int fd : pending) ps.push_back({fd, POLLOUT, 0});
    if (::poll(ps.data(), ps.size(), static_cast<int>(left)) <= 0) break;
    std::vector<int> still;
    for (const pollfd& p : ps) {
      if (!p.revents) {
        still.push_back(p.fd);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) {
        done.push_back(p.fd);
      } else {
        ::close(p.fd);
        ++*failed;
      }
    }
    pending = std::move(still);
  }
  for (int fd : pending) ::close(fd);
  *failed += static_cast<int>(pending.size());
  for (int fd : done) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return done;
}

// One request on a connection of its own (`request` should say Connection: close): the answer,
// "" when the connection could not be made or nothing came within `timeout`.
inline std::string exchange(int port, const std::string& request, std::chrono::milliseconds timeout) {
  RawConnection c(port);
  if (!c.connected() || c.send(request, timeout) < request.size()) return "";
  return c.read_all(timeout);
}

// The q-quantile of `samples` (sorted here), 0 when there are none.
inline double quantile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  return samples[std::min(samples.size() - 1, static_cast<size_t>(q * static_cast<double>(samples.size())))];
}

}  // namespace loom_test
