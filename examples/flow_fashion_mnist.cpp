// TensorLayer's workflow on one store (docs/workflow.md, "Examples"): a dispatcher imports
// Fashion-MNIST into the dataset store and submits a small hyper-parameter grid as "train"
// tasks; two agent processes claim and run them, each saving its model with its test accuracy
// and logging its run; the dispatcher waits for every task, prints a summary, and starts a
// fresh process that loads the best model by test accuracy — without this file's training
// code, from the store alone — and evaluates it again.
//
//   ./build/examples/flow_fashion_mnist dispatch [--store flow-example/flow.db] [--epochs 2]
//        [--limit-samples 0 (all)] [--agents 2] [--data /usr/share/datasets/fashion-mnist]
//   (the dispatcher starts the other roles itself:)
//   ./build/examples/flow_fashion_mnist agent --store PATH --name agent-1 [--max-tasks N]
//   ./build/examples/flow_fashion_mnist evaluate --store PATH [--grid TAG]
#include <loom/loom.h>
#include <loom/data/loader.h>
#include <loom/flow/agent.h>
#include <loom/flow/tasks.h>
#include <loom/store/datasets.h>
#include <loom/store/model_registry.h>
#include <loom/store/runs.h>
#include <loom/train/callbacks.h>
#include <loom/train/model.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "flow_example_util.h"

using namespace loom;
using flow_example::json_number;
using flow_example::int_option;
using flow_example::option;

namespace {

const char* const kTrainSet = "fashion-mnist-train";
const char* const kTestSet = "fashion-mnist-test";
const char* const kModel = "fashion-mlp";

// --- shared by training and evaluation: the model's input convention ---------------------

// The store holds the images as imported, uint8 (28, 28), and the labels as uint8. The model
// takes standardised float32 pixels (the training set's mean and deviation) and the loss
// int64 class ids: every reader of the datasets applies this.
data::Transform preprocess() {
  const data::Transform pixels = data::Normalize({0.2860 * 255}, {0.3530 * 255});
  const data::Transform labels([](data::Batch b, Generator&) {
    b[1] = b[1].astype(Int64);
    return b;
  }, "labels_to_int64");
  return data::Compose({pixels, labels});
}

// The fraction of a dataset's samples the graph classifies correctly.
double accuracy(const Graph& graph, const std::shared_ptr<store::DatasetView>& samples) {
  data::DataLoader loader(samples, {.batch_size = 500, .transform = preprocess()});
  Plan plan = graph.compile();
  NoGrad no_grad;
  int64_t correct = 0;
  for (const data::Batch& b : loader) correct += sum(argmax(plan(b[0]), 1) == b[1]).item<int64_t>();
  return static_cast<double>(correct) / static_cast<double>(samples->size());
}

// --- the agent: a "train" task -----------------------------------------------------------

// 784 -> hidden (ReLU) -> 10 logits.
Graph mlp(int64_t hidden) {
  nn::Input image(Shape{-1, 28, 28}, Float32, "image");
  nn::Flatten flat(image);
  nn::Linear h(flat, hidden);
  nn::Activation act(h, nn::relu);
  nn::Linear logits(act, 10);
  return Graph::build({logits}, {image});
}

// Runs one task of the grid: its hyper-parameters name the datasets' versions, the learning
// rate, the hidden width, the epochs and how many training samples to use.
std::string train(const store::Store& s, const std::string& agent, const std::string& hyper, flow::TaskContext& ctx) {
  const int64_t task = ctx.claim().task_id;
  const double lr = json_number(hyper, "lr", 1e-3);
  const auto hidden = static_cast<int64_t>(json_number(hyper, "hidden", 64));
  const int epochs = static_cast<int>(json_number(hyper, "epochs", 1));
  const auto limit = static_cast<int64_t>(json_number(hyper, "limit", -1));

  // The training samples: a query of the dataset store, read lazily (shard by shard) by the
  // loader's worker thread.
  auto train_set = s.datasets().query(kTrainSet, static_cast<int64_t>(json_number(hyper, "train_version", 1)),
                                      {.limit = limit > 0 ? limit : -1});
  auto test_set = s.datasets().query(kTestSet, static_cast<int64_t>(json_number(hyper, "test_version", 1)));
  data::DataLoader loader(train_set, {.batch_size = 64, .shuffle = true, .seed = static_cast<uint64_t>(task),
                                      .n_jobs = 1, .transform = preprocess()});

  manual_seed(static_cast<uint64_t>(task));  // the initial weights
  Graph graph = mlp(hidden);
  train::Model model(graph, [](const Tensor& logits, const Tensor& labels) { return cross_entropy(logits, labels); },
                     std::make_shared<train::Adam>(graph.parameters(), train::AdamOptions{.lr = lr}),
                     {std::make_shared<train::Accuracy>()});

  // The run (hyper-parameters, per-epoch loss and accuracy, checkpoint) goes to the store; and
  // between epochs the task gives up if it was cancelled, timed out or lost its claim.
  auto logger = std::make_shared<store::StoreLogger>(s, "flow-fashion-mnist", hyper, std::vector<std::string>{"flow-example"},
                                                     "task-" + std::to_string(task));
  auto stop = std::make_shared<train::LambdaCallback>();
  stop->epoch_end = [&ctx](train::Model& m, int64_t, const train::Logs&) {
    if (ctx.should_stop()) m.stop_training();
  };
  train::History history = model.fit(loader, {.epochs = epochs, .callbacks = {logger, stop}, .progress = false});
  if (ctx.should_stop()) throw Error("task " + std::to_string(task) + " stopped before it finished training");

  // The model goes to the store with its test accuracy, which the evaluator ranks by, tagged
  // with its task and grid. (Should the task be replayed — its agent died after saving but
  // before the result was recorded — the task's recorded result names the version that counts.)
  const double test_accuracy = accuracy(graph, test_set);
  const std::string grid_tag = "grid-" + std::to_string(static_cast<int64_t>(json_number(hyper, "grid", 0)));
  store::ModelInfo saved = s.models().save(kModel, graph, {{"test_accuracy", test_accuracy}}, hyper,
                                           {"task-" + std::to_string(task), grid_tag});
  std::printf("[%s] task %lld: lr %g hidden %lld, %zu epochs -> test accuracy %.4f, saved %s v%lld\n", agent.c_str(),
              static_cast<long long>(task), lr, static_cast<long long>(hidden), history["loss"].size(), test_accuracy, kModel,
              static_cast<long long>(saved.version));
  char result[256];
  std::snprintf(result, sizeof result, R"({"model": "%s", "version": %lld, "test_accuracy": %.17g, "run": %lld})", kModel,
                static_cast<long long>(saved.version), test_accuracy, static_cast<long long>(logger->run_id()));
  return result;
}

flow::Agent* the_agent = nullptr;  // for the SIGTERM handler
void stop_agent(int) { the_agent->stop(); }  // run() returns after the current task

int agent(int argc, char** argv) {
  flow_example::check_options(argc, argv, {"--store", "--name", "--max-tasks"});
  store::Store s = store::Store::open(option(argc, argv, "--store", ""));
  flow::Agent agent(flow::Tasks(s), option(argc, argv, "--name", ""));
  agent.register_kind("train", [&](const std::string& hyper, flow::TaskContext& ctx) {
    return train(s, agent.name(), hyper, ctx);
  });
  the_agent = &agent;
  std::signal(SIGTERM, stop_agent);
  // Runs tasks until it has run its share (--max-tasks; 0: no limit) or the dispatcher stops it.
  const int64_t ran = agent.run({.kinds = {"train"}, .poll_ms = 200, .max_tasks = int_option(argc, argv, "--max-tasks", 0)});
  std::printf("agent %s ran %lld tasks\n", agent.name().c_str(), static_cast<long long>(ran));
  return 0;
}

// --- the evaluator: a fresh process with no training code --------------------------------

int evaluate(int argc, char** argv) {
  flow_example::check_options(argc, argv, {"--store", "--grid"});
  store::Store s = store::Store::open(option(argc, argv, "--store", ""));
  store::ModelQuery query{.name = kModel};
  const std::string grid = option(argc, argv, "--grid", "");
  if (!grid.empty()) query.tags = {grid};
  const std::vector<store::ModelInfo> top = s.models().find_top("test_accuracy", store::Order::Max, 1, query);
  if (top.empty()) {
    std::fprintf(stderr, "evaluate: no model '%s'%s in %s\n", kModel, grid.empty() ? "" : (" tagged " + grid).c_str(),
                 s.path().c_str());
    return 1;
  }
  const store::ModelInfo& best = top[0];
  Graph graph = s.models().load(best);  // architecture and weights, from the store alone
  auto test_set = s.datasets().query(kTestSet, static_cast<int64_t>(json_number(best.hyper_parameters, "test_version", 1)));
  const double measured = accuracy(graph, test_set);
  std::printf("evaluate: top model %s v%lld %s: stored test_accuracy %.6f, measured %.6f on %lld test images\n", kModel,
              static_cast<long long>(best.version), best.hyper_parameters.c_str(), best.metrics.at("test_accuracy"), measured,
              static_cast<long long>(test_set->size()));
  return measured == best.metrics.at("test_accuracy") ? 0 : 1;
}

// --- the dispatcher ----------------------------------------------------------------------

// The latest version of a dataset, imported from IDX files the first time.
store::DatasetInfo import_once(store::Store& s, const std::string& name, const std::string& images,
                               const std::string& labels) {
  if (!s.datasets().versions(name).empty()) return s.datasets().get(name);
  store::DatasetInfo v = s.datasets().import_idx(name, images, labels, {.tags = {"fashion-mnist"}});
  std::printf("imported %s v%lld: %lld samples in %lld shards\n", name.c_str(), static_cast<long long>(v.version),
              static_cast<long long>(v.samples), static_cast<long long>(v.shards));
  return v;
}

int dispatch(int argc, char** argv) {
  flow_example::check_options(argc, argv, {"--store", "--epochs", "--limit-samples", "--agents", "--data"});
  const std::string store_path = option(argc, argv, "--store", "flow-example/flow.db");
  const std::string data = option(argc, argv, "--data", "/usr/share/datasets/fashion-mnist");
  const int epochs = static_cast<int>(int_option(argc, argv, "--epochs", 2));
  const int64_t limit = int_option(argc, argv, "--limit-samples", 0);
  const int agents = static_cast<int>(int_option(argc, argv, "--agents", 2));
  if (epochs < 1 || epochs > 1000 || agents < 1 || agents > 64 || limit < 0) {
    std::fprintf(stderr, "dispatch: --epochs must be 1 to 1000, --agents 1 to 64, --limit-samples >= 0 (0: all)\n");
    return 2;
  }

  // 1. The data: Fashion-MNIST's IDX files (Debian package dataset-fashion-mnist) into the
  //    dataset store, once.
  const std::string files[4] = {data + "/train-images-idx3-ubyte.gz", data + "/train-labels-idx1-ubyte.gz",
                                data + "/t10k-images-idx3-ubyte.gz", data + "/t10k-labels-idx1-ubyte.gz"};
  for (const std::string& f : files)
    if (!std::filesystem::exists(f)) {
      std::fprintf(stderr, "dispatch: Fashion-MNIST file %s is missing: install the Debian package dataset-fashion-mnist "
                   "(scripts/setup.sh does) or pass --data DIR\n", f.c_str());
      return 1;
    }
  if (std::filesystem::path(store_path).has_parent_path())
    std::filesystem::create_directories(std::filesystem::path(store_path).parent_path());
  store::Store s = store::Store::open(store_path);
  const store::DatasetInfo train_set = import_once(s, kTrainSet, files[0], files[1]);
  const store::DatasetInfo test_set = import_once(s, kTestSet, files[2], files[3]);

  // 2. The grid: learning rate x hidden width, one "train" task each. Its models are tagged
  //    "grid-<start time>", as the store may hold earlier grids' models.
  flow::Tasks tasks(s);
  const int64_t grid = flow::system_clock_ms();
  std::vector<int64_t> ids;
  for (double lr : {1e-3, 3e-3})
    for (int hidden : {32, 128}) {
      char hyper[256];
      std::snprintf(hyper, sizeof hyper,
                    R"({"lr": %g, "hidden": %d, "epochs": %d, "limit": %lld, "grid": %lld, "train_version": %lld, "test_version": %lld})",
                    lr, hidden, epochs, static_cast<long long>(limit), static_cast<long long>(grid),
                    static_cast<long long>(train_set.version), static_cast<long long>(test_set.version));
      ids.push_back(tasks.submit("train", hyper, {.max_attempts = 2, .lease_ms = 30'000}));
    }
  std::printf("submitted %zu train tasks (grid-%lld), starting %d agents\n", ids.size(), static_cast<long long>(grid), agents);

  // 3. The agents: processes of this program, each running its share of the grid (so that all
  //    take part) and then stopping.
  const int64_t share = (static_cast<int64_t>(ids.size()) + agents - 1) / agents;
  std::vector<pid_t> running;
  for (int a = 1; a <= agents; ++a)
    running.push_back(flow_example::spawn_self({"agent", "--store", store_path, "--name", "agent-" + std::to_string(a),
                                                "--max-tasks", std::to_string(share)}));

  // 4. Wait until every task has ended (finished, or failed after its attempts). Should tasks
  //    be left when every agent has stopped — a failed attempt to retry, or the task of an agent
  //    that died, pending again once its lease ran out — a spare agent without a share runs them.
  std::vector<flow::TaskInfo> done;
  auto all_ended = [&done] {
    return std::all_of(done.begin(), done.end(), [](const flow::TaskInfo& t) { return flow::is_terminal(t.status); });
  };
  for (int spares = 0; done = tasks.wait(ids, /*timeout_ms=*/1000), !all_ended();) {
    std::erase_if(running, flow_example::has_exited);
    if (running.empty())
      running.push_back(flow_example::spawn_self({"agent", "--store", store_path, "--name", "spare-" + std::to_string(++spares)}));
  }
  for (pid_t pid : running) {  // agents still polling for work
    kill(pid, SIGTERM);
    flow_example::wait_for(pid);
  }

  std::printf("\n%-5s %-9s %-8s %-8s %-7s %-6s %-6s %s\n", "task", "status", "attempts", "agent", "lr", "hidden", "model",
              "test_accuracy");
  bool all_finished = true;
  for (const flow::TaskInfo& t : done) {
    all_finished = all_finished && t.status == flow::Status::Finished;
    std::printf("%-5lld %-9s %-8lld %-8s %-7g %-6g v%-5g %.6f%s\n", static_cast<long long>(t.id), flow::status_name(t.status),
                static_cast<long long>(t.attempts), t.agent.c_str(), json_number(t.hyper_parameters, "lr", 0),
                json_number(t.hyper_parameters, "hidden", 0), json_number(t.result, "version", 0),
                json_number(t.result, "test_accuracy", 0), t.error.empty() ? "" : ("  error: " + t.error).c_str());
  }
  const std::string grid_tag = "grid-" + std::to_string(grid);
  std::printf("models saved by this grid (%s): %zu\n", grid_tag.c_str(),
              s.models().find({.name = kModel, .tags = {grid_tag}}).size());
  if (!all_finished) {
    std::fprintf(stderr, "dispatch: not every task finished (see the errors above)\n");
    return 1;
  }

  // 5. A fresh process finds the best model by test accuracy, loads and evaluates it.
  std::printf("\n");
  return flow_example::wait_for(flow_example::spawn_self({"evaluate", "--store", store_path, "--grid", grid_tag}));
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // whole lines, as several processes share stdout
  const std::string role = argc > 1 ? argv[1] : "";
  try {
    if (role == "dispatch") return dispatch(argc, argv);
    if (role == "agent") return agent(argc, argv);
    if (role == "evaluate") return evaluate(argc, argv);
    std::fprintf(stderr, "usage: %s dispatch|agent|evaluate [--option value ...] (see the top of examples/flow_fashion_mnist.cpp)\n",
                 argv[0]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s %s: %s\n", argv[0], role.c_str(), e.what());
    return 1;
  }
}
