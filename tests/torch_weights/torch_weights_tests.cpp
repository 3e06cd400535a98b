// PyTorch weights into Loom (loom/io/torch_weights.h, docs/torch_weights.md), both sides real:
// make_fixtures.py (Debian's torch and torchvision) writes torchvision models' state_dicts as
// safetensors with an input and torchvision's logits into LOOM_TORCH_WEIGHTS_DIR; here the zoo's
// models load them through io::torchvision_map and must give the same logits. The strictness
// tests (every problem in one error, the graph unchanged) and the pattern rules need no fixture.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include <loom/data/npy.h>
#include <loom/loom.h>
#include <loom/io/torch_weights.h>

using namespace loom;

namespace {

std::string fixtures() {
  const char* d = std::getenv("LOOM_TORCH_WEIGHTS_DIR");
  return d ? d : "";
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

// max |a - b| / max |b|
double relative_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
  return d / std::max(1e-30, max_abs(b));
}

void expect_torchvision_logits(const std::string& name, const std::function<zoo::Network()>& build) {
  const std::string dir = fixtures();
  if (dir.empty()) GTEST_SKIP() << "LOOM_TORCH_WEIGHTS_DIR is not set (ctest sets it after make_fixtures.py)";
  zoo::Network net = build();
  io::load_torch_weights(dir + "/" + name + ".safetensors", net.graph, io::torchvision_map(net));
  const Tensor x = data::load_npy(dir + "/" + name + ".input.npy");
  const Tensor want = data::load_npy(dir + "/" + name + ".logits.npy");
  Tensor y;
  {
    nn::ModeScope eval(nn::Mode::Eval);
    y = net(x);
  }
  ASSERT_EQ(y.shape(), want.shape());
  const double diff = relative_difference(y, want);
  std::printf("%-12s logits %s, max |torchvision| %.4g, max |loom - torchvision| / max |torchvision| = %.3g\n", name.c_str(),
              shape_str(y.shape()).c_str(), max_abs(want), diff);
  EXPECT_LT(diff, 1e-4) << name;
}

// (the zoo's own value of every tensor, for "the graph is unchanged")
io::TensorMap snapshot(const Graph& g) {
  io::TensorMap out;
  for (const auto& [k, t] : io::graph_state(g)) {
    Tensor copy = empty_like(t);
    copy.copy_(t.detach());
    out.emplace(k, copy);
  }
  return out;
}

bool same(const io::TensorMap& a, const io::TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, t] : a)
    if (!b.count(k) || !array_equal(t, b.at(k))) return false;
  return true;
}

}  // namespace

TEST(TorchWeights, ResNet18MatchesTorchvision) { expect_torchvision_logits("resnet18", [] { return zoo::resnet18(); }); }
TEST(TorchWeights, Vgg16MatchesTorchvision) { expect_torchvision_logits("vgg16", [] { return zoo::vgg16(); }); }
TEST(TorchWeights, Vgg19MatchesTorchvision) { expect_torchvision_logits("vgg19", [] { return zoo::vgg19(); }); }
TEST(TorchWeights, DenseNet121MatchesTorchvision) {
  expect_torchvision_logits("densenet121", [] { return zoo::densenet121(); });
}

// A missing key, a leftover key and a shape mismatch: all named in one error; nothing copied.
TEST(TorchWeights, StrictErrorsAllAtOnceGraphUnchanged) {
  const std::string dir = fixtures();
  if (dir.empty()) GTEST_SKIP() << "LOOM_TORCH_WEIGHTS_DIR is not set";
  zoo::Network net = zoo::resnet18();
  io::TensorMap sd = io::load_safetensors(dir + "/resnet18.safetensors");
  sd.erase("layer2.1.bn1.running_var");               // missing
  sd.emplace("layer5.0.conv1.weight", zeros({4, 4}));  // leftover
  sd["fc.weight"] = zeros({10, 512});                 // shape: (10, 512) -> (512, 10), the graph has (512, 1000)
  const io::TensorMap before = snapshot(net.graph);
  try {
    io::load_torch_state(net.graph, sd, io::torchvision_map(net), "resnet18.safetensors");
    FAIL() << "no error";
  } catch (const ValueError& e) {
    const std::string m = e.what();
    std::printf("%s\n", m.c_str());
    EXPECT_NE(m.find("resnet18.safetensors"), std::string::npos);
    EXPECT_NE(m.find("'layer2.1.bn1/running_var'"), std::string::npos) << m;
    EXPECT_NE(m.find("'layer5.0.conv1.weight'"), std::string::npos) << m;
    EXPECT_NE(m.find("'fc.weight' -> 'fc/weights' has shape (512, 10) but the graph expects (512, 1000) (transposed from (10, 512))"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("3 problems"), std::string::npos) << m;
  }
  EXPECT_TRUE(same(before, snapshot(net.graph)));
  // num_batches_tracked is ignored, the dropout-free ResNet keeps nothing: the intact file loads
  io::load_torch_weights(dir + "/resnet18.safetensors", net.graph, io::torchvision_map(net));
  EXPECT_FALSE(same(before, snapshot(net.graph)));
}

// A model of one's own whose Loom names differ from PyTorch's: rules with placeholders, a
// transposed Linear, an ignored key, and a kept Dropout generator.
TEST(TorchWeights, PatternRulesForOnesOwnModel) {
  nn::Input x(Shape{-1, 3, 8, 8}, Float32, "x");
  nn::Layer h = nn::Conv2D(x, 4, 3, {.padding = 1}, "stage1.conv");
  h = nn::BatchNorm(h, {}, "stage1.bn");
  h = nn::Conv2D(h, 5, 3, {.padding = 1}, "stage2.conv");
  h = nn::BatchNorm(h, {}, "stage2.bn");
  h = nn::Flatten(nn::GlobalPool(h, nn::GlobalPool::Mode::Avg, "pool"), "flat");
  h = nn::Dropout(h, 0.5, 1, "drop");
  nn::Linear head(h, 2, {}, "head");
  Graph g = Graph::build({head}, {x});

  // PyTorch: body.{0,1}.conv / body.{0,1}.norm, classifier
  manual_seed(7);
  io::TensorMap sd;
  sd["body.0.conv.weight"] = normal({4, 3, 3, 3});
  sd["body.0.conv.bias"] = normal({4});
  sd["body.1.conv.weight"] = normal({5, 4, 3, 3});
  sd["body.1.conv.bias"] = normal({5});
  for (const auto& [i, c] : {std::pair<int, int64_t>{0, 4}, {1, 5}}) {
    const std::string p = "body." + std::to_string(i) + ".norm.";
    sd[p + "weight"] = uniform({c}, 0.5, 1.5);
    sd[p + "bias"] = normal({c});
    sd[p + "running_mean"] = normal({c});
    sd[p + "running_var"] = uniform({c}, 0.5, 1.5);
    sd[p + "num_batches_tracked"] = scalar_tensor(3.0).astype(Int64);
  }
  sd["classifier.weight"] = normal({2, 5});
  sd["classifier.bias"] = normal({2});

  io::TorchMap map;
  map.rules = {{"body.{i}.conv.weight", "stage{n}.conv/weights"}};
  // a Loom placeholder the PyTorch side lacks is refused when the map is used
  EXPECT_THROW(io::load_torch_state(g, sd, map), ValueError);

  map.rules = {
      {"body.{i}.conv.{p}", "stage{i}.conv/{p}s"},  // only for weights: the bias rule comes first below
  };
  map.rules.insert(map.rules.begin(), {"body.{i}.conv.bias", "stage{i}.conv/bias"});
  map.rules.push_back({"body.{i}.norm.{p}", "stage{i}.bn/{p}"});
  map.rules.push_back({"classifier.weight", "head/weights", io::TorchLayout::Transpose});
  map.rules.push_back({"classifier.bias", "head/bias"});
  map.ignore = {"{m}.num_batches_tracked"};
  map.keep = {"drop/rng"};
  // torch's body.0 is Loom's stage1: wrong numbering is named, nothing loaded
  const io::TensorMap before = snapshot(g);
  try {
    io::load_torch_state(g, sd, map);
    FAIL() << "no error";
  } catch (const ValueError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'body.0.conv.weight' -> 'stage0.conv/weights'"), std::string::npos) << m;
    EXPECT_NE(m.find("no PyTorch key fills the graph's"), std::string::npos) << m;
  }
  EXPECT_TRUE(same(before, snapshot(g)));

  // the right numbering: Loom's stage{k} is PyTorch's body.{k-1}, spelled out per stage
  io::TorchMap good;
  for (int k = 1; k <= 2; ++k) {
    const std::string t = "body." + std::to_string(k - 1) + ".", l = "stage" + std::to_string(k) + ".";
    good.rules.push_back({t + "conv.weight", l + "conv/weights"});
    good.rules.push_back({t + "conv.bias", l + "conv/bias"});
    good.rules.push_back({t + "norm.{p}", l + "bn/{p}"});
  }
  good.rules.push_back({"classifier.weight", "head/weights", io::TorchLayout::Transpose});
  good.rules.push_back({"classifier.bias", "head/bias"});
  good.ignore = {"{m}.num_batches_tracked"};
  good.keep = {"{m}/rng"};
  io::load_torch_state(g, sd, good);
  const io::TensorMap st = io::graph_state(g);
  EXPECT_TRUE(array_equal(st.at("stage2.conv/weights"), sd.at("body.1.conv.weight")));
  EXPECT_TRUE(array_equal(st.at("stage1.bn/running_var"), sd.at("body.0.norm.running_var")));
  EXPECT_TRUE(array_equal(st.at("head/weights"), sd.at("classifier.weight").transpose()));
  EXPECT_TRUE(array_equal(st.at("drop/rng"), before.at("drop/rng")));

  // Transpose of a tensor that is not a matrix, and two keys for one tensor, are named
  io::TensorMap bad = sd;
  bad["classifier.weight"] = normal({2, 5, 1});
  bad["extra.bias"] = normal({2});
  io::TorchMap twice = good;
  twice.rules.push_back({"extra.bias", "head/bias"});
  try {
    io::load_torch_state(g, bad, twice);
    FAIL() << "no error";
  } catch (const ValueError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'classifier.weight' -> 'head/weights' is to be transposed but has shape (2, 5, 1)"), std::string::npos) << m;
    EXPECT_NE(m.find("'classifier.bias' and 'extra.bias' both map to 'head/bias'"), std::string::npos) << m;
    EXPECT_EQ(m.find("no PyTorch key fills"), std::string::npos) << m;  // head/weights: named once, above
    EXPECT_NE(m.find("2 problems"), std::string::npos) << m;
  }
}

// torch_map_by_names on a graph named as its PyTorch module; torchvision_map refuses models
// torchvision does not have.
TEST(TorchWeights, MapByNames) {
  zoo::Network net = zoo::vgg({8, 0, 16, 0}, 10, /*batch_norm=*/true, 0.5, 3, 32, "vgg_small");
  const io::TorchMap m = io::torchvision_map(net);
  bool linear_transposed = false;
  for (const io::TorchRule& r : m.rules)
    if (r.torch == "classifier.0.weight") linear_transposed = r.loom == "classifier.0/weights" && r.layout == io::TorchLayout::Transpose;
  EXPECT_TRUE(linear_transposed);
  EXPECT_EQ(m.keep, (std::vector<std::string>{"classifier.2/rng", "classifier.5/rng"}));
  EXPECT_THROW(io::torchvision_map(zoo::mlp(4, {3}, 2)), ValueError);
}
