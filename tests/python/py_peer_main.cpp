// The C++ side of the Python module's cross-language tests (python/tests/test_training.py,
// test_files.py; ctest python_pytest passes this program's path in LOOM_PY_PEER):
//   loom_py_peer fit <x.npy> <y.npy> <history.json>   the MLP of docs/python.md trained by
//       Model::fit(x, y) with the seeds and settings the Python test uses; the history as JSON
//       with every value at 17 significant digits (exact)
//   loom_py_peer save <model.safetensors>              a seeded MLP written by io::save_model
//   loom_py_peer load <model.safetensors> <x.npy> <y.npy>   the model loaded by io::load_model,
//       its output for x without gradients written to y.npy
#include <cstdio>
#include <fstream>
#include <string>

#include "loom/core/grad_mode.h"
#include "loom/data/npy.h"
#include "loom/io/model_file.h"
#include "loom/ops/random.h"
#include "loom/train/model.h"
#include "loom/zoo/architectures.h"

using namespace loom;

namespace {

int fit(const std::string& x_path, const std::string& y_path, const std::string& out_path) {
  const Tensor x = data::load_npy(x_path), y = data::load_npy(y_path);
  manual_seed(0);  // the Python test: loom.random.seed(0) before loom.zoo.mlp
  const zoo::Network net = zoo::mlp(x.dim(1), {32}, 10);
  train::Model model(net.graph, "sparse_categorical_crossentropy", "adam", {"accuracy"});
  train::FitOptions o;
  o.epochs = 3, o.batch_size = 32, o.validation_split = 0.25, o.seed = 7, o.progress = false;
  const train::History h = model.fit(x, y, o);
  std::ofstream out(out_path);
  out << "{";
  bool first_series = true;
  for (const auto& [name, values] : h.series) {
    out << (first_series ? "" : ", ") << "\"" << name << "\": [";
    for (size_t i = 0; i < values.size(); ++i) {
      char b[40];
      std::snprintf(b, sizeof b, "%.17g", values[i]);
      out << (i ? ", " : "") << b;
    }
    out << "]";
    first_series = false;
  }
  out << "}\n";
  return out.good() ? 0 : 1;
}

int save(const std::string& path) {
  manual_seed(3);
  const zoo::Network net = zoo::mlp(4, {8}, 3);
  io::save_model(path, net.graph);
  return 0;
}

int load(const std::string& path, const std::string& x_path, const std::string& y_path) {
  const Graph g = io::load_model(path);
  NoGrad off;  // inference, as the Python side runs it (with loom.no_grad())
  data::save_npy(y_path, g.compile()(data::load_npy(x_path)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  try {
    if (cmd == "fit" && argc == 5) return fit(argv[2], argv[3], argv[4]);
    if (cmd == "save" && argc == 3) return save(argv[2]);
    if (cmd == "load" && argc == 5) return load(argv[2], argv[3], argv[4]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom_py_peer: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: loom_py_peer fit X.npy Y.npy OUT.json | save MODEL | load MODEL X.npy Y.npy\n");
  return 2;
}
