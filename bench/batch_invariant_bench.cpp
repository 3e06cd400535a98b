// The price of batch-invariant inference (docs/kernels.md, "Batch-invariant products"): the same
// products and the same inference plans run with the mode off (oneDNN's sgemm, whose rounding
// of a row depends on the batch) and on (Loom's row-invariant kernel), side by side in one run.
// Prints one line per case with both medians and the ratio invariant / oneDNN (above 1: the
// invariant kernel is slower), and the float32 FMA rate the invariant kernel reaches.
//   batch_invariant_bench [threads]
#include <loom/loom.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "timing.h"

using namespace loom;

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  set_num_threads(threads);
  std::printf("batch-invariant products against oneDNN's sgemm on %s\n", machine_summary().c_str());
  Generator g(1);
  NoGrad inference;
  // linear(x, w, b): (rows x in) by (in x out); the MLP's, a wide layer's, a transformer's FFN
  struct Shape3 {
    int64_t in, out;
    bool transposed;  // weights stored (out, in) as PyTorch's, read transposed
  };
  for (const Shape3 s : {Shape3{784, 256, false}, Shape3{256, 10, false}, Shape3{512, 2048, false},
                         Shape3{2048, 512, false}, Shape3{512, 2048, true}})
    for (int64_t rows : {1, 8, 32, 128, 512}) {
      const Tensor x = uniform({rows, s.in}, -1, 1, Float32, Device::cpu(), &g);
      Tensor w = uniform({s.in, s.out}, -1, 1, Float32, Device::cpu(), &g);
      if (s.transposed) w = w.T().copy().T();
      const Tensor b = uniform({s.out}, -1, 1, Float32, Device::cpu(), &g);
      double t[2];
      for (bool on : {false, true}) {
        BatchInvariantScope mode(on);
        t[on] = bench::measure([&] { linear(x, w, b); }, 0.01, 11, 0.5).median;
      }
      const double gflops = 2.0 * static_cast<double>(rows * s.in * s.out) / t[1] * 1e-9;
      std::printf("linear %5lld x %4lld -> %4lld%s  onednn %9.1f us  invariant %9.1f us  ratio %.2f  (%.1f GFLOP/s)\n",
                  static_cast<long long>(rows), static_cast<long long>(s.in), static_cast<long long>(s.out),
                  s.transposed ? " (w^T)" : "      ", t[0] * 1e6, t[1] * 1e6, t[1] / t[0], gflops);
    }
  // whole inference plans: an MLP 784-256-256-10
  manual_seed(0);
  nn::Input in(784, Float32, "x");
  nn::Linear h1(in, 256, {}, "h1");
  nn::Activation a1(h1, nn::relu);
  nn::Linear h2(a1, 256, {}, "h2");
  nn::Activation a2(h2, nn::relu);
  nn::Linear out(a2, 10, {}, "out");
  const Graph graph = Graph::build({out}, {in});
  CompileOptions fast;
  fast.batch_invariant = false;
  const Plan invariant = graph.compile(), onednn = graph.compile(fast);
  for (int64_t rows : {1, 16, 64, 256}) {
    const Tensor x = uniform({rows, 784}, -1, 1, Float32, Device::cpu(), &g);
    const double t0 = bench::measure([&] { onednn.run({x}); }, 0.01, 11, 0.5).median;
    const double t1 = bench::measure([&] { invariant.run({x}); }, 0.01, 11, 0.5).median;
    std::printf("MLP 784-256-256-10 inference plan, batch %4lld  onednn %9.1f us  invariant %9.1f us  ratio %.2f\n",
                static_cast<long long>(rows), t0 * 1e6, t1 * 1e6, t1 / t0);
  }
  return 0;
}
