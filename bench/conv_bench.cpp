// conv2d timings (float32, oneDNN path): forward, and forward + backward (gradients of x,
// weight and bias). Prints one JSON object per line, like loom_bench:
//   {"name": "conv2d_fwd_n32_c64_56x56_k3", "threads": 2, "seconds": 0.0123}
// `seconds` is the median wall time of one iteration (after warm-up, so the oneDNN primitive
// cache is hot).
//
// Usage: conv_bench [--threads 1,2] [--only name1,name2]
// LOOM_DNNL_LAYOUT=plain and LOOM_CONV_REFERENCE=1 switch the kernels (docs/nn_ops.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "timing.h"

namespace {

// Conv calls are long: fewer, longer samples than the elementwise benchmarks.
double measure(const std::function<void()>& fn) { return bench::measure(fn, 0.05, 11, 3.0, 0.2).median; }

struct Case {
  std::string name;
  int64_t n, c, h, w, oc, k, pad;
};

std::vector<int> parse_ints(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::atoi(item.c_str()));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace loom;
  std::vector<int> threads{1, get_num_threads()};
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--threads") threads = parse_ints(argv[i + 1]);
    else if (k == "--only") only = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s (valid: --threads N[,M], --only a,b)\n", k.c_str());
      return 2;
    }
  }
  std::sort(threads.begin(), threads.end());
  threads.erase(std::unique(threads.begin(), threads.end()), threads.end());

  const std::vector<Case> cases = {
      {"n32_c64_56x56_k3", 32, 64, 56, 56, 64, 3, 1},
      {"n128_c1_28x28_oc32_k3", 128, 1, 28, 28, 32, 3, 1},
  };
  for (int t : threads) {
    set_num_threads(t);
    for (const Case& c : cases) {
      Generator gen(1);
      Tensor x = randn({c.n, c.c, c.h, c.w}, Float32, default_device(), &gen);
      Tensor w = randn({c.oc, c.c, c.k, c.k}, Float32, default_device(), &gen) * 0.1;
      Tensor b = randn({c.oc}, Float32, default_device(), &gen);
      const std::string fwd = "conv2d_fwd_" + c.name, fb = "conv2d_fwdbwd_" + c.name;
      auto want = [&](const std::string& name) { return only.empty() || only.find(name) != std::string::npos; };
      if (want(fwd)) {
        const double s = measure([&] {
          NoGrad off;
          Tensor y = conv2d(x, w, b, 1, c.pad);
        });
        std::printf("{\"name\": \"%s\", \"threads\": %d, \"seconds\": %.6g}\n", fwd.c_str(), t, s);
        std::fflush(stdout);
      }
      if (want(fb)) {
        Tensor xl = x.detach(), wl = w.detach(), bl = b.detach();
        for (Tensor* p : {&xl, &wl, &bl}) p->requires_grad_(true);
        Tensor seed = ones({c.n, c.oc, c.h, c.w}, Float32);
        const double s = measure([&] {
          Tensor y = conv2d(xl, wl, bl, 1, c.pad);
          std::vector<Tensor> g = grad(y, {xl, wl, bl}, seed);
        });
        std::printf("{\"name\": \"%s\", \"threads\": %d, \"seconds\": %.6g}\n", fb.c_str(), t, s);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
