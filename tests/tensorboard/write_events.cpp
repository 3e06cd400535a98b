// Writes TensorBoard event files three ways (io::SummaryWriter directly, train::TensorBoardLogger
// during a fit, and a stored run for `loom runs export`) and, next to them, expected.json with
// every value they hold, for check_events.py to compare with what TensorBoard's reader reads.
#include <loom/core/tensor.h>
#include <loom/data/dataset.h>
#include <loom/data/loader.h>
#include <loom/graph/graph.h>
#include <loom/io/model_file.h>
#include <loom/io/tensorboard.h>
#include <loom/nn/activation.h>
#include <loom/nn/input.h>
#include <loom/nn/linear.h>
#include <loom/ops/creation.h>
#include <loom/ops/losses.h>
#include <loom/ops/random.h>
#include <loom/store/runs.h>
#include <loom/store/store.h>
#include <loom/train/metrics.h>
#include <loom/train/model.h>
#include <loom/train/optimizers.h>
#include <loom/train/tensorboard.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "unit/train/train_test_util.h"

using namespace loom;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: write_events OUT_DIR\n";
    return 2;
  }
  const fs::path out = argv[1];
  nlohmann::json expected;

  // 1. The writer on its own: a series, an extreme step, a NaN, histograms of a list and a tensor.
  {
    io::SummaryWriter w((out / "direct").string());
    for (int64_t s = 0; s < 10; ++s) w.add_scalar("loss", 1.0 / (1.0 + static_cast<double>(s)), s, 1000.0 + static_cast<double>(s));
    w.add_scalar("big_step", -3.25, int64_t{1} << 40);
    w.add_scalar("nan", std::nan(""), 3);
    std::vector<double> values;
    for (int i = 0; i < 1000; ++i) values.push_back(std::sin(0.1 * i) * 3.0);
    values.push_back(std::nan(""));  // skipped
    w.add_histogram("list", values, 0, 0, 20);
    Tensor t = from_vector<float>({-1.5f, 0.f, 0.f, 2.f, 7.25f, 7.25f}, {2, 3});
    w.add_histogram("tensor", t, 1);
    w.add_histogram("constant", std::vector<double>{4.0, 4.0, 4.0}, 2);
    expected["direct"] = {{"path", w.path()}};
  }

  // 2. A fit with validation, batch scalars every 2 batches and histograms every epoch.
  {
    manual_seed(5);
    nn::Input x{4, Float32, "x"};
    nn::Linear h{x, 8, {}, "h"};
    nn::Activation a{h, nn::relu, "a"};
    nn::Linear o{a, 3, {}, "out"};
    Graph g = Graph::build({o}, {x});
    train::Model model(g, [](const Tensor& p, const Tensor& t) { return cross_entropy(p, t); },
                       std::make_shared<train::Adam>(g.parameters(), train::AdamOptions{.lr = 0.01}),
                       {std::make_shared<train::Accuracy>()});
    data::DataLoader train(loom_test::blobs(120, 1), {.batch_size = 30});
    data::DataLoader val(loom_test::blobs(60, 2), {.batch_size = 60});
    auto tb = std::make_shared<train::TensorBoardLogger>((out / "fit").string(), 1, 2);
    nlohmann::json batches = nlohmann::json::array();
    auto record = std::make_shared<train::LambdaCallback>();
    record->batch_end = [&](train::Model&, int64_t, const train::Logs& logs) { batches.push_back(logs.at("loss")); };
    const train::History hist = model.fit(train, {.epochs = 3, .validation = &val, .callbacks = {tb, record}, .progress = false});
    expected["fit"]["history"] = hist.series;
    expected["fit"]["batch_loss"] = batches;  // every batch; the logger wrote every second one
    for (const auto& [name, tensor] : io::graph_state(g)) {  // the last epoch's histograms
      const auto v = tensor.astype(Float64).to_vector<double>();
      double lo = v[0], hi = v[0], sum = 0, sq = 0;
      for (double d : v) lo = std::min(lo, d), hi = std::max(hi, d), sum += d, sq += d * d;
      expected["fit"]["state"][name] = {{"min", lo}, {"max", hi}, {"num", v.size()}, {"sum", sum}, {"sum_squares", sq}};
    }
  }

  // 3. A stored run, for `loom runs export` (its name holds a slash: the folder must not).
  {
    store::Store s = store::Store::open((out / "runs.db").string());
    auto run = s.runs().start("tb", "a/../b", R"({"lr": 0.1})");
    for (int64_t e = 0; e < 4; ++e)
      s.runs().log_epoch(run.id, e, {{"loss", 2.0 - 0.25 * e}, {"val_loss", 2.5 - 0.2 * e}, {"lr", 0.1}});
    expected["store"] = {{"id", run.id}, {"started_ms", s.runs().get(run.id).started_ms}};
  }
  std::ofstream(out / "expected.json") << expected.dump(1);
  return 0;
}
