#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/file.h>
#include <loom/core/grad_mode.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/data/dataset.h>
#include <loom/data/loader.h>
#include <loom/graph/graph.h>
#include <loom/io/model_file.h>
#include <loom/io/safetensors.h>
#include <loom/nn/activation.h>
#include <loom/nn/dropout.h>
#include <loom/nn/input.h>
#include <loom/nn/lambda.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/nn/mode.h>
#include <loom/nn/normalization.h>
#include <loom/nn/state.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/losses.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/train/callbacks.h>
#include <loom/train/history.h>
#include <loom/train/metrics.h>
#include <loom/train/model.h>
#include <loom/train/optimizers.h>
#include <loom/train/train_step.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <functional>

#include "unit/common/core_test_util.h"
#include "unit/train/train_test_util.h"

using namespace loom;
namespace fs = std::filesystem;

using loom_test::blobs;

namespace {

struct Net {
  nn::Input x{4, Float32, "x"};
  nn::Linear h{x, 16, {}, "h"};
  nn::Activation a{h, nn::relu, "a"};
  nn::Dropout d{a, 0.1, 3, "d"};
  nn::Linear out{d, 3, {}, "out"};
  Graph graph = Graph::build({out}, {x});
};

train::Model make_model(const Net& net) {
  return train::Model(net.graph, [](const Tensor& p, const Tensor& t) { return cross_entropy(p, t); },
                      std::make_shared<train::Adam>(net.graph.parameters(), train::AdamOptions{.lr = 0.01}),
                      {std::make_shared<train::Accuracy>()});
}

std::vector<Tensor> weights(const Net& net) {
  std::vector<Tensor> w;
  for (const auto& l : net.graph.nodes())
    for (const Tensor& p : l.parameters()) w.push_back(p.copy());
  return w;
}


}  // namespace

TEST(Model, FitLearnsAndReportsHistory) {
  manual_seed(1);
  Net net;
  train::Model model = make_model(net);
  data::DataLoader train_loader(blobs(600, 1), {.batch_size = 32, .shuffle = true, .seed = 5});
  data::DataLoader val_loader(blobs(200, 2), {.batch_size = 100});
  train::History h = model.fit(train_loader, {.epochs = 4, .validation = &val_loader, .progress = false});
  ASSERT_EQ(h["loss"].size(), 4u);
  EXPECT_LT(h["loss"].back(), h["loss"].front());
  EXPECT_GT(h["val_accuracy"].back(), 0.9);
  EXPECT_EQ(h["lr"].back(), 0.01);
  train::Logs ev = model.evaluate(val_loader);
  EXPECT_NEAR(ev["accuracy"], h["val_accuracy"].back(), 1e-12);
  Tensor pred = model.predict(blobs(50, 3)->tensors()[0], 16);
  EXPECT_EQ(pred.shape(), (Shape{50, 3}));
}

TEST(Model, SameSeedGivesBitwiseIdenticalWeights) {
  std::vector<Tensor> runs[2];
  for (auto& w : runs) {
    manual_seed(7);
    Net net;
    train::Model model = make_model(net);
    data::DataLoader loader(blobs(300, 1), {.batch_size = 32, .shuffle = true, .seed = 9, .n_jobs = 1});
    model.fit(loader, {.epochs = 2, .progress = false});
    w = weights(net);
  }
  for (size_t i = 0; i < runs[0].size(); ++i) EXPECT_TRUE(array_equal(runs[0][i], runs[1][i])) << i;
}

TEST(Model, ResumingFromACheckpointEqualsNotStopping) {
  loom_test::TempDir dir;
  const std::string ckpt = dir / "last.safetensors";
  std::vector<Tensor> straight, resumed;
  {
    manual_seed(11);
    Net net;
    train::Model model = make_model(net);
    data::DataLoader loader(blobs(320, 4), {.batch_size = 32, .shuffle = true, .seed = 3});
    model.fit(loader, {.epochs = 3, .progress = false});
    straight = weights(net);
  }
  {
    // stop in the middle of epoch 2 and checkpoint there
    manual_seed(11);
    Net net;
    train::Model model = make_model(net);
    data::DataLoader loader(blobs(320, 4), {.batch_size = 32, .shuffle = true, .seed = 3});
    auto stopper = std::make_shared<train::LambdaCallback>();
    stopper->batch_end = [&](train::Model& m, int64_t step, const train::Logs&) {
      if (m.epochs_done() == 1 && step == 4) m.stop_training();
    };
    model.fit(loader, {.epochs = 3, .callbacks = {stopper}, .progress = false});
    EXPECT_EQ(model.epochs_done(), 1);
    model.save_checkpoint(ckpt, &loader);
    manual_seed(999);  // disturb the global state: the checkpoint must restore it
  }
  {
    Net net;  // fresh weights, a fresh optimizer and loader
    train::Model model = make_model(net);
    data::DataLoader loader(blobs(320, 4), {.batch_size = 32, .shuffle = true, .seed = 3});
    model.load_checkpoint(ckpt, &loader);
    EXPECT_EQ(loader.position(), (data::LoaderPosition{1, 4}));
    model.fit(loader, {.total_epochs = 3, .progress = false});  // to 3 in all: the unfinished epoch 1, then 2
    resumed = weights(net);
  }
  ASSERT_EQ(straight.size(), resumed.size());
  for (size_t i = 0; i < straight.size(); ++i) EXPECT_TRUE(array_equal(straight[i], resumed[i])) << i;
}

TEST(Model, CallbacksStopLogAndCheckpoint) {
  manual_seed(2);
  loom_test::TempDir tmp;
  const fs::path dir = tmp.dir;
  Net net;
  train::Model model = make_model(net);
  data::DataLoader train_loader(blobs(200, 1), {.batch_size = 50});
  data::DataLoader val_loader(blobs(100, 2), {.batch_size = 100});
  // the monitored value never improves after the first epoch: stop after patience epochs
  auto early = std::make_shared<train::EarlyStopping>("val_loss", 2, 1e9);
  auto csv = std::make_shared<train::CSVLogger>((dir / "log.csv").string());
  auto jsonl = std::make_shared<train::JSONLinesLogger>((dir / "log.jsonl").string());
  auto ckpt = std::make_shared<train::ModelCheckpoint>((dir / "best.safetensors").string(), (dir / "last.safetensors").string());
  std::vector<std::string> events;
  auto lambda = std::make_shared<train::LambdaCallback>();
  lambda->train_begin = [&](train::Model&) { events.push_back("begin"); };
  lambda->epoch_end = [&](train::Model&, int64_t e, const train::Logs&) { events.push_back("epoch" + std::to_string(e)); };
  lambda->train_end = [&](train::Model&, const train::History&) { events.push_back("end"); };
  model.fit(train_loader, {.epochs = 10, .validation = &val_loader, .callbacks = {early, csv, jsonl, ckpt, lambda}, .progress = false});
  EXPECT_EQ(early->stopped_epoch(), 2);
  EXPECT_EQ(model.epochs_done(), 3);
  EXPECT_EQ(events, (std::vector<std::string>{"begin", "epoch0", "epoch1", "epoch2", "end"}));
  const std::string log = read_file((dir / "log.csv").string());
  EXPECT_EQ(log.rfind("epoch,accuracy,loss,lr,val_accuracy,val_loss\n", 0), 0u) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 4);
  const std::string jl = read_file((dir / "log.jsonl").string());
  EXPECT_EQ(std::count(jl.begin(), jl.end(), '\n'), 3);
  EXPECT_NE(jl.find("\"val_loss\""), std::string::npos);
  // the best model reloads on its own and predicts like the model did at its best epoch
  Graph best = io::load_model((dir / "best.safetensors").string());
  EXPECT_EQ(best.nodes().size(), net.graph.nodes().size());
  EXPECT_TRUE(fs::exists(dir / "last.safetensors"));
}

TEST(Model, TerminateOnNaNAndTensorXStyleGraphs) {
  manual_seed(3);
  Net net;
  // TensorX style: the training graph ends in the loss and shares state with inference
  nn::Input target(Shape{-1}, Int64, "target");
  nn::Lambda loss({net.out, target}, [](const std::vector<Tensor>& t) { return cross_entropy(t[0], t[1]); }, Shape{});
  Graph training = Graph::build({loss}, {net.x, target});
  std::vector<Tensor> params;
  for (const auto& l : net.graph.nodes())
    for (const Tensor& p : l.parameters()) params.push_back(p);
  auto opt = std::make_shared<train::SGD>(params, train::SGDOptions{.lr = 0.1});
  train::Model model = train::Model::from_graphs(net.graph, training, std::nullopt, opt, {std::make_shared<train::Accuracy>()});
  data::DataLoader loader(blobs(300, 1), {.batch_size = 30});
  train::History h = model.fit(loader, {.epochs = 3, .progress = false});
  EXPECT_LT(h["loss"].back(), h["loss"].front());
  EXPECT_GT(h["accuracy"].back(), 0.8);

  opt->set_lr(1e30);  // blows up
  auto nan = std::make_shared<train::TerminateOnNaN>();
  model.fit(loader, {.epochs = 10, .callbacks = {nan}, .progress = false});
  EXPECT_TRUE(nan->triggered());
  EXPECT_LT(model.epochs_done(), 10);
}

TEST(Model, CallbacksChangeParamHyperparameters) {
  // a Param drives the dropout probability; a callback raises it at the start of epoch 1
  manual_seed(4);
  nn::Input x(4, Float32, "x");
  nn::Param p(0.0, "p");
  nn::Dropout d(nn::Linear(x, 8), p, 1);
  nn::Linear out(d, 3);
  Graph g = Graph::build({out}, {x});
  std::vector<Tensor> params;
  for (const auto& l : g.nodes())
    for (const Tensor& t : l.parameters()) params.push_back(t);
  train::Model model(g, [](const Tensor& a, const Tensor& b) { return cross_entropy(a, b); },
                     std::make_shared<train::SGD>(params, train::SGDOptions{.lr = 0.01}));
  std::vector<double> seen;
  auto cb = std::make_shared<train::LambdaCallback>();
  cb->epoch_begin = [&](train::Model&, int64_t epoch) { p.set_value(epoch == 0 ? 0.0 : 0.5); };
  cb->batch_end = [&](train::Model&, int64_t, const train::Logs&) {
    nn::ModeScope train(nn::Mode::Train);
    x.set_value(ones({1, 4}));
    seen.push_back(mean(astype(d() == 0.0, Float32)).item<double>());  // the share dropped right now
  };
  data::DataLoader loader(blobs(64, 1), {.batch_size = 64});
  model.fit(loader, {.epochs = 2, .callbacks = {cb}, .progress = false});
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], 0.0);
  EXPECT_GT(seen[1], 0.0);
}

// ---------------------------------------------------------------- checkpoints: all or nothing

namespace {

// Copies checkpoint `from` to `to` after `edit` changed its tensors and training state.
void rewrite_checkpoint(const std::string& from, const std::string& to,
                        const std::function<void(io::TensorMap&, nlohmann::json&)>& edit) {
  io::Metadata meta;
  io::TensorMap tensors = io::load_safetensors(from, &meta);
  nlohmann::json train = nlohmann::json::parse(meta.at("loom.train"));
  edit(tensors, train);
  meta["loom.train"] = train.dump();
  io::save_safetensors(to, tensors, meta);
}

}  // namespace

TEST(ModelCheckpoint, AFailingLoadChangesNothing) {
  loom_test::TempDir dir;
  const std::string ckpt = dir / "ckpt.safetensors";
  {
    manual_seed(21);
    Net net;
    train::Model model = make_model(net);
    data::DataLoader loader(blobs(128, 4), {.batch_size = 32, .shuffle = true, .seed = 3});
    model.fit(loader, {.epochs = 2, .progress = false});
    model.save_checkpoint(ckpt, &loader);
  }
  struct Case {
    const char* what;
    std::function<void(io::TensorMap&, nlohmann::json&)> edit;
  };
  const std::vector<Case> cases = {
      {"negative epochs_done", [](io::TensorMap&, nlohmann::json& t) { t["epochs_done"] = -1; }},
      {"float epochs_done", [](io::TensorMap&, nlohmann::json& t) { t["epochs_done"] = 1e300; }},
      {"loader position past the end", [](io::TensorMap&, nlohmann::json& t) { t["loader"] = {0, 9999}; }},
      {"negative loader epoch", [](io::TensorMap&, nlohmann::json& t) { t["loader"] = {-1, 0}; }},
      {"loader layout of 0 shards", [](io::TensorMap&, nlohmann::json& t) { t["loader_layout"]["shards"] = 0; }},
      {"loader layout without batches", [](io::TensorMap&, nlohmann::json& t) { t["loader_layout"].erase("batches"); }},
      {"loader layout not an object", [](io::TensorMap&, nlohmann::json& t) { t["loader_layout"] = 3; }},
      {"loader layout whose global batch overflows",
       [](io::TensorMap&, nlohmann::json& t) { t["loader_layout"] = {{"batch_size", INT64_MAX / 2}, {"shards", 4}, {"batches", 4}}; }},
      {"loader position past the layout's batches", [](io::TensorMap&, nlohmann::json& t) { t["loader"] = {0, 5}; }},
      {"mid-epoch position without a batch boundary here",
       [](io::TensorMap&, nlohmann::json& t) {
         t["loader"] = {1, 1};
         t["loader_layout"]["batch_size"] = 20;
       }},
      {"history of strings", [](io::TensorMap&, nlohmann::json& t) { t["history"]["loss"] = {"x"}; }},
      {"rng not integers", [](io::TensorMap&, nlohmann::json& t) { t["rng"] = {1.5, 2}; }},
      {"counter not an integer", [](io::TensorMap&, nlohmann::json& t) { t["counters"]["steps"] = "8"; }},
      {"negative step counter", [](io::TensorMap&, nlohmann::json& t) { t["counters"]["steps"] = -8; }},
      {"missing optimizer", [](io::TensorMap&, nlohmann::json& t) { t.erase("optimizer"); }},
      {"training state not an object", [](io::TensorMap&, nlohmann::json& t) { t = nlohmann::json::array(); }},
      {"optimizer tensor of the wrong shape",
       [](io::TensorMap& m, nlohmann::json&) {
         for (auto& [k, v] : m)
           if (k.rfind("optimizer/", 0) == 0 && v.ndim() == 2) {
             v = zeros({v.dim(0) + 1, v.dim(1)});
             break;
           }
       }},
      {"optimizer tensor for a parameter that does not exist",
       [](io::TensorMap& m, nlohmann::json&) { m["optimizer/99999999999999999999/m"] = zeros({1}); }},
      {"weights of the wrong shape", [](io::TensorMap& m, nlohmann::json&) { m["h/weights"] = zeros({4, 17}); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string bad = dir / "bad.safetensors";
    rewrite_checkpoint(ckpt, bad, c.edit);
    manual_seed(5);
    Net net;
    train::Model model = make_model(net);
    data::DataLoader loader(blobs(128, 4), {.batch_size = 32, .shuffle = true, .seed = 3});
    loader.set_position({0, 2});
    const std::vector<Tensor> before = weights(net);
    const uint64_t counter = default_generator().counter();
    EXPECT_THROW(model.load_checkpoint(bad, &loader), Error);
    const std::vector<Tensor> after = weights(net);
    for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(array_equal(before[i], after[i])) << i;
    EXPECT_EQ(model.epochs_done(), 0);
    EXPECT_TRUE(model.history().series.empty());
    EXPECT_EQ(model.optimizer().steps(), 0);
    EXPECT_EQ(loader.position(), (data::LoaderPosition{0, 2}));
    EXPECT_EQ(default_generator().counter(), counter);
  }
  // a checkpoint of another optimizer: nothing changes either
  manual_seed(5);
  Net net;
  std::vector<Tensor> params;
  for (const auto& l : net.graph.nodes())
    for (const Tensor& p : l.parameters()) params.push_back(p);
  train::Model sgd(net.graph, [](const Tensor& p, const Tensor& t) { return cross_entropy(p, t); },
                   std::make_shared<train::SGD>(params, train::SGDOptions{.lr = 0.1}));
  const std::vector<Tensor> before = weights(net);
  EXPECT_TRUE(loom_test::contains_all(loom_test::error_message<ValueError>([&] { sgd.load_checkpoint(ckpt); }), {"Adam", "SGD"}));
  const std::vector<Tensor> after = weights(net);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(array_equal(before[i], after[i])) << i;
  EXPECT_EQ(sgd.epochs_done(), 0);
  // and the unedited checkpoint loads
  Net fresh;
  train::Model model = make_model(fresh);
  model.load_checkpoint(ckpt);
  EXPECT_EQ(model.epochs_done(), 2);
}

// A run that saw a NaN loss saved "null" into its history: the checkpoint could not be loaded.
// The loader position is saved with its layout (batch size, shards) and resumes at the same
// place of the epoch's order in another layout (docs/distributed.md): batch b of a global batch
// G covers positions [b G, (b + 1) G).
TEST(ModelCheckpoint, LoaderPositionInAnotherLayout) {
  loom_test::TempDir dir;
  const std::string ckpt = dir / "ckpt.safetensors";
  Net net;
  train::Model model = make_model(net);
  auto ds = blobs(128, 4);
  data::DataLoader two(ds, {.batch_size = 16, .shard = {.index = 1, .count = 2}});  // a global batch of 32
  two.set_position({1, 1});                                                          // position 32 of epoch 1
  model.save_checkpoint(ckpt, &two);
  auto load = [&](data::LoaderOptions o) {
    data::DataLoader l(ds, o);
    model.load_checkpoint(ckpt, &l);
    return l.position();
  };
  EXPECT_EQ(load({.batch_size = 8, .shard = {.index = 3, .count = 4}}), (data::LoaderPosition{1, 1}));
  EXPECT_EQ(load({.batch_size = 16}), (data::LoaderPosition{1, 2}));
  EXPECT_EQ(load({.batch_size = 4, .shard = {.index = 0, .count = 2}}), (data::LoaderPosition{1, 4}));
  EXPECT_TRUE(loom_test::contains_all(
      loom_test::error_message<ValueError>([&] { load({.batch_size = 5, .shard = {.index = 0, .count = 3}}); }),
      {"2 shards of batch 16 (a global batch of 32)", "this loader of 3 shards of batch 5 (a global batch of 15)",
       "position 32", "valid: a global batch that divides 32"}));
  // the end of an epoch is the end in every layout
  two.set_position({1, two.size()});
  model.save_checkpoint(ckpt, &two);
  EXPECT_EQ(load({.batch_size = 5, .shard = {.index = 0, .count = 3}}), (data::LoaderPosition{1, 9}));
}

TEST(ModelCheckpoint, NonFiniteLossesAndConstantsRoundTrip) {
  loom_test::TempDir dir;
  const std::string ckpt = dir / "nan.safetensors";
  manual_seed(3);
  Net net;
  std::vector<Tensor> params;
  for (const auto& l : net.graph.nodes())
    for (const Tensor& p : l.parameters()) params.push_back(p);
  auto nan_loss = [](const Tensor& p, const Tensor& t) { return cross_entropy(p, t) * scalar_tensor(std::nan(""), Float32); };
  train::Model model(net.graph, nan_loss, std::make_shared<train::Adam>(params, train::AdamOptions{.lr = 0.01}));
  data::DataLoader loader(blobs(64, 4), {.batch_size = 32});
  model.fit(loader, {.epochs = 1, .progress = false});
  ASSERT_TRUE(std::isnan(model.history().series.at("loss").at(0)));
  model.save_checkpoint(ckpt, &loader);
  Net net2;
  std::vector<Tensor> params2;
  for (const auto& l : net2.graph.nodes())
    for (const Tensor& p : l.parameters()) params2.push_back(p);
  train::Model back(net2.graph, nan_loss, std::make_shared<train::Adam>(params2, train::AdamOptions{.lr = 0.01}));
  back.load_checkpoint(ckpt);
  EXPECT_TRUE(std::isnan(back.history().series.at("loss").at(0)));
  EXPECT_EQ(back.epochs_done(), 1);
  // the JSON-lines log writes the same spelling (it wrote null)
  auto jsonl = std::make_shared<train::JSONLinesLogger>(dir / "log.jsonl");
  jsonl->on_epoch_end(model, 0, {{"loss", std::nan("")}, {"x", -INFINITY}});
  EXPECT_NE(loom::read_file(dir / "log.jsonl").find("\"loss\":\"NaN\""), std::string::npos);
  EXPECT_NE(loom::read_file(dir / "log.jsonl").find("\"x\":\"-Infinity\""), std::string::npos);
}

TEST(Model, SaveAndLoadInOneCallEach) {
  manual_seed(4);
  Net net;
  train::Model model = make_model(net);
  data::DataLoader train_loader(blobs(200, 1), {.batch_size = 32, .shuffle = true, .seed = 5});
  model.fit(train_loader, {.epochs = 1, .progress = false});
  loom_test::TempDir tmp;
  const std::string path = (tmp.dir / "model.safetensors").string();
  model.save(path);
  auto loss = [](const Tensor& p, const Tensor& t) { return cross_entropy(p, t); };
  train::Model back = train::Model::load(path, loss, [](const std::vector<Tensor>& params) {
    return std::make_shared<train::SGD>(params, train::SGDOptions{.lr = 0.1});
  });
  // the same weights, so the same predictions; the new optimizer trains the loaded graph
  const Tensor x = blobs(20, 3)->tensors()[0];
  EXPECT_TRUE(loom_test::same_bytes(model.predict(x), back.predict(x)));
  ASSERT_EQ(back.optimizer().params().size(), 4u);
  EXPECT_EQ(back.optimizer().params()[0].impl(), back.graph().layer("h").state().param("weights").impl());
  back.fit(train_loader, {.epochs = 1, .progress = false});
  EXPECT_FALSE(loom_test::same_bytes(model.predict(x), back.predict(x)));
  // a missing file and a missing optimizer factory are errors
  auto sgd = [](const std::vector<Tensor>& params) { return std::make_shared<train::SGD>(params); };
  EXPECT_THROW(train::Model::load((tmp.dir / "missing.safetensors").string(), loss, sgd), IOError);
  EXPECT_TRUE(loom_test::contains_all(loom_test::error_message<ValueError>([&] { train::Model::load(path, loss, {}); }),
                                      {"Model::load", "optimizer factory"}));
}

// Issue 36, silent trap 3: a second fit(loader, {.epochs = 3}) trained nothing (epochs were the
// model's total). `epochs` are now epochs more, as in Keras; total_epochs resumes to a total.
TEST(Model, EpochsAreEpochsMoreAndTotalEpochsResumesToATotal) {
  manual_seed(3);
  Net net;
  train::Model model = make_model(net);
  data::DataLoader loader(blobs(96, 1), {.batch_size = 32, .shuffle = true, .seed = 5});
  std::vector<int64_t> seen;
  auto cb = std::make_shared<train::LambdaCallback>();
  cb->epoch_begin = [&](train::Model&, int64_t e) { seen.push_back(e); };
  model.fit(loader, {.epochs = 2, .callbacks = {cb}, .progress = false});
  const std::vector<Tensor> after_two = weights(net);
  train::History h = model.fit(loader, {.epochs = 3, .callbacks = {cb}, .progress = false});
  EXPECT_EQ(model.epochs_done(), 5);
  EXPECT_EQ(model.optimizer().steps(), 5 * 3);
  EXPECT_EQ(h["loss"].size(), 5u);  // the model's whole history, numbered on
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_FALSE(array_equal(weights(net)[0], after_two[0]));
  // to a total: one more epoch up to 6, then none (already there)
  model.fit(loader, {.total_epochs = 6, .callbacks = {cb}, .progress = false});
  EXPECT_EQ(model.epochs_done(), 6);
  model.fit(loader, {.total_epochs = 4, .progress = false});
  EXPECT_EQ(model.epochs_done(), 6);
  EXPECT_EQ(seen.back(), 5);
  model.fit(loader, {.epochs = 0, .progress = false});
  EXPECT_EQ(model.epochs_done(), 6);
  EXPECT_TRUE(loom_test::contains_all(loom_test::error_message<ValueError>([&] { model.fit(loader, {.epochs = -1, .progress = false}); }),
                                      {"epochs", ">= 0", "-1"}));
}

// Issue 36, silent trap 2: Eval is the default mode, so a hand-written loop that forgets
// nn::ModeScope trains with dropout off and batch norm frozen. Such a forward pass (Eval mode,
// gradients recorded, through Dropout or BatchNorm) is said once per layer on stderr, naming
// the layer and the fix; fit, evaluate, predict and NoGrad passes say nothing.
TEST(Model, AHandLoopInEvalModeThroughDropoutOrBatchNormWarnsOncePerLayer) {
  manual_seed(8);
  nn::Input x(4, Float32, "x");
  nn::Linear h(x, 8, {}, "first_hour_h");
  nn::BatchNorm bn(h, {}, "first_hour_bn");
  nn::Dropout d(bn, 0.5, 1, "first_hour_dropout");
  nn::Linear out(d, 3, {}, "first_hour_out");
  Graph graph = Graph::build({out}, {x});
  train::Model model(graph, [](const Tensor& p, const Tensor& t) { return cross_entropy(p, t); },
                     std::make_shared<train::SGD>(graph.parameters()));
  data::DataLoader loader(blobs(64, 1), {.batch_size = 32});
  testing::internal::CaptureStderr();
  model.fit(loader, {.epochs = 1, .progress = false});
  model.evaluate(loader);
  model.predict(blobs(8, 2)->tensors()[0]);
  x.set_value(blobs(8, 2)->tensors()[0]);
  {
    NoGrad off;
    out();
  }
  {
    nn::ModeScope train(nn::Mode::Train);
    out();
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  // the forgotten scope
  testing::internal::CaptureStderr();
  Tensor loss = cross_entropy(out(), zeros({8}, Int64));
  loss.backward();
  out();  // once per layer
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(loom_test::contains_all(said, {"Dropout 'first_hour_dropout'", "BatchNorm 'first_hour_bn'", "Eval mode",
                                             "nn::ModeScope train(nn::Mode::Train)", "NoGrad"}))
      << said;
  EXPECT_EQ(said.find("first_hour_dropout"), said.rfind("first_hour_dropout")) << said;
}
