// The model server's HTTP layer under the clients issue 46 described (docs/serve.md, "HTTP"):
// a thousand idle connections and slow clients sending their headers a byte at a time do not
// slow other clients' requests; a burst of a thousand connects is answered whole, none reset;
// a header or body sent too slowly is cut at its timeout; past the connection cap a client is
// told so; and stop() (what SIGTERM calls in `loom serve`) answers every request it accepted,
// those running and those waiting for a worker. Raw sockets throughout (raw_http.h).
#include <gtest/gtest.h>
#include <loom/serve/server.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "unit/serve/raw_http.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

const std::string kLive = "GET /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// `n` requests one after another, each on a connection of its own: their latencies in seconds
// (a request not answered 200 within 3 s counts 3 s, and in `failures`; after 5 failures the
// rest are not tried).
std::vector<double> timed_requests(int port, int n, int* failures) {
  std::vector<double> out;
  for (int i = 0; i < n && *failures < 5; ++i) {
    const auto t0 = Clock::now();
    const std::string answer = loom_test::exchange(port, kLive, milliseconds(3000));
    const bool ok = loom_test::status_of(answer) == 200;
    if (!ok) ++*failures;
    out.push_back(ok ? seconds_since(t0) : 3.0);
  }
  return out;
}

// Clients that send a request's header one byte a second and never finish it (slowloris).
class SlowClients {
 public:
  SlowClients(int port, int n) {
    int failed = 0;
    fds_ = loom_test::connect_many(port, n, milliseconds(10000), &failed);
    failed_ = failed;
    thread_ = std::thread([this] {
      const std::string header = "GET /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + std::string(200, 'a');
      for (size_t at = 0; !stop_ && at < header.size(); ++at) {
        for (int fd : fds_) ::send(fd, header.data() + at, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(milliseconds(100));
      }
    });
  }
  ~SlowClients() {
    stop_ = true;
    thread_.join();
    for (int fd : fds_) ::close(fd);
  }
  int failed() const { return failed_; }

 private:
  std::vector<int> fds_;
  int failed_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::string infer_request(const std::vector<float>& values, int64_t rows) {
  const nlohmann::json body = {{"inputs", {{{"name", "x"}, {"shape", {rows, 4}}, {"datatype", "FP32"}, {"data", values}}}}};
  const std::string text = body.dump();
  return "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(text.size()) + "\r\n\r\n" + text;
}

}  // namespace

// Issue 46: eight connections sending a header byte every 2 s left other requests unanswered,
// and eight kept-alive clients starved a ninth for over 10 s. With 1,000 idle connections and
// 50 slow ones held, another client's p99 stays within 2x of its p99 against the idle server.
TEST(ServeHttp, IdleAndSlowConnectionsDoNotSlowOtherClients) {
  ASSERT_GE(loom_test::raise_open_files(), 2400u) << "the test holds 1,050 connections, both ends in this process";
  serve::Server s(serve::ModelSource::fixed("mlp", loom_test::small_mlp(4)), {.port = 0, .reload_poll_ms = 0});
  s.start();
  int failures = 0;
  (void)timed_requests(s.port(), 50, &failures);  // warm-up: first connections, page faults
  const auto idle_before = timed_requests(s.port(), 400, &failures);
  ASSERT_EQ(failures, 0);
  double loaded_p99 = 0;
  {
    int failed = 0;
    std::vector<loom_test::RawConnection> idle;
    for (int fd : loom_test::connect_many(s.port(), 1000, milliseconds(10000), &failed)) idle.push_back(loom_test::RawConnection::adopt(fd));
    ASSERT_EQ(failed, 0) << "of 1,000 idle connections";
    SlowClients slow(s.port(), 50);
    ASSERT_EQ(slow.failed(), 0) << "of 50 slow connections";
    std::this_thread::sleep_for(milliseconds(500));  // all of them accepted and read from
    const auto loaded = timed_requests(s.port(), 400, &failures);
    EXPECT_EQ(failures, 0) << "requests unanswered within 3 s while the connections were held";
    loaded_p99 = loom_test::quantile(loaded, 0.99);
  }
  // the idle server again, after: a machine busy with other work shows in both baselines
  const auto idle_after = timed_requests(s.port(), 400, &failures);
  const double idle_p99 = std::max(loom_test::quantile(idle_before, 0.99), loom_test::quantile(idle_after, 0.99));
  // twice the idle p99, but never less than 10 ms: a p99 of a few tenths of a millisecond moves by
  // more than 2x with a neighbour's work alone (2.0 against 0.37 ms once in CI's chroot), while a
  // server that let held connections block others would stall requests for seconds
  EXPECT_LE(loaded_p99, std::max(2 * idle_p99, 0.010))
      << "p99 " << loaded_p99 * 1e3 << " ms with 1,050 connections held, " << idle_p99 * 1e3 << " ms idle";
  std::printf("[ measured ] p99 of a request on a fresh connection: idle %.3f ms, with 1,000 idle + 50 slow connections %.3f ms\n",
              idle_p99 * 1e3, loaded_p99 * 1e3);
}

// Issue 46: the listen backlog was 5, so bursts of 200 connections were reset. A thousand
// connects at once are each accepted and answered.
TEST(ServeHttp, ABurstOfAThousandConnectsIsAnsweredWhole) {
  ASSERT_GE(loom_test::raise_open_files(), 2400u);
  serve::Server s(serve::ModelSource::fixed("mlp", loom_test::small_mlp(4)), {.port = 0, .reload_poll_ms = 0});
  s.start();
  int failed = 0;
  const std::vector<int> fds = loom_test::connect_many(s.port(), 1000, milliseconds(15000), &failed);
  EXPECT_EQ(failed, 0) << "connects refused, reset or not accepted within 15 s";
  std::vector<std::string> answers(fds.size());
  std::vector<bool> open(fds.size(), true);
  size_t sent = 0;
  for (size_t i = 0; i < fds.size(); ++i)
    if (::send(fds[i], kLive.data(), kLive.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(kLive.size())) ++sent;
  EXPECT_EQ(sent, fds.size());
  // read every answer until its connection closes (Connection: close), 20 s at most in all
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  size_t left = fds.size();
  int resets = 0;
  while (left > 0 && Clock::now() < deadline) {
    std::vector<pollfd> ps;
    std::vector<size_t> which;
    for (size_t i = 0; i < fds.size(); ++i)
      if (open[i]) ps.push_back({fds[i], POLLIN, 0}), which.push_back(i);
    if (::poll(ps.data(), ps.size(), 500) < 0) break;
    for (size_t k = 0; k < ps.size(); ++k) {
      if (!ps[k].revents) continue;
      char buf[4096];
      const ssize_t n = ::recv(ps[k].fd, buf, sizeof buf, 0);
      if (n > 0) {
        answers[which[k]].append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == ECONNRESET) ++resets;
      open[which[k]] = false;
      --left;
    }
  }
  int ok = 0;
  for (const auto& a : answers) ok += loom_test::status_of(a) == 200;
  for (int fd : fds) ::close(fd);
  EXPECT_EQ(resets, 0);
  EXPECT_EQ(ok, 1000) << "of 1,000 connects, " << ok << " answered 200";
}

// Issue 46: on SIGTERM (`loom serve` calls stop()), requests accepted but waiting for a thread
// were closed unanswered. stop() stops accepting and answers every request it accepted: here two
// workers, each request waiting 150 ms in the batcher, so most of the 16 wait for a worker.
TEST(ServeHttp, StopAnswersEveryAcceptedRequest) {
  const Graph g = loom_test::small_mlp(4);
  serve::Server s(serve::ModelSource::fixed("mlp", g), {.port = 0, .max_batch = 64, .max_wait_us = 150000, .reload_poll_ms = 0, .threads = 2});
  s.start();
  const int port = s.port();
  // a kept-alive connection between requests and one that never sent anything: neither holds stop() up
  loom_test::RawConnection kept(port), silent(port);
  kept.send("GET /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  std::this_thread::sleep_for(milliseconds(100));
  std::vector<std::unique_ptr<loom_test::RawConnection>> clients;
  std::vector<std::string> answers(16);
  std::vector<std::thread> readers;
  for (int i = 0; i < 16; ++i) {
    clients.push_back(std::make_unique<loom_test::RawConnection>(port));
    ASSERT_TRUE(clients.back()->connected());
    ASSERT_EQ(clients.back()->send(infer_request({1, 2, 3, float(i)}, 1)) > 0, true);
    // (the connection itself, not clients[i]: the next push_back may move the vector while this runs)
    readers.emplace_back([&answers, c = clients.back().get(), i] { answers[i] = c->read_all(milliseconds(15000)); });
  }
  std::this_thread::sleep_for(milliseconds(100));  // each request is in the server now
  const auto t0 = Clock::now();
  s.stop();
  const double stopping = seconds_since(t0);
  for (auto& r : readers) r.join();
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(loom_test::status_of(answers[i]), 200) << "request " << i << ": " << answers[i].substr(0, 300);
    EXPECT_NE(answers[i].find("\"outputs\""), std::string::npos) << answers[i].substr(0, 300);
  }
  EXPECT_LT(stopping, 10.0) << "stop() waited for the idle connections";
  EXPECT_EQ(loom_test::status_of(kept.read_all(milliseconds(3000))), 200);  // its answer, then closed
  EXPECT_EQ(loom_test::exchange(port, kLive, milliseconds(1000)), "") << "still accepting after stop()";
}

// Each phase of a request has a deadline of its own, a total: a header trickled a byte every
// 100 ms is cut at header_timeout_ms (the per-read timeout it had could never cut it), a body
// likewise at body_timeout_ms, each with a 408 naming the limit; a connection that sends nothing
// is closed at idle_timeout_ms. The server answers others meanwhile.
TEST(ServeHttp, SlowHeadersAndBodiesAreCutAtTheirDeadlines) {
  serve::Server s(serve::ModelSource::fixed("mlp", loom_test::small_mlp(4)),
                  {.port = 0, .reload_poll_ms = 0, .header_timeout_ms = 600, .body_timeout_ms = 600, .idle_timeout_ms = 800});
  s.start();
  auto trickle = [&](const std::string& first, const std::string& slowly) {
    loom_test::RawConnection c(s.port());
    EXPECT_TRUE(c.connected());
    std::string answer;
    std::atomic<bool> done{false};
    const auto t0 = Clock::now();
    double cut = 0;
    std::thread reader([&] {
      answer = c.read_all(milliseconds(5000));
      cut = seconds_since(t0);
      done = true;
    });
    c.send(first);
    for (size_t i = 0; i < slowly.size() && !done; ++i) {
      c.send(slowly.substr(i, 1));
      std::this_thread::sleep_for(milliseconds(100));
    }
    reader.join();
    return std::make_pair(answer, cut);
  };
  const std::string header = "GET /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + std::string(40, 'a') + "\r\n\r\n";
  const auto [slow_header, header_cut] = trickle(header.substr(0, 1), header.substr(1));  // 6 s at that pace
  EXPECT_EQ(loom_test::status_of(slow_header), 408) << slow_header;
  EXPECT_NE(slow_header.find("header did not arrive within 600 ms"), std::string::npos) << slow_header;
  EXPECT_TRUE(loom_test::has_header_line(slow_header, "X-Content-Type-Options: nosniff")) << slow_header;
  EXPECT_GT(header_cut, 0.5);
  EXPECT_LT(header_cut, 2.5);
  const std::string body(60, ' ');
  const auto [slow_body, body_cut] = trickle("POST /v2/models/mlp/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 60\r\n\r\n", body);
  EXPECT_EQ(loom_test::status_of(slow_body), 408) << slow_body;
  EXPECT_NE(slow_body.find("body did not arrive within 600 ms"), std::string::npos) << slow_body;
  EXPECT_LT(body_cut, 2.5);
  {  // idle: closed without an answer
    loom_test::RawConnection c(s.port());
    const auto t0 = Clock::now();
    EXPECT_EQ(c.read_all(milliseconds(5000)), "");
    EXPECT_GT(seconds_since(t0), 0.7);
    EXPECT_LT(seconds_since(t0), 3.0);
  }
  EXPECT_EQ(loom_test::status_of(loom_test::exchange(s.port(), kLive, milliseconds(3000))), 200);
}

// Past max_connections a client is told so (503, JSON) and closed, rather than left waiting in
// a queue no thread will reach; once a connection closes, a new one is served.
TEST(ServeHttp, PastTheConnectionCapAClientIsToldSo) {
  serve::Server s(serve::ModelSource::fixed("mlp", loom_test::small_mlp(4)), {.port = 0, .reload_poll_ms = 0, .max_connections = 4});
  s.start();
  std::vector<std::unique_ptr<loom_test::RawConnection>> held;
  for (int i = 0; i < 4; ++i) held.push_back(std::make_unique<loom_test::RawConnection>(s.port()));
  std::this_thread::sleep_for(milliseconds(200));
  const std::string refused = loom_test::exchange(s.port(), kLive, milliseconds(3000));
  EXPECT_EQ(loom_test::status_of(refused), 503) << refused;
  EXPECT_NE(refused.find("limit of 4 connections"), std::string::npos) << refused;
  held.pop_back();
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(loom_test::status_of(loom_test::exchange(s.port(), kLive, milliseconds(3000))), 200);
}

// The HTTP layer's answers: HEAD has the headers and no body, a kept-alive connection carries
// requests one after another (and two sent at once, pipelined), an HTTP/1.0 client is closed
// after its answer, and `Expect: 100-continue` (curl, for bodies over 1 KiB) is answered at once.
TEST(ServeHttp, KeepAlivePipeliningHeadAndContinue) {
  serve::Server s(serve::ModelSource::fixed("mlp", loom_test::small_mlp(4)), {.port = 0, .reload_poll_ms = 0});
  s.start();
  {
    loom_test::RawConnection c(s.port());
    const std::string one = "GET /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    c.send(one + one + "HEAD /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    const std::string all = c.read_all(milliseconds(3000));
    size_t answers = 0;
    for (size_t at = all.find("HTTP/1.1 200"); at != std::string::npos; at = all.find("HTTP/1.1 200", at + 1)) ++answers;
    EXPECT_EQ(answers, 3u) << all;
    const std::string last = all.substr(all.rfind("HTTP/1.1 200"));
    EXPECT_TRUE(loom_test::has_header_line(last, "Content-Length: 13")) << last;  // {"live":true}
    EXPECT_EQ(last.substr(last.find("\r\n\r\n") + 4), "") << "a HEAD answer with a body";
  }
  {
    loom_test::RawConnection c(s.port());
    c.send("GET /v2/health/live HTTP/1.0\r\n\r\n");
    const auto t0 = Clock::now();
    EXPECT_EQ(loom_test::status_of(c.read_all(milliseconds(3000))), 200);
    EXPECT_LT(seconds_since(t0), 1.0) << "an HTTP/1.0 connection was kept open";
  }
  {
    loom_test::RawConnection c(s.port());
    const std::string body = infer_request({1, 2, 3, 4}, 1);
    const std::string head = body.substr(0, body.find("\r\n\r\n")) + "\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n";
    c.send(head);
    const std::string go_on = c.read_all(milliseconds(300));
    EXPECT_EQ(go_on, "HTTP/1.1 100 Continue\r\n\r\n");
    c.send(body.substr(body.find("\r\n\r\n") + 4));
    EXPECT_EQ(loom_test::status_of(c.read_all(milliseconds(3000))), 200);
  }
}

// The deadlines are the reading's: a request whose handling takes longer (here a batch waiting
// 800 ms for others) is answered, not cut at the header's or body's deadline.
TEST(ServeHttp, HandlingMayTakeLongerThanTheReadingDeadlines) {
  serve::Server s(serve::ModelSource::fixed("mlp", loom_test::small_mlp(4)),
                  {.port = 0, .max_wait_us = 800000, .reload_poll_ms = 0, .header_timeout_ms = 300, .body_timeout_ms = 300});
  s.start();
  loom_test::RawConnection c(s.port());
  c.send(infer_request({1, 2, 3, 4}, 1));
  const std::string answer = c.read_all(milliseconds(3000));
  EXPECT_EQ(loom_test::status_of(answer), 200) << answer;
}
