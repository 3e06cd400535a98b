// A graph with two outputs trained by plain Model::fit, as TensorGraph's models with several
// EndNodes are: a shared trunk reads a Fashion-MNIST image; one head names its kind of
// garment (tops, trousers and dresses, footwear, bags), the other its class (ten). The loss
// is the weighted sum of the two heads' cross entropies; History keeps each head's loss and
// accuracy under Keras' names ("kind_loss", "item_accuracy", "val_item_accuracy", ...).
//
//   two_heads_fashion_mnist [--epochs N] [--limit N] [--data DIR]
//
// It exits 1 unless both heads classify held-out images well (kind >= 90 %, item >= 80 %).
#include <loom/loom.h>

#include <cstdio>
#include <string>
#include <vector>

using namespace loom;

int main(int argc, char** argv) {
  int epochs = 3;
  int64_t limit = 20000;
  std::string dir = "/usr/share/datasets/fashion-mnist";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--epochs") epochs = std::stoi(v);
    else if (a == "--limit") limit = std::stoll(v);
    else if (a == "--data") dir = v;
  }
  auto images = [&](const std::string& split, int64_t n) {
    return slice(data::read_idx(dir + "/" + split + "-images-idx3-ubyte.gz").astype(Float32).reshape({-1, 784}) / 255.0, 0, 0, n);
  };
  auto items = [&](const std::string& split, int64_t n) {
    return slice(data::read_idx(dir + "/" + split + "-labels-idx1-ubyte.gz").astype(Int64), 0, 0, n);
  };
  // the kind of each class: 0 T-shirt, 2 pullover, 4 coat, 6 shirt are tops; 1 trouser and
  // 3 dress; 5 sandal, 7 sneaker and 9 ankle boot are footwear; 8 is a bag
  const Tensor kind_of = from_vector<int64_t>({0, 1, 0, 1, 0, 2, 0, 2, 3, 2}, {10});
  const Tensor x = images("train", limit), item = items("train", limit);
  const Tensor x_test = images("t10k", 10000), item_test = items("t10k", 10000);
  const Tensor kind = take(kind_of, item, 0), kind_test = take(kind_of, item_test, 0);

  manual_seed(4);
  nn::Input in(784, Float32, "image");
  nn::Linear h1(in, 256, {}, "trunk1");
  nn::Activation a1(h1, nn::relu, "trunk1_relu");
  nn::Linear h2(a1, 128, {}, "trunk2");
  nn::Activation a2(h2, nn::relu, "trunk2_relu");
  nn::Linear kind_head(a2, 4, {}, "kind");
  nn::Linear item_head(a2, 10, {}, "item");
  const Graph graph = Graph::build({kind_head, item_head}, {in});

  // a loss, a weight and metrics per output, by the output's name (Keras' compile)
  train::Model model(graph,
                     {{.output = "kind", .loss = "sparse_categorical_crossentropy", .weight = 0.5, .metrics = {"accuracy"}},
                      {.output = "item", .loss = "sparse_categorical_crossentropy", .weight = 1.0, .metrics = {"accuracy"}}},
                     "adam");
  const train::History h = model.fit({x}, {kind, item}, {.epochs = epochs, .progress = false, .batch_size = 64, .validation_split = 0.1});
  for (size_t e = 0; e < h.epochs(); ++e)
    std::printf("epoch %zu: loss %.4f (kind %.4f, item %.4f), val accuracy kind %.4f, item %.4f\n", e + 1, h["loss"][e],
                h["kind_loss"][e], h["item_loss"][e], h["val_kind_accuracy"][e], h["val_item_accuracy"][e]);
  const train::Logs test = model.evaluate({x_test}, {kind_test, item_test});
  std::printf("test: kind accuracy %.4f, item accuracy %.4f\n", test.at("kind_accuracy"), test.at("item_accuracy"));
  const bool ok = test.at("kind_accuracy") >= 0.90 && test.at("item_accuracy") >= 0.80;
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
