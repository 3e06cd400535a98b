// loom_zoo_params [--dump DIR]
// Prints {"model": parameter count, ...} for the zoo models at the fixed configurations that
// tests/zoo/check_params.py rebuilds in PyTorch / torchvision.
// With --dump DIR it also writes, for a set of models, every parameter and buffer, an input
// and Loom's Eval-mode output as .npy files plus DIR/manifest.json, so that the script can load
// the same weights into the PyTorch modules and compare outputs (the architectures, not only
// their sizes, must agree).
#include <loom/data/npy.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include <loom/loom.h>
#include <loom/zoo/architectures.h>

using namespace loom;
using json = nlohmann::json;

namespace {

// Through Loom's NPY writer, which tests/data checks against NumPy itself.
void write_npy(const std::filesystem::path& path, const Tensor& t) { data::save_npy(path.string(), t.detach()); }

// Gives BatchNorm layers non-trivial affine parameters and running statistics, so that an
// Eval-mode comparison exercises them.
void randomize_batch_norms(const zoo::Network& m) {
  NoGrad off;
  for (const nn::Layer& l : m.graph.nodes()) {
    if (std::string(l.kind()) != "BatchNorm") continue;
    auto& s = l.state();
    const int64_t c = s.buffer("running_mean").shape()[0];
    s.buffer("running_mean").copy_(normal({c}, 0, 0.1));
    s.buffer("running_var").copy_(uniform({c}, 0.5, 1.5));
    if (s.has_param("weight")) {
      s.param("weight").copy_(uniform({c}, 0.5, 1.5));
      s.param("bias").copy_(normal({c}, 0, 0.1));
    }
  }
}

json dump(const std::filesystem::path& dir, const std::string& key, const zoo::Network& m, const Tensor& x) {
  randomize_batch_norms(m);
  json entry{{"params", json::array()}};
  int k = 0;
  for (const nn::Layer& l : m.graph.nodes()) {
    for (bool buffers : {false, true}) {
      for (const auto& [path, t] : buffers ? l.state().all_buffers() : l.state().all_params()) {
        const std::string file = key + "." + std::to_string(k++) + ".npy";
        write_npy(dir / file, t);
        entry["params"].push_back({{"layer", l.name()}, {"kind", l.kind()}, {"name", path}, {"file", file}});
      }
    }
  }
  Tensor y;
  {
    nn::ModeScope eval(nn::Mode::Eval);
    y = m(x);
  }
  write_npy(dir / (key + ".input.npy"), x);
  write_npy(dir / (key + ".output.npy"), y);
  entry["input"] = key + ".input.npy";
  entry["output"] = key + ".output.npy";
  return entry;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dump_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dump" && i + 1 < argc) dump_dir = argv[++i];
    else {
      std::fprintf(stderr, "usage: loom_zoo_params [--dump DIR]\n");
      return 2;
    }
  }
  // Each model is built, counted and dropped before the next (vgg16 alone holds 138 M floats).
  const std::vector<std::pair<std::string, std::function<zoo::Network()>>> models = {
      {"mlp", [] { return zoo::mlp(784, {256, 128}, 10, nn::relu, 0.2); }},
      {"lenet", [] { return zoo::lenet(10); }},
      {"vgg11", [] { return zoo::vgg11(1000); }},
      {"vgg16", [] { return zoo::vgg16(1000); }},
      {"vgg19", [] { return zoo::vgg19(1000); }},
      {"resnet18", [] { return zoo::resnet18(1000); }},
      {"resnet34", [] { return zoo::resnet34(1000); }},
      {"densenet121", [] { return zoo::densenet121(1000); }},
      {"unet", [] { return zoo::unet(1, 2, 64, 4); }},
      {"unet_bn_small", [] { return zoo::unet(3, 5, 16, 3, true); }},
      {"lstm_lm", [] { return zoo::lstm_lm(10000, 256, 512, 2, 0.2); }},
      {"transformer_classifier", [] { return zoo::transformer_classifier(20000, 128, 256, 8, 1024, 4, 5, 0.1); }},
  };
  std::printf("{");
  for (size_t i = 0; i < models.size(); ++i) {
    const int64_t n = models[i].second().parameter_count();
    std::printf("%s\n  \"%s\": %lld", i ? "," : "", models[i].first.c_str(), static_cast<long long>(n));
    std::fflush(stdout);
  }
  std::printf("\n}\n");

  if (!dump_dir.empty()) {
    // Small inputs; the configurations match check_params.py's output_cases().
    namespace fs = std::filesystem;
    fs::create_directories(dump_dir);
    manual_seed(1234);
    json manifest;
    manifest["mlp"] = dump(dump_dir, "mlp", zoo::mlp(784, {256, 128}, 10, nn::relu, 0.2), uniform({3, 784}));
    manifest["lenet"] = dump(dump_dir, "lenet", zoo::lenet(10), uniform({2, 1, 28, 28}));
    manifest["vgg_small"] = dump(dump_dir, "vgg_small", zoo::vgg({16, 0, 32, 0, 32, 32, 0}, 10, false, 0.5, 3, 64, "vgg_small"),
                                   uniform({2, 3, 20, 20}));
    manifest["vgg_bn_small"] = dump(dump_dir, "vgg_bn_small", zoo::vgg({8, 0, 16, 16, 0}, 10, true, 0.5, 3, 32, "vgg_bn_small"),
                                      uniform({2, 3, 56, 56}));
    manifest["resnet18"] = dump(dump_dir, "resnet18", zoo::resnet18(1000), uniform({1, 3, 48, 40}));
    manifest["densenet121"] = dump(dump_dir, "densenet121", zoo::densenet121(1000), uniform({2, 3, 32, 32}));
    manifest["unet_small"] = dump(dump_dir, "unet_small", zoo::unet(1, 2, 8, 3), uniform({2, 1, 32, 24}));
    manifest["unet_bn_small"] = dump(dump_dir, "unet_bn_small", zoo::unet(3, 5, 16, 3, true), uniform({1, 3, 16, 16}));
    manifest["lstm_lm_small"] = dump(dump_dir, "lstm_lm_small", zoo::lstm_lm(50, 16, 24, 2, 0.2), randint(0, 50, {3, 7}));
    manifest["transformer_small"] = dump(dump_dir, "transformer_small", zoo::transformer_classifier(60, 10, 32, 4, 64, 2, 3, 0.1),
                                         randint(0, 60, {2, 10}));
    std::ofstream(fs::path(dump_dir) / "manifest.json") << manifest.dump(1);
  }
  return 0;
}
