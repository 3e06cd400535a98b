// A bounded load on an Open Inference Protocol v2 server (bench/serve_bench.sh): CLIENTS threads,
// each with its own keep-alive connection, send REQUESTS infer requests one after another (the
// same body, one row); prints one JSON line: throughput over the whole run and the latency
// percentiles of every request. The same program loads `loom serve` and the Python peer.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 7) {
    std::cerr << "usage: serve_load HOST PORT PATH BODY_FILE CLIENTS REQUESTS_PER_CLIENT\n";
    return 2;
  }
  const std::string host = argv[1], path = argv[3];
  const int port = std::stoi(argv[2]), clients = std::stoi(argv[5]), per_client = std::stoi(argv[6]);
  std::ifstream f(argv[4]);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string body = ss.str();

  // one request first: the server answers, and what it answers is an infer response
  {
    httplib::Client c(host, port);
    auto r = c.Post(path, body, "application/json");
    if (!r || r->status != 200 || r->body.find("\"outputs\"") == std::string::npos) {
      std::cerr << "serve_load: the first request failed: " << (r ? r->body : "no connection") << "\n";
      return 1;
    }
  }
  std::vector<std::vector<double>> latencies(clients);
  std::atomic<int> failures{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      httplib::Client client(host, port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);  // headers and body leave without waiting for an ACK
      latencies[c].reserve(per_client);
      for (int i = 0; i < per_client; ++i) {
        const auto s = std::chrono::steady_clock::now();
        auto r = client.Post(path, body, "application/json");
        const auto e = std::chrono::steady_clock::now();
        if (!r || r->status != 200) ++failures;
        latencies[c].push_back(std::chrono::duration<double, std::milli>(e - s).count());
      }
    });
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) { return all[std::min(all.size() - 1, static_cast<size_t>(p * static_cast<double>(all.size())))]; };
  std::printf("{\"requests\": %zu, \"failures\": %d, \"seconds\": %.3f, \"throughput\": %.1f, \"p50_ms\": %.3f, \"p99_ms\": %.3f}\n",
              all.size(), failures.load(), seconds, static_cast<double>(all.size()) / seconds, pct(0.50), pct(0.99));
  return failures.load() == 0 ? 0 : 1;
}
