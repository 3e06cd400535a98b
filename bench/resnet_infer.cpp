// ResNet-18 (zoo::resnet18, 1000 classes, 224x224) eval-mode inference under NoGrad: median
// milliseconds per batch at batch 1 and 32 and 1 and 2 threads, with the CPU and ISA it ran on.
// Peer: bench/torch_resnet_infer_peer.py (torch eager, same settings).
//   resnet_infer [reps_b1=20] [reps_b32=3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "loom/loom.h"

using namespace loom;

namespace {

double median_ms(const std::function<void()>& fn, int reps) {
  fn();  // warm-up: plans built, weights prepared
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const size_t m = ms.size();
  return m % 2 ? ms[m / 2] : 0.5 * (ms[m / 2 - 1] + ms[m / 2]);
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
    const Tensor x = uniform({batch, 3, 224, 224});
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      Tensor y;
      const double ms = median_ms([&] { y = net(x); }, batch == 1 ? reps1 : reps32);
      std::printf("resnet18 eval NoGrad batch %2d threads %d: %8.1f ms (median of %d)\n", batch, threads, ms,
                  batch == 1 ? reps1 : reps32);
    }
  }
  return 0;
}
