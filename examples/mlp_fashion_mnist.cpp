// Trains a two-layer perceptron on Fashion-MNIST with nothing but tensor ops and autograd:
// the forward pass is written by hand, loss.backward() computes the gradients, and a
// hand-written Adam step updates the weights.
//
//   ./build/examples/mlp_fashion_mnist [--epochs N] [--data DIR] [--threads N]
#include <loom/loom.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace loom;

namespace {

struct Args {
  int epochs = 10;
  int threads = 0;
  std::string data = "/usr/share/datasets/fashion-mnist";
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--epochs") a.epochs = std::atoi(argv[i + 1]);
    else if (k == "--data") a.data = argv[i + 1];
    else if (k == "--threads") a.threads = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s (valid: --epochs N, --data DIR, --threads N)\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

// Images as float32 rows scaled to [0, 1] and standardised; labels as int64.
void load(const std::string& dir, const std::string& split, Tensor& x, Tensor& y) {
  Tensor images = data::read_idx(dir + "/" + split + "-images-idx3-ubyte.gz");
  Tensor labels = data::read_idx(dir + "/" + split + "-labels-idx1-ubyte.gz");
  x = (images.astype(Float32).reshape({images.dim(0), 28 * 28}) / 255.0 - 0.2860) / 0.3530;
  y = labels.astype(Int64);
}

// Mean cross-entropy of logits against class ids.
Tensor mean_cross_entropy(const Tensor& logits, const Tensor& labels) {
  Tensor logp = log_softmax(logits, 1);
  return -mean(take_along_axis(logp, labels.expand_dims(1), 1));
}

struct Adam {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  int step = 0;
  std::vector<Tensor> m, v;

  void update(std::vector<Tensor>& params) {
    NoGrad no_grad;
    if (m.empty())
      for (auto& p : params) {
        m.push_back(zeros_like(p));
        v.push_back(zeros_like(p));
      }
    ++step;
    const double c1 = 1 - std::pow(beta1, step), c2 = 1 - std::pow(beta2, step);
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor g = params[i].grad();
      m[i] = m[i] * beta1 + g * (1 - beta1);
      v[i] = v[i] * beta2 + square(g) * (1 - beta2);
      params[i] -= (m[i] / c1) / (sqrt(v[i] / c2) + eps) * lr;
      params[i].zero_grad();
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  if (args.threads > 0) set_num_threads(args.threads);
  manual_seed(42);

  Tensor x_train, y_train, x_test, y_test;
  load(args.data, "train", x_train, y_train);
  load(args.data, "t10k", x_test, y_test);
  std::printf("Fashion-MNIST: %lld training and %lld test images, %d threads\n",
              static_cast<long long>(x_train.dim(0)), static_cast<long long>(x_test.dim(0)), get_num_threads());

  // 784 -> 256 -> 10, He-initialised
  const int64_t hidden = 256;
  Tensor w1 = normal({784, hidden}, 0, std::sqrt(2.0 / 784)).requires_grad_();
  Tensor b1 = zeros({hidden}).requires_grad_();
  Tensor w2 = normal({hidden, 10}, 0, std::sqrt(2.0 / hidden)).requires_grad_();
  Tensor b2 = zeros({10}).requires_grad_();
  std::vector<Tensor> params{w1, b1, w2, b2};
  auto forward = [&](const Tensor& x) { return matmul(relu(matmul(x, w1) + b1), w2) + b2; };

  Adam opt;
  const int64_t batch = 128, n = x_train.dim(0), steps = n / batch;
  const auto t0 = std::chrono::steady_clock::now();
  for (int epoch = 1; epoch <= args.epochs; ++epoch) {
    Tensor order = permutation(n);
    double total = 0;
    for (int64_t s = 0; s < steps; ++s) {
      Tensor idx = order.index({Slice(s * batch, (s + 1) * batch)});
      Tensor loss = mean_cross_entropy(forward(take(x_train, idx, 0)), take(y_train, idx, 0));
      loss.backward();
      opt.update(params);
      total += loss.item<double>();
      if ((s + 1) % 100 == 0)
        std::printf("  epoch %d  step %4lld/%lld  loss %.4f\n", epoch, static_cast<long long>(s + 1),
                    static_cast<long long>(steps), total / static_cast<double>(s + 1));
    }
    Tensor pred;
    {
      NoGrad no_grad;
      pred = argmax(forward(x_test), 1);
    }
    const double acc = mean(astype(pred == y_test, Float32)).item<double>();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("epoch %d  train loss %.4f  test accuracy %.2f%%  (%.1f s)\n", epoch, total / static_cast<double>(steps),
                100 * acc, secs);
  }
  return 0;
}
