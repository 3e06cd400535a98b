#pragma once
// The server's counters and histograms, written in Prometheus' text exposition format
// (version 0.0.4) for GET /metrics.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace loom::serve::detail {

// Cumulative buckets with upper bounds `bounds` (ascending) and +Inf, a sum and a count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // The metric's lines: name_bucket{le="..."}, name_sum, name_count.
  std::string text(const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), the last for +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void request(const std::string& route, int status, double seconds);  // every answered request
  void batch(int64_t requests, int64_t rows);                          // every batch run
  void reload(bool ok);
  std::string text(int64_t version, int64_t queued) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  Histogram infer_seconds_, batch_rows_, batch_requests_;
  uint64_t reloads_ = 0, reload_failures_ = 0;
};

}  // namespace loom::serve::detail
