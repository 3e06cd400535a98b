// A store for the tritonclient test: model "mlp" versions 1 and 2 (alias production -> 1), and
// expected.json with each version's outputs on fixed inputs (the graph run directly).
#include <loom/core/grad_mode.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/ops/creation.h>
#include <loom/ops/random.h>
#include <loom/store/model_registry.h>
#include <loom/store/store.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "unit/store/store_test_util.h"

int main(int argc, char** argv) {
  using namespace loom;
  if (argc != 2) {
    std::cerr << "usage: make_store OUT_DIR\n";
    return 2;
  }
  const std::filesystem::path out = argv[1];
  store::Store s = store::Store::open((out / "serve.db").string());
  const Graph v1 = loom_test::small_mlp(11), v2 = loom_test::small_mlp(12);
  s.models().save("mlp", v1);
  s.models().save("mlp", v2);
  s.models().set_alias("mlp", "production", 1);
  Generator g(3);
  const Tensor x = normal({6, 4}, 0, 1, Float32, default_device(), &g);
  nlohmann::json expected;
  expected["x"] = x.to_vector<float>();
  NoGrad inference;  // as the server runs it: batch-invariant products (docs/serve.md)
  expected["v1"] = v1.as_function()({x})[0].to_vector<float>();
  expected["v2"] = v2.as_function()({x})[0].to_vector<float>();
  std::ofstream(out / "expected.json") << expected.dump();
  return 0;
}
