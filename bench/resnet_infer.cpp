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
#include "timing.h"

using namespace loom;

using bench::median_ms;

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
