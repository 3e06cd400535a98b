// Reloads the model file written by cnn_fashion_mnist in a fresh process — this program holds
// no model code: the architecture comes from the file — and measures its test accuracy, then
// puts it next to the results published with the dataset (the table in the Debian package's
// README).
//
//   ./build/examples/evaluate_saved_model [MODEL_FILE] [DATA_DIR]
#include <loom/loom.h>
#include <loom/io/model_file.h>
#include <zlib.h>

#include <cstdio>
#include <string>

using namespace loom;

namespace {

// The published "| classifier | preprocessing | fashion accuracy | ..." rows of the package README.
void print_published(const char* readme) {
  gzFile f = gzopen(readme, "rb");
  if (!f) {
    std::printf("(the dataset's README %s is not readable)\n", readme);
    return;
  }
  char line[4096];
  std::printf("Published Fashion-MNIST results (from %s):\n", readme);
  while (gzgets(f, line, sizeof line)) {
    std::string s = line;
    if (s.rfind("|", 0) != 0 || s.find("0.9") == std::string::npos) continue;
    // columns: classifier | preprocessing | fashion accuracy | ...
    std::vector<std::string> cols;
    size_t p = 1;
    for (size_t q; (q = s.find('|', p)) != std::string::npos; p = q + 1) cols.push_back(s.substr(p, q - p));
    if (cols.size() < 3) continue;
    auto trim = [](std::string t) {
      t.erase(0, t.find_first_not_of(' '));
      t.erase(t.find_last_not_of(' ') + 1);
      return t;
    };
    std::printf("  %-6s %s (%s)\n", trim(cols[2]).c_str(), trim(cols[0]).c_str(), trim(cols[1]).c_str());
  }
  gzclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "main-job/fashion_cnn.safetensors";
  const std::string dir = argc > 2 ? argv[2] : "/usr/share/datasets/fashion-mnist";
  Graph model = io::load_model(path);
  std::printf("loaded %s: %zu layers, inputs %s\n", path.c_str(), model.nodes().size(), shape_str(model.inputs()[0].shape()).c_str());

  // the model's input convention: pixels / 255, standardised with the training set's statistics
  Tensor images = data::read_idx(dir + "/t10k-images-idx3-ubyte.gz");
  Tensor labels = data::read_idx(dir + "/t10k-labels-idx1-ubyte.gz").astype(Int64);
  Tensor x = ((images.astype(Float32) / 255.0 - 0.2860) / 0.3530).reshape({images.dim(0), 1, 28, 28});

  Plan plan = model.compile();
  NoGrad no_grad;
  int64_t correct = 0;
  for (int64_t b = 0; b < x.dim(0); b += 500) {
    Tensor logits = plan(slice(x, 0, b, b + 500));
    correct += sum(argmax(logits, 1) == slice(labels, 0, b, b + 500)).item<int64_t>();
  }
  const double acc = static_cast<double>(correct) / static_cast<double>(x.dim(0));
  std::printf("reloaded model: test accuracy %.2f%% (%lld / %lld)\n\n", 100 * acc, static_cast<long long>(correct),
              static_cast<long long>(x.dim(0)));
  print_published("/usr/share/doc/dataset-fashion-mnist/README.md.gz");
  std::printf("(the package's benchmark/baselines.json lists only the scikit-learn parameter grids, no scores)\n");
  return 0;
}
