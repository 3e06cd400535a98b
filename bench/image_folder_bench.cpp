// Decode-and-batch throughput of data::ImageFolder + DataLoader (bench/image_folder_bench.sh runs
// it next to torchvision's ImageFolder + DataLoader, bench/torch_image_folder_peer.py, on the same
// files): every image decoded, resized (shorter side to `size`, antialiased bilinear) and batched
// as float32 (N, 3, H, W) in [0, 1], for n_jobs 0 and 2. Prints images/s, the best of `epochs`
// passes over the folder after one warm-up pass.
//   image_folder_bench <root> [epochs=3] [size=224] [batch=64]
#include <loom/loom.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "timing.h"

using namespace loom;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <root> [epochs=3] [size=224] [batch=64]\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const int epochs = argc > 2 ? std::atoi(argv[2]) : 3;
  const int64_t size = argc > 3 ? std::atoll(argv[3]) : 224;
  const int64_t batch = argc > 4 ? std::atoll(argv[4]) : 64;
  const auto ds = std::make_shared<data::ImageFolder>(root, data::ImageFolderOptions{.size = {size}});
  std::printf("loom ImageFolder: %lld images, %zu classes, resize %lld, batch %lld, threads %d\n",
              static_cast<long long>(ds->size()), ds->classes().size(), static_cast<long long>(size),
              static_cast<long long>(batch), get_num_threads());
  for (int jobs : {0, 2}) {
    data::DataLoader loader(ds, {.batch_size = batch, .shuffle = true, .seed = 1, .n_jobs = jobs});
    double best = 0;
    int64_t checksum = 0;
    for (int e = 0; e <= epochs; ++e) {
      const double t0 = bench::now_s();
      int64_t n = 0;
      for (const data::Batch& b : loader) {
        n += b[0].dim(0);
        checksum += b[1].sum().item<int64_t>();
      }
      const double rate = static_cast<double>(n) / (bench::now_s() - t0);
      if (e > 0 && rate > best) best = rate;  // epoch 0 warms the page cache and allocator
    }
    std::printf("n_jobs %d: %.1f images/s (labels checksum %lld)\n", jobs, best, static_cast<long long>(checksum));
  }
  return 0;
}
