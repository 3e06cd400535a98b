// Loom's side of bench/asha_bench.sh: an ASHA search of the Fashion-MNIST MLP's learning rate and
// hidden width (examples/fashion_mlp.h, the model of examples/search_asha.cpp), random search,
// its trials tasks on a SQLite store run by one agent thread of this process. The peer
// (bench/ray_tune_peer.py) runs the same search with Ray Tune's ASHAScheduler on PyTorch.
//
//   asha_bench [--data DIR] [--train N] [--val N] [--epochs R] [--trials N] [--seed S]
//              [--threads T] [--store PATH]
//
// Prints one JSON line: the search's wall time (from the search's start to its end; data loading
// and the agent's start not counted), the part of it spent training and validating, the epochs its trials spent, trials, trials stopped early,
// the best validation accuracy and every trial's parameters, state, epochs and accuracy (the
// peer can replay the same points).
#include <loom/flow/agent.h>
#include <loom/flow/search.h>
#include <loom/flow/tasks.h>
#include <loom/loom.h>
#include <loom/store/store.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include <unistd.h>

#include "../examples/fashion_mlp.h"

using namespace loom;
using nlohmann::json;

int main(int argc, char** argv) {
  std::string dir = "/usr/share/datasets/fashion-mnist", store_path;
  int64_t n_train = 10000, n_val = 2000, epochs = 9, trials = 27, seed = 1, threads = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--data") dir = v;
    else if (a == "--train") n_train = std::stoll(v);
    else if (a == "--val") n_val = std::stoll(v);
    else if (a == "--epochs") epochs = std::stoll(v);
    else if (a == "--trials") trials = std::stoll(v);
    else if (a == "--seed") seed = std::stoll(v);
    else if (a == "--threads") threads = std::stoll(v);
    else if (a == "--store") store_path = v;
    else {
      std::fprintf(stderr, "unknown option %s (valid: --data, --train, --val, --epochs, --trials, --seed, --threads, --store)\n",
                   a.c_str());
      return 2;
    }
  }
  set_num_threads(static_cast<int>(threads));
  // Validation images from the end of the training split, apart from the training ones.
  const fashion_mlp::Data train = fashion_mlp::load(dir, "train", 0, n_train);
  const fashion_mlp::Data val = fashion_mlp::load(dir, "train", 60000 - n_val, n_val);

  const std::filesystem::path tmp = store_path.empty() ? std::filesystem::temp_directory_path() /
                                                             ("loom-asha-bench-" + std::to_string(::getpid()) + ".db")
                                                       : std::filesystem::path(store_path);
  std::filesystem::remove(tmp);
  std::filesystem::remove_all(tmp.string() + ".blobs");
  json out;
  double train_s = 0;  // inside the trials: training and validation (one trial at a time)
  {
    flow::Tasks tasks(store::Store::open(tmp.string()));
    flow::Agent agent(tasks, "asha-bench");
    agent.register_kind("mlp", [&](const std::string& hyper, flow::TaskContext& ctx) {
      const json h = json::parse(hyper);
      fashion_mlp::Mlp mlp(h["width"].get<int64_t>(), h["lr"].get<double>(), 7);
      double accuracy = 0;
      int64_t epoch = 1;
      for (; epoch <= h["epochs"].get<int64_t>(); ++epoch) {
        const auto e0 = std::chrono::steady_clock::now();
        mlp.epoch(train, static_cast<uint64_t>(epoch));
        accuracy = mlp.accuracy(val);
        train_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
        if (ctx.report(epoch, accuracy) == flow::Decision::Stop) break;
      }
      return json{{"accuracy", accuracy}}.dump();
    });
    std::thread agent_thread([&agent] { agent.run({.poll_ms = 5}); });

    flow::SearchSpace space;
    space.log_uniform("lr", 1e-4, 1e-1).integer("width", 16, 256);
    flow::RandomSampler random(static_cast<uint64_t>(seed));
    const auto t0 = std::chrono::steady_clock::now();
    const flow::SearchInfo s =
        flow::search(tasks, space, random,
                     {.name = "asha-bench", .kind = "mlp", .metric = "accuracy", .mode = flow::Mode::Maximize, .n_trials = trials,
                      .max_concurrent_trials = 1, .hyper_parameters = json{{"epochs", epochs}}.dump(),
                      .asha = flow::Asha{.min_resource = 1, .max_resource = epochs, .reduction_factor = 3}, .poll_ms = 5});
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    agent.stop();
    agent_thread.join();

    int64_t stopped = 0;
    json list = json::array();
    for (const flow::TrialInfo& t : s.trials) {
      stopped += t.state == flow::TrialState::Stopped;
      list.push_back({{"params", json::parse(t.params)},
                      {"state", flow::trial_state_name(t.state)},
                      {"epochs", t.steps},
                      {"accuracy", t.value ? json(*t.value) : json(nullptr)}});
    }
    const flow::TrialInfo* best = s.best_trial();
    out = {{"bench", "asha"},
           {"impl", "loom"},
           {"sampler", "random"},
           {"threads", threads},
           {"concurrency", 1},
           {"train", n_train},
           {"val", n_val},
           {"R", epochs},
           {"r", 1},
           {"eta", 3},
           {"wall_s", wall_s},
           {"train_s", train_s},
           {"epochs", s.total_steps()},
           {"trials", static_cast<int64_t>(s.trials.size())},
           {"stopped", stopped},
           {"best_accuracy", best ? json(*best->value) : json(nullptr)},
           {"best_params", best ? json::parse(best->params) : json(nullptr)},
           {"trial_list", list}};
  }
  if (store_path.empty()) {
    std::filesystem::remove(tmp);
    std::filesystem::remove_all(tmp.string() + ".blobs");
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
