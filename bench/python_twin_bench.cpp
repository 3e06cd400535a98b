// The C++ twins of two of bench/python_train.py's Python workloads: what `import loom` adds over
// Loom from C++ (issue 49, "Speed"; docs/benchmarks.md, "Loom from Python against Loom from
// C++"). The compiled training steps of the MLP, the CNN and the LSTM are train_bench's
// (train_bench --serve 1), not here.
//
// Reads requests "name steps" from stdin, one a line, and answers each with one JSON line:
//   fit_mlp N            train::Model::fit of zoo::mlp(784, {512, 512}, 10) ("adam",
//                        "sparse_categorical_crossentropy", {"accuracy"}) for one epoch of
//                        --samples synthetic rows (randn / randint of Generator(1)), batch 128,
//                        shuffle seed 7, no progress bar; a fresh model after manual_seed(0) at
//                        each request (N is ignored). Timed: the fit call (its first step
//                        compiles the TrainStep, as from Python).
//       {"name": "fit_mlp", "threads": 1, "seconds": ..., "cpu_seconds": ..., "loss": ..., "accuracy": ...}
//       (the epoch's history values, exact)
//   step_mlp_autograd N  N timed steps of a training step written with ops and autograd, no
//                        TrainStep: linear(x, w, b) = x @ w + b three times (w (in, out), ReLU
//                        between), cross_entropy, backward, then SGD by hand under NoGrad
//                        (g = p.grad(); g *= lr; p -= g; p.zero_grad()); batch 128 of randn /
//                        randint of Generator(1), then weights normal(0, 0.05) from it, biases
//                        zero. Made at the first request and warmed up (3 steps) then, kept after.
//       {"name": "step_mlp_autograd", "threads": 1, "seconds": ..., "cpu_seconds": ..., "min_seconds": ...,
//        "min_cpu_seconds": ..., "first_loss": ..., "last_loss": ...}
//       (medians of the N steps, as train_bench takes them, and the fastest; losses at 9 digits)
// bench/python_train.py checks that its Python twins give the same loss figures.
//
// Usage: printf 'fit_mlp 1\nstep_mlp_autograd 11\n' | python_twin_bench [--threads N] [--samples 2048]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "timing.h"

using namespace loom;

namespace {

constexpr int64_t kBatch = 128;
constexpr double kSgdLr = 0.01;

void fit_mlp(int threads, int64_t samples) {
  Generator gen(1);
  const Tensor x = randn({samples, 784}, Float32, default_device(), &gen);
  const Tensor y = randint(0, 10, {samples}, Int64, default_device(), &gen);
  manual_seed(0);  // the initial weights (Python: loom.random.seed(0) before loom.zoo.mlp)
  const zoo::Network net = zoo::mlp(784, {512, 512}, 10);
  train::Model model(net.graph, "sparse_categorical_crossentropy", "adam", {"accuracy"});
  train::FitOptions o;
  o.epochs = 1, o.batch_size = kBatch, o.seed = 7, o.progress = false;
  const double c0 = bench::cpu_ms(), t0 = bench::now_s();
  const train::History h = model.fit(x, y, o);
  const double wall = bench::now_s() - t0, cpu = (bench::cpu_ms() - c0) * 1e-3;
  std::printf("{\"name\": \"fit_mlp\", \"threads\": %d, \"seconds\": %.6g, \"cpu_seconds\": %.6g, "
              "\"loss\": %.17g, \"accuracy\": %.17g}\n",
              threads, wall, cpu, h.series.at("loss").back(), h.series.at("accuracy").back());
}

// step_mlp_autograd's state: the batch and the parameters, made at the first request and kept,
// so that the Python side, which keeps its own, takes the same steps.
struct Autograd {
  Tensor x, y;
  std::vector<Tensor> params;

  Autograd() {
    Generator gen(1);
    x = randn({kBatch, 784}, Float32, default_device(), &gen);
    y = randint(0, 10, {kBatch}, Int64, default_device(), &gen);
    const auto weight = [&](int64_t in, int64_t out) {  // (in, out): loom::linear is x @ w + b
      return normal({in, out}, 0.0, 0.05, Float32, default_device(), &gen).requires_grad_();
    };
    const auto bias = [](int64_t n) { return zeros({n}, Float32).requires_grad_(); };
    params = {weight(784, 512), bias(512), weight(512, 512), bias(512), weight(512, 10), bias(10)};
  }

  float step() {
    Tensor h = relu(linear(x, params[0], params[1]));
    h = relu(linear(h, params[2], params[3]));
    const Tensor loss = cross_entropy(linear(h, params[4], params[5]), y);
    backward(loss);
    {
      NoGrad off;
      for (Tensor& p : params) {
        Tensor g = p.grad();
        g *= kSgdLr;
        p -= g;
        p.zero_grad();
      }
    }
    return loss.item<float>();
  }
};

// `steps` timed steps (after 3 warm-up steps at the first request), as train_bench times them.
void step_mlp_autograd(std::unique_ptr<Autograd>& state, int threads, int steps) {
  if (!state) {
    state = std::make_unique<Autograd>();
    for (int i = 0; i < 3; ++i) state->step();
  }
  std::vector<double> wall, cpu;
  float first = 0, last = 0;
  for (int i = 0; i < steps; ++i) {
    const double c0 = bench::cpu_ms(), t0 = bench::now_s();
    last = state->step();
    cpu.push_back((bench::cpu_ms() - c0) * 1e-3);
    wall.push_back(bench::now_s() - t0);
    if (i == 0) first = last;
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  std::printf("{\"name\": \"step_mlp_autograd\", \"threads\": %d, \"seconds\": %.6g, \"cpu_seconds\": %.6g, "
              "\"min_seconds\": %.6g, \"min_cpu_seconds\": %.6g, \"first_loss\": %.9g, \"last_loss\": %.9g}\n",
              threads, wall[wall.size() / 2], cpu[cpu.size() / 2], wall.front(), cpu.front(), static_cast<double>(first),
              static_cast<double>(last));
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  int64_t samples = 2048;
  if (argc % 2 == 0) {
    std::fprintf(stderr, "usage: python_twin_bench [--threads N] [--samples N] < requests\n");
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--threads") threads = std::max(1, std::atoi(argv[i + 1]));
    else if (k == "--samples") samples = std::max<int64_t>(kBatch, std::atoll(argv[i + 1]));
    else {
      std::fprintf(stderr, "unknown option %s (valid: --threads N, --samples N)\n", k.c_str());
      return 2;
    }
  }
  try {
    set_num_threads(threads);
    std::unique_ptr<Autograd> autograd;
    std::string name;
    int steps = 0;
    while (std::cin >> name >> steps) {
      if (name == "fit_mlp") fit_mlp(threads, samples);
      else if (name == "step_mlp_autograd" && steps > 0) step_mlp_autograd(autograd, threads, steps);
      else {
        std::fprintf(stderr, "python_twin_bench: bad request '%s %d' (valid: fit_mlp N, step_mlp_autograd N)\n",
                     name.c_str(), steps);
        return 2;
      }
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "python_twin_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
