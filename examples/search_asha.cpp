// Hyper-parameter search of the MLP's learning rate and hidden width on Fashion-MNIST, as flow
// tasks on a store (docs/workflow.md, "Search"): first a 3 x 3 grid, each trial trained for the
// whole budget of R epochs; then TPE and random search, each with ASHA stopping poor trials
// early (rungs at 1, 3, 9, ... epochs, reduction factor 3) and a step budget of the grid's
// epochs. Every trial reports its validation accuracy after each epoch; an agent thread of this
// process runs the trials (agents on other machines could share a PostgreSQL store instead).
//
//   search_asha [--store PATH] [--data DIR] [--train N] [--val N] [--epochs R] [--short]
//
// Prints each search's best trial and the epochs it spent. Exits 1 unless every search ended,
// the ASHA searches spent no more epochs than the grid and stopped trials early; --short: 1,000
// training and 500 validation images, R = 3.
#include <loom/flow/agent.h>
#include <loom/flow/search.h>
#include <loom/flow/tasks.h>
#include <loom/loom.h>
#include <loom/store/store.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "fashion_mlp.h"

using namespace loom;
using nlohmann::json;

namespace {

struct Outcome {
  std::string name;
  flow::SearchInfo info;
};

void print(const Outcome& o, int64_t epochs) {
  int stopped = 0;
  for (const flow::TrialInfo& t : o.info.trials) stopped += t.state == flow::TrialState::Stopped;
  const flow::TrialInfo* best = o.info.best_trial();
  std::printf("%-13s %3zu trials (%2d stopped early), %3lld epochs: best validation accuracy %.4f at %s\n", o.name.c_str(),
              o.info.trials.size(), stopped, static_cast<long long>(o.info.total_steps()), best ? *best->value : 0.0,
              best ? best->params.c_str() : "-");
  (void)epochs;
}

}  // namespace

int main(int argc, char** argv) {
  std::string store_path = "search_asha.db", dir = "/usr/share/datasets/fashion-mnist";
  int64_t n_train = 10000, n_val = 2000, epochs = 27;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--short") {
      n_train = 1000, n_val = 500, epochs = 3;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--store") store_path = v;
    else if (a == "--data") dir = v;
    else if (a == "--train") n_train = std::stoll(v);
    else if (a == "--val") n_val = std::stoll(v);
    else if (a == "--epochs") epochs = std::stoll(v);
    else {
      std::fprintf(stderr, "unknown option %s (valid: --store, --data, --train, --val, --epochs, --short)\n", a.c_str());
      return 2;
    }
  }
  // Validation images from the end of the training split, apart from the training ones.
  const fashion_mlp::Data train = fashion_mlp::load(dir, "train", 0, n_train);
  const fashion_mlp::Data val = fashion_mlp::load(dir, "train", 60000 - n_val, n_val);
  std::printf("Fashion-MNIST: %lld training, %lld validation images; R = %lld epochs; %d threads\n", static_cast<long long>(n_train),
              static_cast<long long>(n_val), static_cast<long long>(epochs), get_num_threads());

  std::filesystem::remove(store_path);
  std::filesystem::remove_all(store_path + ".blobs");
  flow::Tasks tasks(store::Store::open(store_path));

  // The trial: trains epoch by epoch, reporting validation accuracy; stops when told.
  flow::Agent agent(tasks, "search-agent");
  agent.register_kind("mlp", [&](const std::string& hyper, flow::TaskContext& ctx) {
    const json h = json::parse(hyper);
    fashion_mlp::Mlp mlp(h["width"].get<int64_t>(), h["lr"].get<double>(), 7);
    double accuracy = 0;
    int64_t epoch = 1;
    for (; epoch <= h["epochs"].get<int64_t>(); ++epoch) {
      mlp.epoch(train, static_cast<uint64_t>(epoch));
      accuracy = mlp.accuracy(val);
      if (ctx.report(epoch, accuracy) == flow::Decision::Stop) break;
    }
    return json{{"accuracy", accuracy}, {"epochs", std::min(epoch, h["epochs"].get<int64_t>())}}.dump();
  });
  std::thread agent_thread([&agent] { agent.run({.poll_ms = 20}); });

  flow::SearchSpace space;
  space.log_uniform("lr", 1e-4, 1e-1).integer("width", 16, 256);
  const std::string fixed = json{{"epochs", epochs}}.dump();
  std::vector<Outcome> outcomes;

  flow::GridSampler grid(3);
  outcomes.push_back({"grid 3x3", flow::search(tasks, space, grid,
                                               {.name = "grid", .kind = "mlp", .metric = "accuracy", .mode = flow::Mode::Maximize,
                                                .n_trials = grid.size(space), .max_concurrent_trials = 1, .hyper_parameters = fixed,
                                                .poll_ms = 20})});
  const int64_t budget = outcomes[0].info.total_steps();
  const flow::Asha asha{.min_resource = 1, .max_resource = epochs, .reduction_factor = 3};
  flow::TPESampler tpe({.n_startup_trials = 8, .seed = 1});
  outcomes.push_back({"ASHA + TPE", flow::search(tasks, space, tpe,
                                                 {.name = "asha-tpe", .kind = "mlp", .metric = "accuracy", .mode = flow::Mode::Maximize,
                                                  .n_trials = 1000, .max_concurrent_trials = 1, .hyper_parameters = fixed,
                                                  .asha = asha, .step_budget = budget, .poll_ms = 20})});
  flow::RandomSampler random(1);
  outcomes.push_back({"ASHA + random", flow::search(tasks, space, random,
                                                    {.name = "asha-random", .kind = "mlp", .metric = "accuracy",
                                                     .mode = flow::Mode::Maximize, .n_trials = 1000, .max_concurrent_trials = 1,
                                                     .hyper_parameters = fixed, .asha = asha, .step_budget = budget, .poll_ms = 20})});
  agent.stop();
  agent_thread.join();

  bool ok = true;
  for (const Outcome& o : outcomes) {
    print(o, epochs);
    ok = ok && o.info.best_trial() != nullptr;
    for (const flow::TrialInfo& t : o.info.trials)
      ok = ok && (t.state == flow::TrialState::Completed || t.state == flow::TrialState::Stopped);
  }
  const double grid_best = *outcomes[0].info.best_trial()->value;
  for (size_t i = 1; i < outcomes.size(); ++i) {
    const flow::SearchInfo& s = outcomes[i].info;
    int stopped = 0;
    for (const flow::TrialInfo& t : s.trials) stopped += t.state == flow::TrialState::Stopped;
    ok = ok && s.total_steps() <= budget && stopped > 0;
    std::printf("%s within the grid's %lld epochs: %s the grid's best (%+.4f)\n", outcomes[i].name.c_str(),
                static_cast<long long>(budget), *s.best_trial()->value > grid_best ? "beats" : "does not beat",
                *s.best_trial()->value - grid_best);
  }
  std::printf("the searches' tasks: loom tasks list --store %s --kind mlp\n%s\n", store_path.c_str(), ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
