// 5-fold cross-validation of the MLP on a Fashion-MNIST subset as a flow plan (docs/workflow.md,
// "Cross-validation"): data::StratifiedKFold splits the images, flow::submit_cross_validation
// submits one task per fold and an aggregate task depending on all of them; agent threads of
// this process run them (agents on other machines could share a PostgreSQL store instead), and
// the aggregate reads the folds' results from its claim.
//
//   cross_validation [--store PATH] [--data DIR] [--n N] [--epochs E] [--short]
//
// Prints each fold's accuracy and their mean ± standard deviation. Exits 1 unless the plan
// finished with a mean accuracy of at least 0.7; --short: 2,000 images, 3 epochs.
#include <loom/data/kfold.h>
#include <loom/flow/agent.h>
#include <loom/flow/cross_validation.h>
#include <loom/flow/plans.h>
#include <loom/loom.h>
#include <loom/store/store.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <string>

#include "fashion_mlp.h"

using namespace loom;
using nlohmann::json;

int main(int argc, char** argv) {
  std::string store_path = "cross_validation.db", dir = "/usr/share/datasets/fashion-mnist";
  int64_t n = 10000, epochs = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--short") {
      n = 2000, epochs = 3;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--store") store_path = v;
    else if (a == "--data") dir = v;
    else if (a == "--n") n = std::stoll(v);
    else if (a == "--epochs") epochs = std::stoll(v);
    else {
      std::fprintf(stderr, "unknown option %s (valid: --store, --data, --n, --epochs, --short)\n", a.c_str());
      return 2;
    }
  }
  const fashion_mlp::Data all = fashion_mlp::load(dir, "train", 0, n);
  std::printf("Fashion-MNIST: %lld images, 5 stratified folds, %lld epochs, %d threads\n", static_cast<long long>(n),
              static_cast<long long>(epochs), get_num_threads());

  std::filesystem::remove(store_path);
  std::filesystem::remove_all(store_path + ".blobs");
  flow::Tasks tasks(store::Store::open(store_path));
  flow::Plans plans(tasks);
  const int64_t plan = flow::submit_cross_validation(
      plans, {.name = "5-fold MLP", .fold_kind = "mlp-fold", .aggregate_kind = "cv-summary", .n_splits = 5,
              .hyper_parameters = json{{"lr", 1e-3}, {"width", 128}, {"epochs", epochs}, {"seed", 0}}.dump()});

  flow::Agent agent(tasks, "cv-agent");
  agent.register_kind("mlp-fold", [&all](const std::string& hyper, flow::TaskContext&) {
    const json h = json::parse(hyper);
    // Every fold task computes the same split (a seed) and takes its own fold of it.
    const std::vector<int64_t> y = all.y.to_vector<int64_t>();
    const data::Fold fold =
        data::StratifiedKFold(h["n_splits"].get<int64_t>(), true, h["seed"].get<uint64_t>()).split(y)[h["fold"].get<size_t>()];
    const auto rows = [&all](const std::vector<int64_t>& idx) {
      const Tensor i = from_vector(idx, {static_cast<int64_t>(idx.size())});
      return fashion_mlp::Data{take(all.x, i, 0), take(all.y, i, 0)};
    };
    const fashion_mlp::Data train = rows(fold.train), test = rows(fold.test);
    fashion_mlp::Mlp mlp(h["width"].get<int64_t>(), h["lr"].get<double>(), 7);
    for (int64_t e = 1; e <= h["epochs"].get<int64_t>(); ++e) mlp.epoch(train, static_cast<uint64_t>(e));
    const double accuracy = mlp.accuracy(test);
    std::printf("  fold %lld: trained on %zu, accuracy %.4f on %zu\n", static_cast<long long>(h["fold"].get<int64_t>()),
                fold.train.size(), accuracy, fold.test.size());
    return json{{"accuracy", accuracy}}.dump();
  });
  agent.register_kind("cv-summary", [](const std::string&, flow::TaskContext& ctx) {
    return flow::summarize_folds(ctx.claim().dependencies, "accuracy").to_json();
  });
  agent.run({.poll_ms = 20, .stop_when_idle = true});

  const flow::PlanInfo p = plans.get(plan);
  const flow::TaskInfo summary = tasks.get(p.task_id("aggregate"));
  if (p.status != flow::Status::Finished) {
    std::printf("plan %lld: %s (%s)\nFAILED\n", static_cast<long long>(plan), flow::status_name(p.status), summary.error.c_str());
    return 1;
  }
  const json r = json::parse(summary.result);
  std::printf("5-fold accuracy %.4f ± %.4f (folds %s)\n", r["mean"].get<double>(), r["std"].get<double>(), r["folds"].dump().c_str());
  const bool ok = r["mean"].get<double>() >= 0.7;
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
