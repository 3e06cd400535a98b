#pragma once
// The MLP of the search and cross-validation examples (examples/search_asha.cpp,
// examples/cross_validation.cpp): Fashion-MNIST images as rows of 784 values in [0, 1], a
// 784 -> width -> 10 perceptron trained with Adam one epoch at a time.
#include <loom/loom.h>

#include <cstdint>
#include <memory>
#include <string>

namespace fashion_mlp {

struct Data {
  loom::Tensor x, y;  // (N, 784) float32, (N,) int64
};

// Images [first, first + n) of a split ("train" or "t10k").
inline Data load(const std::string& dir, const std::string& split, int64_t first, int64_t n) {
  using namespace loom;
  Tensor x = data::read_idx(dir + "/" + split + "-images-idx3-ubyte.gz").astype(Float32) / 255.0;
  Tensor y = data::read_idx(dir + "/" + split + "-labels-idx1-ubyte.gz").astype(Int64);
  return {slice(x.reshape({-1, 784}), 0, first, first + n), slice(y, 0, first, first + n)};
}

class Mlp {
 public:
  Mlp(int64_t width, double lr, uint64_t seed) {
    using namespace loom;
    manual_seed(seed);
    nn::Input x(784, Float32, "image");
    nn::Linear hidden(x, width, {}, "hidden");
    nn::Activation relu(hidden, nn::relu, "relu");
    nn::Linear logits(relu, 10, {}, "logits");
    const Graph g = Graph::build({logits}, {x});
    model_ = std::make_unique<train::Model>(
        g, [](const Tensor& y, const Tensor& t) { return train::cross_entropy(y, t); },
        std::make_shared<train::Adam>(g.parameters(), train::AdamOptions{.lr = lr}), train::MetricList{std::make_shared<train::Accuracy>()});
  }
  void epoch(const Data& d, uint64_t seed) { model_->fit(d.x, d.y, {.progress = false, .batch_size = 64, .seed = seed}); }
  double accuracy(const Data& d) { return model_->evaluate(d.x, d.y, 500)["accuracy"]; }

 private:
  std::unique_ptr<loom::train::Model> model_;
};

}  // namespace fashion_mlp
