// An ONNX model imported by Loom (io::import_onnx) and run through its compiled plan: median
// milliseconds per batch at batch 1 and 32 and 1 and 2 threads, with the CPU and ISA it ran on.
// The peer, bench/onnx_file_peer.py, runs the same file in ONNX Runtime; bench/onnx_import_bench.sh
// runs both on torchvision's ResNet-18 (exported by Debian's torch at opset 17) and prints ratios.
//   onnx_import_infer MODEL.onnx [reps_b1=20] [reps_b32=3] [INPUT.npy LOGITS.npy]
// With INPUT and LOGITS (torch's), the imported model's logits are checked first (fails beyond
// 1e-4 relative to the logits' largest magnitude).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "timing.h"

using namespace loom;

using bench::median_ms;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: onnx_import_infer MODEL.onnx [reps_b1=20] [reps_b32=3] [INPUT.npy LOGITS.npy]\n");
    return 2;
  }
  const std::string path = argv[1];
  const int reps1 = argc > 2 ? std::atoi(argv[2]) : 20;
  const int reps32 = argc > 3 ? std::atoi(argv[3]) : 3;
  std::printf("machine: %s\n", machine_summary().c_str());
  const Graph graph = io::import_onnx(path);
  nn::ModeScope eval(nn::Mode::Eval);
  NoGrad off;
  if (argc > 5) {
    const Tensor x = data::load_npy(argv[4]), want = data::load_npy(argv[5]);
    const Tensor got = graph.compile(std::vector<Shape>{x.shape()}).run({x}).at(0);
    const double scale = max(abs(want)).item<double>();
    const double diff = max(abs(got - want)).item<double>();
    std::printf("loom import: max |logits - torch logits| = %.3g (%.3g relative; limit 1e-4)\n", diff, diff / scale);
    if (!(diff <= 1e-4 * scale)) return 1;
  }
  manual_seed(0);
  for (int batch : {1, 32}) {
    const int reps = batch == 1 ? reps1 : reps32;
    if (reps < 1) continue;
    const Tensor x = uniform({batch, 3, 224, 224});
    Plan plan = graph.compile(std::vector<Shape>{x.shape()});
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      const auto [wall, cpu] = median_ms([&] { plan.run({x}); }, reps);
      std::printf("loom import_onnx + compile batch %2d threads %d: %8.1f ms wall, %8.1f ms cpu (medians of %d)\n", batch,
                  threads, wall, cpu, reps);
    }
  }
  return 0;
}
