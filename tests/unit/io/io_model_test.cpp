// Model files and checkpoints: bitwise round trips of MLP, CNN and RNN graphs, shared and tied
// weights, extras and metadata, strict name / shape / dtype checks, atomic saves.
#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/file.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/graph/module.h>
#include <loom/graph/serialize.h>
#include <loom/io/model_file.h>
#include <loom/io/safetensors.h>
#include <loom/nn/activation.h>
#include <loom/nn/conv.h>
#include <loom/nn/init.h>
#include <loom/nn/input.h>
#include <loom/nn/lambda.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/nn/mode.h>
#include <loom/nn/normalization.h>
#include <loom/nn/pooling.h>
#include <loom/nn/recurrent.h>
#include <loom/nn/state.h>
#include <loom/ops/conv.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/random.h>
#include <unistd.h>

#include <filesystem>

#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::same_bytes;
using loom_test::TempDir;
namespace fs = std::filesystem;

namespace {


// An MLP with a layer reused on a second input (shared State) and an output tied to the
// first layer's weights (transposed).
Graph mlp(uint64_t seed, int64_t hidden = 16, DType dtype = Float32, bool extra_layer = false) {
  manual_seed(seed);
  nn::Input x(8, dtype, "x");
  nn::Linear l1(x, hidden, {}, "l1");
  nn::Activation a1(l1, nn::relu, "a1");
  nn::Linear l2(a1, hidden, {.bias_init = nn::Init::uniform(-0.5, 0.5)}, "l2");
  nn::Layer l2b = l2.reuse_with(nn::Activation(l2, nn::tanh, "a2"), "l2b");
  nn::Layer last = l2b;
  if (extra_layer) last = nn::Linear(l2b, hidden, {}, "l3");
  nn::Linear out(last, 8, {.shared_weights = l1.state().param("weights"), .transpose_weights = true}, "out");
  return Graph::build({out}, {x});
}

Graph cnn(uint64_t seed) {
  manual_seed(seed);
  nn::Input img(Shape{-1, 2, 8, 8}, Float32, "img");
  nn::Conv2D c(img, 4, 3, {.padding = "same"}, "conv");
  nn::BatchNorm bn(c, {}, "bn");
  nn::Activation r(bn, nn::relu, "relu");
  nn::MaxPool2D p(r, 2, {}, "pool");
  nn::Conv2D c2(p, 6, 3, {.bias = false}, "conv2");
  nn::BatchNorm bn2(c2, {.momentum = 0.3}, "bn2");
  nn::GlobalPool gp(bn2, nn::GlobalPool::Mode::Avg, "gp");
  nn::Linear fc(gp, 3, {}, "fc");
  return Graph::build({fc}, {img});
}

Graph rnn(uint64_t seed) {
  manual_seed(seed);
  nn::Input seq(Shape{-1, 5, 3}, Float32, "seq");
  nn::RNN enc(seq, 4, {.cell = nn::CellKind::GRU, .bidirectional = true}, "enc");
  nn::RNN mid(enc, 3, {.cell = nn::CellKind::RNN}, "mid");
  nn::RNN dec(mid, 2, {.cell = nn::CellKind::LSTM, .return_sequences = false}, "dec");
  nn::Linear fc(dec, 2, {}, "fc");
  return Graph::build({fc}, {seq});
}

// Saves, loads, and checks the loaded graph computes bit-identical outputs and holds the same
// parameters and buffers.
void expect_round_trip(const Graph& g, const Tensor& x, const std::string& path) {
  io::save_model(path, g);
  Graph back = io::load_model(path);
  const Tensor want = g.compile()(x), got = back.compile()(x);
  EXPECT_TRUE(same_bytes(want, got)) << "outputs differ after the round trip";
  io::TensorMap a = io::graph_state(g), b = io::graph_state(back);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [k, t] : a) {
    ASSERT_TRUE(b.count(k)) << k;
    EXPECT_TRUE(same_bytes(t, b.at(k))) << k;
    EXPECT_EQ(t.requires_grad(), b.at(k).requires_grad()) << k;
  }
}

}  // namespace

TEST(IoModel, MlpRoundTripIsBitwiseWithSharedAndTiedWeightsWrittenOnce) {
  TempDir d;
  Graph g = mlp(1);
  const std::string path = d / "mlp.safetensors";
  manual_seed(7);
  expect_round_trip(g, uniform({5, 8}, -2, 2), path);
  // l1 weights + bias, l2 weights + bias (shared with l2b), out's bias (its weights are l1's)
  io::Metadata meta;
  io::TensorMap file = io::load_safetensors(path, &meta);
  std::vector<std::string> keys;
  for (const auto& [k, t] : file) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"l1/bias", "l1/weights", "l2/bias", "l2/weights", "out/bias"}));
  EXPECT_EQ(meta.at("loom.format"), "model");
  EXPECT_EQ(meta.at("loom.graph"), graph_to_json(g));
  // the loaded graph keeps the tie: out reads l1's weights
  Graph back = io::load_model(path);
  const nn::Layer* l1 = nullptr;
  const nn::Layer* out = nullptr;
  for (const nn::Layer& l : back.nodes()) {
    if (l.name() == "l1") l1 = &l;
    if (l.name() == "out") out = &l;
  }
  ASSERT_TRUE(l1 && out);
  EXPECT_TRUE(l1->state().param("weights").shares_storage_with(out->state().param("weights")));
}

TEST(IoModel, CnnRoundTripKeepsBatchNormRunningStatistics) {
  TempDir d;
  Graph g = cnn(2);
  manual_seed(3);
  const Tensor x = uniform({4, 2, 8, 8}, -1, 3);
  {
    nn::ModeScope train(nn::Mode::Train);  // moves the running averages away from (0, 1)
    g.compile()(x);
    g.compile()(x * 2.0);
  }
  const io::TensorMap st = io::graph_state(g);
  ASSERT_TRUE(st.count("bn/running_mean") && st.count("bn2/running_var"));
  EXPECT_GT(abs(st.at("bn/running_mean")).max().item<double>(), 0.01);
  // a graph rebuilt from the JSON alone has fresh statistics and gives another output
  Graph fresh = graph_from_json(graph_to_json(g));
  EXPECT_FALSE(array_equal(fresh.compile()(x), g.compile()(x)));
  expect_round_trip(g, x, d / "cnn.safetensors");
}

TEST(IoModel, RnnRoundTripIsBitwise) {
  TempDir d;
  Graph g = rnn(4);
  manual_seed(5);
  expect_round_trip(g, uniform({3, 5, 3}, -1, 1), d / "rnn.safetensors");
  io::TensorMap file = io::load_safetensors(d / "rnn.safetensors");
  for (const char* k : {"enc/forward/w_ih", "enc/backward/b_hh", "mid/w_hh", "dec/b_ih"}) EXPECT_TRUE(file.count(k)) << k;
  EXPECT_EQ(file.size(), 8u + 4u + 4u + 2u);
}

TEST(IoModel, ModulesReusedTwiceAreWrittenOnce) {
  TempDir d;
  manual_seed(6);
  nn::Input a(4, Float32, "a");
  nn::Linear inner(a, 4, {}, "inner");
  nn::Activation act(inner, nn::tanh, "act");
  nn::Module block({a}, act, "block");
  nn::Input x(4, Float32, "x");
  nn::Layer b1 = block.reuse_with(x, "b1");
  nn::Layer b2 = block.reuse_with(b1, "b2");
  Graph g = Graph::build({b2}, {x});
  manual_seed(8);
  expect_round_trip(g, uniform({2, 4}), d / "mod.safetensors");
  EXPECT_EQ(io::load_safetensors(d / "mod.safetensors").size(), 2u);  // inner/weights, inner/bias once
}

TEST(IoModel, CheckpointCarriesExtrasAndMetadata) {
  TempDir d;
  Graph g = mlp(10);
  const std::string path = d / "ckpt.safetensors";
  io::TensorMap extra{{"adam/step", scalar_tensor(int64_t{42}, Int64)},
                      {"adam/m/l1/weights", ones({8, 16}, Float32) * 0.5},
                      {"rng", from_vector<uint8_t>({1, 2, 3}, {3})}};
  io::Metadata meta{{"epoch", "3"}, {"note", "after warmup"}};
  io::save_state(path, g, extra, meta);
  EXPECT_EQ(io::load_safetensors_metadata(path).at("loom.format"), "state");
  EXPECT_EQ(io::load_safetensors_metadata(path).count("loom.graph"), 0u);

  Graph other = mlp(11);  // same architecture, other weights
  manual_seed(12);
  const Tensor x = uniform({3, 8});
  EXPECT_FALSE(array_equal(g.compile()(x), other.compile()(x)));
  io::Checkpoint c = io::load_state(path, other);
  EXPECT_TRUE(same_bytes(g.compile()(x), other.compile()(x)));
  EXPECT_EQ(c.metadata, meta);
  ASSERT_EQ(c.extra.size(), 3u);
  for (const auto& [k, t] : extra) EXPECT_TRUE(same_bytes(c.extra.at(k), t)) << k;

  // a state file holds no architecture
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { io::load_model(path); }), {path, "no architecture", "load_state"}));
  // a model file with extras: load_model returns them, load_state reads its weights too
  const std::string mpath = d / "model.safetensors";
  io::save_model(mpath, g, extra, meta);
  io::Checkpoint rest;
  Graph back = io::load_model(mpath, &rest);
  EXPECT_EQ(rest.metadata, meta);
  EXPECT_EQ(rest.extra.size(), 3u);
  EXPECT_TRUE(same_bytes(back.compile()(x), g.compile()(x)));
  Graph third = mlp(13);
  io::load_state(mpath, third);
  EXPECT_TRUE(same_bytes(third.compile()(x), g.compile()(x)));

  // reserved keys and clashing names are refused before the file is touched
  const std::string before = read_file(path);
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { io::save_state(path, g, {}, {{"loom.graph", "x"}}); }),
                           {"'loom.graph' is reserved"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { io::save_state(path, g, {{"l1/bias", zeros({16})}}); }),
                           {"extra tensor 'l1/bias'", "parameter or buffer"}));
  EXPECT_EQ(read_file(path), before);
}

TEST(IoModel, LoadingChecksNamesShapesAndDTypes) {
  TempDir d;
  const std::string path = d / "w.safetensors";
  io::save_state(path, mlp(20));
  {  // another width: the first mismatch is named with both shapes; nothing is loaded
    Graph wide = mlp(21, 24);
    const Tensor before = io::graph_state(wide).at("out/bias").copy();  // (8) in both graphs
    EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { io::load_state(path, wide); }),
                             {path, "'l1/weights'", "(8, 16)", "(8, 24)"}));
    EXPECT_TRUE(array_equal(io::graph_state(wide).at("out/bias"), before));
  }
  EXPECT_TRUE(contains_all(error_message<DTypeError>([&] { io::load_state(path, mlp(22, 16, Float64)); }),
                           {path, "float32", "float64"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { io::load_state(path, mlp(23, 16, Float32, true)); }),
                           {path, "lacks", "'l3/bias'", "'l3/weights'"}));
  io::save_state(path, mlp(24, 16, Float32, true));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { io::load_state(path, mlp(25)); }),
                           {path, "'l3/bias'", "which the graph does not have"}));
  // a shared tensor given under two of its names
  io::TensorMap twice = io::graph_state(mlp(26));
  twice["l2b/weights"] = twice.at("l2/weights");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { io::load_graph_state(mlp(27), twice, "mine"); }),
                           {"mine", "'l2/weights'", "'l2b/weights'", "same shared tensor"}));
  // ... but any one of them will do
  twice.erase("l2/weights");
  io::load_graph_state(mlp(28), twice);
  // a corrupt model file is an IOError naming it
  write_file_atomic(path, "not a model");
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { io::load_model(path); }), {path}));
  // a bad architecture is a ValueError naming the file
  io::save_safetensors(path, {}, {{"loom.graph", "{\"format\": \"other\"}"}});
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { io::load_model(path); }), {path, "not a Loom graph"}));
}

TEST(IoModel, FailedSavesLeaveThePreviousModel) {
  TempDir d;
  const std::string path = d / "m.safetensors";
  Graph g = mlp(30);
  io::save_model(path, g);
  const std::string before = read_file(path);
  // a Lambda layer cannot be written: refused before the file is touched
  nn::Input x(8, Float32, "x");
  nn::Lambda lam({x}, [](const std::vector<Tensor>& t) { return t[0] * 2.0; }, Shape{-1, 8}, Float32, "lam");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { io::save_model(path, Graph::build({lam}, {x})); }), {"Lambda"}));
  EXPECT_EQ(read_file(path), before);
  // the write fails (the target is a non-empty directory): the directory and the old file stay
  fs::create_directories(d.dir / "dir" / "x");
  EXPECT_THROW(io::save_model(d / "dir", g), IOError);
  EXPECT_TRUE(fs::is_directory(d.dir / "dir" / "x"));
  EXPECT_EQ(read_file(path), before);
  size_t files = 0;
  for (auto& e : fs::directory_iterator(d.dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
  Graph back = io::load_model(path);
  EXPECT_EQ(back.nodes().size(), g.nodes().size());
}
