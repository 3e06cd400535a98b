// ResNet-18 (zoo::resnet18, 1000 classes, 224x224) eval-mode inference under NoGrad: median
// milliseconds per batch at batch 1 and 32 and 1 and 2 threads, with the CPU and ISA it ran on.
// Peers: bench/torch_resnet_infer_peer.py (torch eager) and bench/onnx_resnet_infer_peer.py (ONNX
// Runtime), same settings.
//   resnet_infer [reps_b1=20] [reps_b32=3]   (0 reps: skip that batch size)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <utility>
#include <vector>

#include "loom/loom.h"

using namespace loom;

namespace {

double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size();
  return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

// Median wall-clock and process CPU milliseconds per call. CPU time counts every thread of the
// process, spinning ones too: on a loaded machine it is the steadier figure at 1 thread, and at
// 2 threads it shows how much of the cores the call kept busy.
std::pair<double, double> median_ms(const std::function<void()>& fn, int reps) {
  fn();  // warm-up: plans built, weights prepared
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

}  // namespace

int main(int argc, char** argv) {
  const int reps1 = argc > 1 ? std::atoi(argv[1]) : 20;
  const int reps32 = argc > 2 ? std::atoi(argv[2]) : 3;
  std::printf("machine: %s\n", machine_summary().c_str());
  manual_seed(0);
  zoo::Network net = zoo::resnet18();
  nn::ModeScope eval(nn::Mode::Eval);
  NoGrad off;
  for (int batch : {1, 32}) {
    if ((batch == 1 ? reps1 : reps32) < 1) continue;
    const Tensor x = uniform({batch, 3, 224, 224});
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      Tensor y;
      const auto [wall, cpu] = median_ms([&] { y = net(x); }, batch == 1 ? reps1 : reps32);
      std::printf("resnet18 eval NoGrad batch %2d threads %d: %8.1f ms wall, %8.1f ms cpu (medians of %d)\n", batch,
                  threads, wall, cpu, batch == 1 ? reps1 : reps32);
    }
  }
  return 0;
}
