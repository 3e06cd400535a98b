// The model of bench/serve_bench.sh: a Fashion-MNIST-sized MLP (784 -> 256 -> ReLU -> 10) saved
// in a store for `loom serve`, its weights as safetensors for the PyTorch peer, and one request
// body (a row of 784 values) both are sent.
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/io/model_file.h>
#include <loom/io/safetensors.h>
#include <loom/nn/activation.h>
#include <loom/nn/input.h>
#include <loom/nn/linear.h>
#include <loom/ops/random.h>
#include <loom/store/model_registry.h>
#include <loom/store/store.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>

int main(int argc, char** argv) {
  using namespace loom;
  if (argc != 2) {
    std::cerr << "usage: serve_prep OUT_DIR\n";
    return 2;
  }
  const std::filesystem::path out = argv[1];
  manual_seed(1);
  nn::Input x(784, Float32, "x");
  nn::Linear hidden(x, 256, {}, "hidden");
  nn::Activation relu(hidden, nn::relu, "relu");
  nn::Linear logits(relu, 10, {}, "logits");
  const Graph g = Graph::build({logits}, {x});
  store::Store s = store::Store::open((out / "serve.db").string());
  s.models().save("mlp", g);
  io::save_safetensors((out / "mlp.safetensors").string(), io::graph_state(g));
  Generator gen(2);
  const Tensor row = uniform({1, 784}, 0.0, 1.0, Float32, default_device(), &gen);
  nlohmann::json body = {{"inputs", {{{"name", "x"}, {"shape", {1, 784}}, {"datatype", "FP32"}, {"data", row.to_vector<float>()}}}}};
  std::ofstream(out / "body.json") << body.dump();
  for (const auto& [name, t] : io::graph_state(g)) {
    std::cout << name << " [";
    for (int64_t d : t.shape()) std::cout << d << " ";
    std::cout << "]\n";
  }
  return 0;
}
