// The TensorLayer paper's stream controller (../shared/seeds/003, section 2.4): "each dataset is
// given a stream controller that constantly monitors the availability of samples ... and then
// triggers corresponding training tasks ... changes to a dataset are batched until they become
// significant". Here:
//
//   - producers (threads, each with a store handle of its own) push Fashion-MNIST training
//     images into the dataset "fashion-stream", one version of --push-size images at a time;
//   - a flow::Controllers controller ("retrain") wakes on each commit and, once at least
//     2 x --push-size new samples arrived (or the oldest new version is 2 s old), submits one
//     "retrain" task naming the new versions;
//   - an agent runs each task: it reads exactly the batch's samples (a store::QueryView over its
//     versions), continues training the latest "fashion-mlp" version on them for --epochs, and
//     saves a new version with its test accuracy (on 2,000 held-out images), produced by the task.
//
//   stream_retrain [--store PATH] [--data DIR] [--producers P] [--pushes K] [--push-size N] [--epochs E]
//
// It prints each batch (versions, samples, task, accuracy) and exits 1 unless every committed
// version was trained on in exactly one batch, each batch's task ran exactly once and finished,
// and the last model is more accurate than the first.
#include <loom/flow/agent.h>
#include <loom/flow/controllers.h>
#include <loom/flow/tasks.h>
#include <loom/loom.h>
#include <loom/store/datasets.h>
#include <loom/store/model_registry.h>
#include <loom/store/queries.h>
#include <loom/store/store.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>

using namespace loom;
using nlohmann::json;

namespace {

constexpr const char* kDataset = "fashion-stream";
constexpr const char* kModel = "fashion-mlp";

train::LossFn cross_entropy_loss() {
  return [](const Tensor& y, const Tensor& t) { return train::cross_entropy(y, t); };
}

Graph new_mlp() {
  manual_seed(1);
  nn::Input x(784, Float32, "image");
  nn::Linear h(x, 128, {}, "hidden");
  nn::Activation r(h, nn::relu, "relu");
  nn::Linear out(r, 10, {}, "logits");
  return Graph::build({out}, {x});
}

}  // namespace

int main(int argc, char** argv) {
  std::string store_path = "stream_retrain.db", dir = "/usr/share/datasets/fashion-mnist";
  int producers = 2, pushes = 6, epochs = 2;
  int64_t push_size = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--store") store_path = v;
    else if (a == "--data") dir = v;
    else if (a == "--producers") producers = std::stoi(v);
    else if (a == "--pushes") pushes = std::stoi(v);
    else if (a == "--push-size") push_size = std::stoll(v);
    else if (a == "--epochs") epochs = std::stoi(v);
  }
  const int64_t total = int64_t(producers) * pushes * push_size;
  std::filesystem::remove(store_path);
  std::filesystem::remove_all(store_path + ".blobs");
  store::Store s = store::Store::open(store_path);
  flow::Tasks tasks(s);
  flow::Controllers controllers(tasks);
  controllers.create({.name = "retrain", .dataset = kDataset, .min_samples = 2 * push_size, .max_wait_ms = 2000,
                      .kind = "retrain", .hyper_parameters = json{{"epochs", epochs}}.dump(), .output_model = kModel});

  const Tensor images = data::read_idx(dir + "/train-images-idx3-ubyte.gz").reshape({-1, 784});
  const Tensor labels = data::read_idx(dir + "/train-labels-idx1-ubyte.gz").astype(Int64);
  if (images.shape()[0] < total) {
    std::fprintf(stderr, "only %lld training images for %lld samples\n", static_cast<long long>(images.shape()[0]),
                 static_cast<long long>(total));
    return 2;
  }
  const Tensor x_test = slice(data::read_idx(dir + "/t10k-images-idx3-ubyte.gz").reshape({-1, 784}), 0, 0, 2000).astype(Float32) / 255.0;
  const Tensor y_test = slice(data::read_idx(dir + "/t10k-labels-idx1-ubyte.gz").astype(Int64), 0, 0, 2000);

  // the agent: one retraining per batch, each continuing from the latest model version
  std::mutex m;
  std::map<int64_t, int> runs_of_batch;  // batch -> times its task ran
  std::map<int64_t, double> accuracy_of_batch;
  flow::Agent agent(tasks, "retrain-agent");
  agent.register_kind("retrain", [&](const std::string& hp, flow::TaskContext& ctx) {
    const json h = json::parse(hp);
    const int64_t batch = h["stream"]["batch"].get<int64_t>();
    const std::shared_ptr<store::QueryView> view =
        s.queries().open_versions(kDataset, h["stream"]["versions"].get<std::vector<int64_t>>());
    std::vector<int64_t> all(static_cast<size_t>(view->size()));
    for (int64_t i = 0; i < view->size(); ++i) all[static_cast<size_t>(i)] = i;
    const data::Batch b = view->get_batch(all);
    const Tensor x = b[0].astype(Float32) / 255.0, y = b[1];
    const std::vector<store::ModelInfo> earlier = s.models().versions(kModel);
    const Graph g = earlier.empty() ? new_mlp() : s.models().load(earlier.back());
    train::Model model(g, cross_entropy_loss(), std::make_shared<train::Adam>(g.parameters(), train::AdamOptions{.lr = 1e-3}),
                       {std::make_shared<train::Accuracy>()});
    model.fit(x, y, {.epochs = h["epochs"].get<int>(), .progress = false, .batch_size = 64});
    const double accuracy = model.evaluate(x_test, y_test)["accuracy"];
    const store::ModelInfo saved = s.models().save(kModel, g, {{"accuracy", accuracy}}, hp, {}, ctx.produced_by());
    {
      std::lock_guard<std::mutex> l(m);
      ++runs_of_batch[batch];
      accuracy_of_batch[batch] = accuracy;
    }
    std::printf("batch %lld: versions %s, %lld samples -> task %lld, %s v%lld, test accuracy %.4f\n", static_cast<long long>(batch),
                h["stream"]["versions"].dump().c_str(), static_cast<long long>(view->size()),
                static_cast<long long>(ctx.claim().task_id), kModel, static_cast<long long>(saved.version), accuracy);
    return json{{"batch", batch}, {"version", saved.version}, {"accuracy", accuracy}}.dump();
  });
  std::thread agent_thread([&] { agent.run({.poll_ms = 50}); });

  // the controller, woken by the producers' commits
  std::atomic<bool> produced{false};
  std::thread controller([&] {
    flow::Controllers mine(flow::Tasks(store::Store::open(store_path)));
    mine.run("retrain", [&] { return produced.load() && mine.get("retrain").pending_versions == 0; }, 500);
  });

  // the producers: disjoint slices of the training set, one version per push
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p)
    threads.emplace_back([&, p] {
      store::Store mine = store::Store::open(store_path);
      for (int k = 0; k < pushes; ++k) {
        store::DatasetWriter w = mine.datasets().create(kDataset, {.fields = {"x", "y"}});
        const int64_t from = (int64_t(k) * producers + p) * push_size;
        for (int64_t i = from; i < from + push_size; ++i)
          w.append({.tensors = {{"x", images[i]}, {"y", labels[i]}},
                    .metadata = "{\"label\": " + std::to_string(labels[i].item<int64_t>()) + "}"});
        w.commit();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  for (std::thread& t : threads) t.join();
  produced.store(true);
  controller.join();
  // every batch's task ends, then the agent stops
  for (;;) {
    const std::vector<flow::TaskInfo> open = tasks.list({.status = flow::Status::Pending});
    if (open.empty() && tasks.list({.status = flow::Status::Running}).empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  agent.stop();
  agent_thread.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const std::vector<flow::BatchInfo> batches = controllers.batches("retrain");
  std::map<int64_t, int> version_batches;
  int64_t trained = 0;
  bool ok = !batches.empty();
  for (const flow::BatchInfo& b : batches) {
    const flow::TaskInfo t = tasks.get(b.task_id);
    ok = ok && t.status == flow::Status::Finished && runs_of_batch[b.batch] == 1;
    for (int64_t v : b.versions) ++version_batches[v];
    trained += b.samples;
  }
  for (const auto& [v, n] : version_batches) ok = ok && n == 1;
  ok = ok && static_cast<int64_t>(version_batches.size()) == int64_t(producers) * pushes && trained == total &&
       static_cast<int64_t>(tasks.list().size()) == static_cast<int64_t>(batches.size());
  const double first = accuracy_of_batch.empty() ? 0 : accuracy_of_batch.begin()->second;
  const double last = accuracy_of_batch.empty() ? 0 : accuracy_of_batch.rbegin()->second;
  ok = ok && last > first;
  std::printf("%d producers pushed %lld versions (%lld samples); %zu batches, each trained once; accuracy %.4f after the first, "
              "%.4f after the last; %.1f s\n%s\n",
              producers, static_cast<long long>(version_batches.size()), static_cast<long long>(trained), batches.size(), first, last,
              seconds, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
