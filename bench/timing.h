#pragma once
// The benchmarks' one timing loop (the same calibration as the PyTorch peers): warm up for
// `warmup_s`, size samples to ~target_s each, take up to `samples` samples within `budget_s`
// (at least 5), report the median and the minimum seconds per call, and the median process CPU
// seconds per call (on a loaded machine the steadier figure at 1 thread).
#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <utility>
#include <vector>

namespace bench {

inline double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

inline double cpu_ms();

struct Timing {
  double median, min;
  int samples;
  double cpu_median;
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
  std::vector<double> res, cpu;
  const double start = now_s();
  while (static_cast<int>(res.size()) < samples && (res.size() < 5 || now_s() - start < budget_s)) {
    const double t = now_s(), c = cpu_ms();
    for (long i = 0; i < inner; ++i) fn();
    cpu.push_back((cpu_ms() - c) * 1e-3 / static_cast<double>(inner));
    res.push_back((now_s() - t) / static_cast<double>(inner));
  }
  std::sort(res.begin(), res.end());
  std::sort(cpu.begin(), cpu.end());
  const size_t m = res.size();
  const double med = (m % 2) ? res[m / 2] : 0.5 * (res[m / 2 - 1] + res[m / 2]);
  const double cmed = (m % 2) ? cpu[m / 2] : 0.5 * (cpu[m / 2 - 1] + cpu[m / 2]);
  return {med, res.front(), static_cast<int>(m), cmed};
}

// Process CPU milliseconds (every thread of the process, spinning ones too).
inline double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size();
  return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

// Median wall-clock and process CPU milliseconds per call over a fixed number of calls after one
// warm-up call (plans built, weights prepared), for calls too long to calibrate (whole networks).
// On a loaded machine CPU time is the steadier figure at 1 thread; at 2 threads it shows how much
// of the cores the call kept busy.
inline std::pair<double, double> median_ms(const std::function<void()>& fn, int reps) {
  fn();
  std::vector<double> wall, cpu;
  for (int i = 0; i < reps; ++i) {
    const double c0 = cpu_ms();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    cpu.push_back(cpu_ms() - c0);
  }
  return {median(wall), median(cpu)};
}

}  // namespace bench
