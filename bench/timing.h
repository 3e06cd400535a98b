#pragma once
// The benchmarks' one timing loop (the same calibration as the PyTorch peers): warm up for
// `warmup_s`, size samples to ~target_s each, take up to `samples` samples within `budget_s`
// (at least 5), report the median and the minimum seconds per call.
#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace bench {

inline double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Timing {
  double median, min;
  int samples;
};

inline Timing measure(const std::function<void()>& fn, double target_s = 0.01, int samples = 21, double budget_s = 1.0,
                      double warmup_s = 0.05) {
  const double t0 = now_s();
  long n = 0;
  while (n < 3 || now_s() - t0 < warmup_s) {
    fn();
    ++n;
  }
  const double per = (now_s() - t0) / static_cast<double>(n);
  const long inner = std::max<long>(1, static_cast<long>(target_s / per));
  std::vector<double> res;
  const double start = now_s();
  while (static_cast<int>(res.size()) < samples && (res.size() < 5 || now_s() - start < budget_s)) {
    const double t = now_s();
    for (long i = 0; i < inner; ++i) fn();
    res.push_back((now_s() - t) / static_cast<double>(inner));
  }
  std::sort(res.begin(), res.end());
  const size_t m = res.size();
  const double med = (m % 2) ? res[m / 2] : 0.5 * (res[m / 2 - 1] + res[m / 2]);
  return {med, res.front(), static_cast<int>(m)};
}

}  // namespace bench
