// Loads a model saved by examples/save_load_model.cpp and runs it. This program holds no code
// that defines the model: the architecture comes from the file (graph_from_json) with the
// weights. It checks that the output for the saved sample is bit-for-bit the one the saving
// program computed.
//   ./build/examples/run_saved_model model.safetensors sample.safetensors
#include <loom/loom.h>

#include <cstring>
#include <iostream>

using namespace loom;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: run_saved_model MODEL.safetensors SAMPLE.safetensors\n";
    return 2;
  }
  io::Checkpoint info;
  Graph g = io::load_model(argv[1], &info);
  std::cout << "loaded " << argv[1] << ": " << g.nodes().size() << " layers\n";
  for (const auto& [k, v] : info.metadata) std::cout << "  " << k << ": " << v << "\n";
  for (const nn::Layer& l : g.nodes()) std::cout << "  " << l.name() << " (" << l.kind() << ") " << shape_str(l.shape()) << "\n";

  io::TensorMap sample = io::load_safetensors(argv[2]);
  Tensor out = g.compile()(sample.at("input"));
  std::cout << "predictions: " << out.argmax(1) << "\n";

  const Tensor& want = sample.at("output");
  const bool same = out.dtype() == want.dtype() && out.shape() == want.shape() &&
                    std::memcmp(out.contiguous().data_ptr(), want.contiguous().data_ptr(), want.nbytes()) == 0;
  std::cout << (same ? "output matches the saving program bit for bit\n" : "OUTPUT DIFFERS from the saving program\n");
  return same ? 0 : 1;
}
