#include "metrics.h"

#include <cstdio>

namespace loom::serve::detail {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

std::string Histogram::text(const std::string& name) const {
  std::string out;
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + (i < bounds_.size() ? number(bounds_[i]) : "+Inf") + "\"} " + std::to_string(cumulative) + "\n";
  }
  return out + name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : infer_seconds_({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}),
      batch_rows_({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}),
      batch_requests_({1, 2, 4, 8, 16, 32, 64, 128}) {}

void Metrics::request(const std::string& route, int status, double seconds) {
  std::lock_guard lock(mutex_);
  ++requests_[{route, status}];
  if (route == "infer" && status == 200) infer_seconds_.observe(seconds);
}

void Metrics::batch(int64_t requests, int64_t rows) {
  std::lock_guard lock(mutex_);
  batch_requests_.observe(static_cast<double>(requests));
  batch_rows_.observe(static_cast<double>(rows));
}

void Metrics::reload(bool ok) {
  std::lock_guard lock(mutex_);
  ++(ok ? reloads_ : reload_failures_);
}

std::string Metrics::text(int64_t version, int64_t queued) const {
  std::lock_guard lock(mutex_);
  std::string out;
  out += "# HELP loom_requests_total Requests answered, by route and HTTP status.\n# TYPE loom_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    out += "loom_requests_total{route=\"" + key.first + "\",code=\"" + std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
  out += "# HELP loom_infer_duration_seconds Time from an infer request's arrival to its answer.\n"
         "# TYPE loom_infer_duration_seconds histogram\n" + infer_seconds_.text("loom_infer_duration_seconds");
  out += "# HELP loom_batch_rows Rows per batch run.\n# TYPE loom_batch_rows histogram\n" + batch_rows_.text("loom_batch_rows");
  out += "# HELP loom_batch_requests Requests per batch run.\n# TYPE loom_batch_requests histogram\n" +
         batch_requests_.text("loom_batch_requests");
  out += "# HELP loom_model_version The model version served.\n# TYPE loom_model_version gauge\nloom_model_version " +
         std::to_string(version) + "\n";
  out += "# HELP loom_queue_requests Requests waiting for a batch.\n# TYPE loom_queue_requests gauge\nloom_queue_requests " +
         std::to_string(queued) + "\n";
  out += "# HELP loom_reloads_total Versions loaded after the alias moved, by outcome.\n# TYPE loom_reloads_total counter\n"
         "loom_reloads_total{outcome=\"ok\"} " + std::to_string(reloads_) + "\nloom_reloads_total{outcome=\"failed\"} " +
         std::to_string(reload_failures_) + "\n";
  return out;
}

}  // namespace loom::serve::detail
