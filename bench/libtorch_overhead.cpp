// LibTorch (ATen from C++) peer for the Loom benchmark suite.
//
// Times the per-op overhead of adding two 1-element float tensors from C++
// (no Python in the way), plus the same workloads as bench/torch_peer.py, and
// prints one JSON object per line:
//   {"name": "libtorch_<workload>", "threads": N, "seconds": <median s/iter>}
//
// Usage: libtorch_overhead [--threads N] [--only name1,name2] [--details]
//
// OpenMP/MKL read their environment when the shared libraries are loaded
// (before main), so the program sets the thread environment and re-execs
// itself once, exactly like torch_peer.py does before `import torch`.
// Build: bench/build_libtorch.sh

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double now_s() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

struct Result {
  double median;
  double min;
  int samples;
  double foreign_cpu;  // share of the machine's CPU used by other processes meanwhile
};

struct CpuSnapshot {
  double machine_busy_s;  // non-idle time of all CPUs, from /proc/stat
  double own_s;           // this process's user+system time
  double wall_s;
};

CpuSnapshot cpu_snapshot() {
  CpuSnapshot s{0, 0, now_s()};
  std::ifstream f("/proc/stat");
  std::string cpu;
  long long v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (f >> cpu) {
    for (long long& x : v) f >> x;
  }
  long long busy = 0;
  for (int i = 0; i < 8; ++i)
    if (i != 3 && i != 4) busy += v[i];  // minus idle and iowait
  s.machine_busy_s = static_cast<double>(busy) / static_cast<double>(sysconf(_SC_CLK_TCK));
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  s.own_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
            1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  return s;
}

double foreign_cpu(const CpuSnapshot& a, const CpuSnapshot& b) {
  double wall = b.wall_s - a.wall_s;
  double other = (b.machine_busy_s - a.machine_busy_s) - (b.own_s - a.own_s);
  unsigned ncpu = std::max(1u, std::thread::hardware_concurrency());
  return wall > 0 ? std::max(0.0, other / (wall * ncpu)) : 0.0;
}

// Median seconds per call of fn(); calibrates calls per sample so one sample
// takes ~target_s, then collects up to `samples` samples within `budget_s`
// (always at least 5).
Result measure(const std::function<void()>& fn, double target_s = 0.01, int samples = 21,
               double budget_s = 1.0) {
  CpuSnapshot snap = cpu_snapshot();
  double t0 = now_s();
  long n = 0;
  while (n < 3 || now_s() - t0 < 0.05) {
    fn();
    ++n;
  }
  double per = (now_s() - t0) / static_cast<double>(n);
  long inner = std::max<long>(1, static_cast<long>(target_s / per));
  std::vector<double> res;
  double start = now_s();
  while (static_cast<int>(res.size()) < samples &&
         (res.size() < 5 || now_s() - start < budget_s)) {
    double t = now_s();
    for (long i = 0; i < inner; ++i) fn();
    res.push_back((now_s() - t) / static_cast<double>(inner));
  }
  std::vector<double> sorted = res;
  std::sort(sorted.begin(), sorted.end());
  size_t m = sorted.size();
  double med = (m % 2) ? sorted[m / 2] : 0.5 * (sorted[m / 2 - 1] + sorted[m / 2]);
  return {med, sorted.front(), static_cast<int>(m), foreign_cpu(snap, cpu_snapshot())};
}

// Same settings torch_peer.py uses (see docs/benchmarks-peers-notes.md).
void set_thread_env(int threads) {
  std::string t = std::to_string(threads);
  setenv("OMP_NUM_THREADS", t.c_str(), 1);
  setenv("MKL_NUM_THREADS", t.c_str(), 1);
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  setenv("LOOM_TORCH_PEER_ENV", "1", 1);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  bool details = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
      only = argv[++i];
    } else if (!std::strcmp(argv[i], "--details")) {
      details = true;
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--only a,b] [--details]\n", argv[0]);
      return 2;
    }
  }
  if (threads < 1) threads = 1;

  const char* marker = std::getenv("LOOM_TORCH_PEER_ENV");
  if (!marker || std::strcmp(marker, "1") != 0) {
    set_thread_env(threads);
    execv("/proc/self/exe", argv);
    std::perror("execv(/proc/self/exe) failed; continuing with the current environment");
  }

  at::set_num_threads(threads);
  at::manual_seed(0);
  c10::InferenceMode inference_guard;

  auto wanted = [&](const std::string& name) {
    if (only.empty()) return true;
    std::string list = "," + only + ",";
    return list.find("," + name + ",") != std::string::npos;
  };
  auto emit = [&](const std::string& name, const std::string& impl, const Result& r) {
    if (details) {
      std::printf(
          "{\"name\": \"libtorch_%s\", \"threads\": %d, \"seconds\": %.9g, \"impl\": \"%s\", "
          "\"min\": %.9g, \"samples\": %d, \"foreign_cpu\": %.3f}\n",
          name.c_str(), threads, r.median, impl.c_str(), r.min, r.samples, r.foreign_cpu);
    } else {
      std::printf("{\"name\": \"libtorch_%s\", \"threads\": %d, \"seconds\": %.9g}\n",
                  name.c_str(), threads, r.median);
    }
    std::fflush(stdout);
  };

  const auto f32 = at::TensorOptions().dtype(at::kFloat);

  struct Gemm {
    const char* name;
    int64_t m, k, n;
  };
  for (const Gemm& g : {Gemm{"sgemm_256", 256, 256, 256}, Gemm{"sgemm_1024", 1024, 1024, 1024},
                        Gemm{"sgemm_2048", 2048, 2048, 2048},
                        Gemm{"sgemm_128x784x512", 128, 784, 512}}) {
    if (!wanted(g.name)) continue;
    at::Tensor a = at::randn({g.m, g.k}, f32), b = at::randn({g.k, g.n}, f32);
    at::Tensor c = at::empty({g.m, g.n}, f32);
    bool big = g.m == 2048;
    emit(g.name, "mm_out", measure([&] { at::mm_out(c, a, b); }, 0.01, big ? 11 : 21,
                                   big ? 2.5 : 1.0));
  }

  const int64_t N = 1000000;
  at::Tensor a = at::randn({N}, f32), b = at::randn({N}, f32), c = at::randn({N}, f32);
  at::Tensor t = at::empty({N}, f32);
  if (wanted("add_1e6")) emit("add_1e6", "add_out", measure([&] { at::add_out(t, a, b); }));
  if (wanted("fused_relu_mul_add_1e6"))
    emit("fused_relu_mul_add_1e6", "addcmul_out+relu_", measure([&] {
           at::addcmul_out(t, c, a, b);
           t.relu_();
         }));

  at::Tensor x = at::randn({1024, 1024}, f32);
  at::Tensor o = at::empty({1024}, f32);
  if (wanted("sum_axis1_1024"))
    emit("sum_axis1_1024", "sum_out", measure([&] { at::sum_out(o, x, {1}); }));
  if (wanted("sum_axis0_1024"))
    emit("sum_axis0_1024", "sum_out", measure([&] { at::sum_out(o, x, {0}); }));

  at::Tensor s = at::randn({128, 1000}, f32), so = at::empty({128, 1000}, f32);
  if (wanted("softmax_128x1000"))
    emit("softmax_128x1000", "softmax_out", measure([&] { at::softmax_out(so, s, 1); }));

  at::Tensor e1 = at::randn({1}, f32), e2 = at::zeros({1}, f32), eo = at::empty({1}, f32);
  if (wanted("overhead_add_1elem"))
    emit("overhead_add_1elem", "add_out", measure([&] { at::add_out(eo, e1, e2); }));
  // With allocation of the result (what `a + b` costs).
  if (wanted("overhead_add_1elem_alloc"))
    emit("overhead_add_1elem_alloc", "add", measure([&] {
           at::Tensor r = at::add(e1, e2);
           (void)r;
         }));
  return 0;
}
