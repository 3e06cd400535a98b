// Loom side of the benchmark suite: the same workloads as bench/torch_peer.py and
// bench/libtorch_overhead.cpp, timed the same way (median seconds per iteration over
// calibrated samples), plus direct OpenBLAS cblas_sgemm and oneDNN matmul calls for the GEMM
// sizes. Prints one JSON object per line:
//   {"name": "sgemm_256", "threads": 1, "seconds": 0.000312}
//
// Usage: loom_bench [--threads N] [--only name1,name2] [--details]
// (--only also accepts cpu_ghz_measured, the measured core clock that report.py uses.)
//
// Order matters on a small machine: the oneDNN cases run last because the OpenMP runtime
// oneDNN uses (libgomp) keeps its workers spinning for a while after each parallel region.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <set>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "timing.h"

namespace {

using bench::now_s;
using Result = bench::Timing;
using bench::measure;

struct Options {
  int threads = 1;
  std::set<std::string> only;
  bool details = false;
};

Options g_opt;

bool wanted(const std::string& name) { return g_opt.only.empty() || g_opt.only.count(name); }

void emit(const std::string& name, const std::function<void()>& fn, int samples = 21, double budget_s = 1.0) {
  if (!wanted(name)) return;
  const Result r = measure(fn, 0.01, samples, budget_s);
  if (g_opt.details)
    std::printf("{\"name\": \"%s\", \"threads\": %d, \"seconds\": %.9g, \"min\": %.9g, \"samples\": %d, "
                "\"cpu_seconds\": %.9g}\n",
                name.c_str(), g_opt.threads, r.median, r.min, r.samples, r.cpu_median);
  else
    std::printf("{\"name\": \"%s\", \"threads\": %d, \"seconds\": %.9g}\n", name.c_str(), g_opt.threads, r.median);
  std::fflush(stdout);
}

struct Gemm {
  const char* suffix;
  int64_t m, k, n;
};
const Gemm kGemms[] = {{"256", 256, 256, 256}, {"1024", 1024, 1024, 1024}, {"2048", 2048, 2048, 2048},
                       {"128x784x512", 128, 784, 512}};

// Keeps a result alive so the compiler cannot drop the call.
volatile float g_sink = 0;

// Causal self-attention (B, H, T, 64), float32: the fused kernel behind
// scaled_dot_product_attention, forward and forward + backward, and the math form it replaced
// (the composite of matmul, where and softmax that forms the (T, T) scores), written out here.
// (8, 6) heads at T 256 and 1024; (1, 6) at T 4096, so that one forward + backward stays near a
// second on one core (and the math form, whose (T, T) tensors would take 400 MB each, is left
// out there). bench/torch_peer.py runs the same shapes.
void attention_workloads(loom::Generator& gen) {
  using namespace loom;
  struct Shape4 {
    int64_t B, H, T;
  };
  for (const Shape4 sh : {Shape4{8, 6, 256}, Shape4{8, 6, 1024}, Shape4{1, 6, 4096}}) {
    const int64_t B = sh.B, H = sh.H, T = sh.T;
    const std::string t = std::to_string(T);
    const bool with_math = T <= 1024;
    const std::vector<std::string> names = {"attention_causal_T" + t + "_fwd", "attention_causal_T" + t + "_fwdbwd",
                                            "attention_math_causal_T" + t + "_fwd", "attention_math_causal_T" + t + "_fwdbwd"};
    if (std::none_of(names.begin(), names.end(), wanted)) continue;
    Tensor q = randn({B, H, T, 64}, Float32, Device::cpu(), &gen), k = randn({B, H, T, 64}, Float32, Device::cpu(), &gen),
           v = randn({B, H, T, 64}, Float32, Device::cpu(), &gen), g = randn({B, H, T, 64}, Float32, Device::cpu(), &gen);
    const Tensor keep = less_equal(reshape(arange(T), {1, T}), reshape(arange(T), {T, 1}));
    auto math = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
      Tensor s = matmul(a, swapaxes(b, -1, -2)) * (1.0 / 8.0);
      s = where(keep, s, scalar_tensor(-INFINITY, Float32));
      return matmul(softmax(s, -1), c);
    };
    auto fused = [](const Tensor& a, const Tensor& b, const Tensor& c) { return scaled_dot_product_attention(a, b, c, Tensor(), true); };
    const int samples = T > 256 ? 5 : 11;
    const double budget = T > 256 ? 4.0 : 2.0;
    for (int m = 0; m < (with_math ? 2 : 1); ++m) {
      const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)> f =
          m ? std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>(math) : fused;
      emit(names[2 * m], [&] { g_sink = f(q, k, v).data<float>()[0]; }, samples, budget);
      emit(names[2 * m + 1], [&] {
        GradModeScope on(true);
        std::vector<Tensor> in{q.detach().requires_grad_(true), k.detach().requires_grad_(true), v.detach().requires_grad_(true)};
        g_sink = grad(f(in[0], in[1], in[2]), in, g)[0].data<float>()[0];
      }, samples, budget);
    }
  }
}

void loom_workloads() {
  using namespace loom;
  NoGrad no_grad;
  Generator gen(0);
  for (const Gemm& g : kGemms) {
    const std::string name = std::string("sgemm_") + g.suffix;
    if (!wanted(name)) continue;
    Tensor a = randn({g.m, g.k}, Float32, Device::cpu(), &gen), b = randn({g.k, g.n}, Float32, Device::cpu(), &gen);
    const bool big = g.m == 2048;
    emit(name, [&] { g_sink = matmul(a, b).data<float>()[0]; }, big ? 11 : 21, big ? 2.5 : 1.0);
  }
  const int64_t N = 1000000;
  Tensor a = randn({N}, Float32, Device::cpu(), &gen), b = randn({N}, Float32, Device::cpu(), &gen),
         c = randn({N}, Float32, Device::cpu(), &gen);
  emit("add_1e6", [&] { g_sink = add(a, b).data<float>()[0]; });
  // Loom's fused form is the compiled layer graph (one elementwise pass, docs/compile.md);
  // eager_ is the same expression as three eager ops
  {
    nn::Input ia(Shape{N}, Float32, "a"), ib(Shape{N}, Float32, "b"), ic(Shape{N}, Float32, "c");
    const Plan fused = Graph::build({nn::Activation(nn::Add(nn::Multiply(ia, ib), ic), nn::relu)}, {ia, ib, ic}).compile();
    emit("fused_relu_mul_add_1e6", [&] { g_sink = fused(a, b, c).data<float>()[0]; });
  }
  emit("eager_relu_mul_add_1e6", [&] { g_sink = relu(a * b + c).data<float>()[0]; });
  Tensor x = randn({1024, 1024}, Float32, Device::cpu(), &gen);
  emit("sum_axis1_1024", [&] { g_sink = sum(x, {1}).data<float>()[0]; });
  emit("sum_axis0_1024", [&] { g_sink = sum(x, {0}).data<float>()[0]; });
  Tensor s = randn({128, 1000}, Float32, Device::cpu(), &gen);
  emit("softmax_128x1000", [&] { g_sink = softmax(s, 1).data<float>()[0]; });
  Tensor e1 = randn({1}, Float32, Device::cpu(), &gen), e2 = zeros({1});
  emit("overhead_add_1elem", [&] { g_sink = add(e1, e2).data<float>()[0]; });
  attention_workloads(gen);
}

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1 << 24) - 0.5f;
  }
  return v;
}

void openblas_workloads() {
  openblas_set_num_threads(g_opt.threads);
  for (const Gemm& g : kGemms) {
    const std::string name = std::string("openblas_sgemm_") + g.suffix;
    if (!wanted(name)) continue;
    auto a = random_floats(g.m * g.k, 1), b = random_floats(g.k * g.n, 2);
    std::vector<float> c(g.m * g.n);
    const bool big = g.m == 2048;
    emit(name, [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g.m, g.n, g.k, 1.0f, a.data(), g.k, b.data(), g.n,
                  0.0f, c.data(), g.n);
      g_sink = c[0];
    }, big ? 11 : 21, big ? 2.5 : 1.0);
  }
  // Back to the pool's setting: loom::set_num_threads is the only owner of that knob.
  loom::set_num_threads(g_opt.threads);
}

void onednn_workloads() {
  omp_set_num_threads(g_opt.threads);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  for (const Gemm& g : kGemms) {
    const std::string name = std::string("onednn_sgemm_") + g.suffix;
    if (!wanted(name)) continue;
    dnnl::memory::desc ad({g.m, g.k}, dt::f32, tag::ab), bd({g.k, g.n}, dt::f32, tag::ab),
        cd({g.m, g.n}, dt::f32, tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), eng);
    dnnl::matmul prim(pd);
    auto a = random_floats(g.m * g.k, 1), b = random_floats(g.k * g.n, 2);
    std::vector<float> c(g.m * g.n);
    dnnl::memory am(ad, eng, a.data()), bm(bd, eng, b.data()), cm(cd, eng, c.data());
    const bool big = g.m == 2048;
    emit(name, [&] {
      prim.execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
      strm.wait();
      g_sink = c[0];
    }, big ? 11 : 21, big ? 2.5 : 1.0);
  }
}

// Core clock measured with a chain of dependent integer adds (one cycle each on every x86
// core of the last decade): the best of several short runs, so that a preempted run does not
// count. Reported as {"name": "cpu_ghz_measured", "ghz": ...} for bench/report.py's peak.
double measure_ghz() {
  double best = 0;
  for (int rep = 0; rep < 7; ++rep) {
    const uint64_t iters = 20000000;
    uint64_t x = 0, n = iters;
    const double t0 = now_s();
    asm volatile(
        "1:\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "dec %1\n\tjnz 1b"
        : "+r"(x), "+r"(n));
    const double dt = now_s() - t0;
    best = std::max(best, 8.0 * static_cast<double>(iters) / dt / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      g_opt.threads = std::atoi(argv[++i]);
    } else if (arg == "--only" && i + 1 < argc) {
      std::string list = argv[++i];
      size_t pos = 0;
      while (pos <= list.size()) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        if (comma > pos) g_opt.only.insert(list.substr(pos, comma - pos));
        pos = comma + 1;
      }
    } else if (arg == "--details") {
      g_opt.details = true;
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--only a,b] [--details]\n", argv[0]);
      return 2;
    }
  }
  if (g_opt.threads < 1) {
    std::fprintf(stderr, "--threads must be positive\n");
    return 2;
  }
  loom::set_num_threads(g_opt.threads);
  if (wanted("cpu_ghz_measured"))
    std::printf("{\"name\": \"cpu_ghz_measured\", \"threads\": %d, \"seconds\": 0, \"ghz\": %.3f}\n",
                g_opt.threads, measure_ghz());
  loom_workloads();
  openblas_workloads();
  onednn_workloads();
  return 0;
}
