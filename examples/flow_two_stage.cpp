// The TensorLayer paper's training plan (../shared/seeds/003, section 2.3): "multiple tasks can
// form a training plan to be scheduled by the master". Two stages, the second depending on the
// first, submitted as one flow::TaskGraph and run by an agent:
//
//   1. train_cnn: a CNN learns Fashion-MNIST and is saved in the store ("fashion-cnn"), its
//      version recording the task that produced it;
//   2. train_head: depends on train_cnn. It reads which model version its dependency saved from
//      the dependency's result (its claim carries it), computes that CNN's features (the
//      penultimate layer) for the images, trains a second model on the features alone and
//      saves it ("fashion-head").
//
//   flow_two_stage [--store PATH] [--data DIR] [--limit N] [--epochs E]
//
// It prints the plan's tasks and the models' lineage, and exits 1 unless the plan finished and
// the second model classifies held-out images from the first one's features (accuracy >= 0.7).
#include <loom/flow/agent.h>
#include <loom/flow/plans.h>
#include <loom/flow/tasks.h>
#include <loom/loom.h>
#include <loom/store/model_registry.h>
#include <loom/store/store.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <string>

using namespace loom;
using nlohmann::json;

namespace {

struct Data {
  Tensor x_train, y_train, x_test, y_test;
};

// The first `limit` training images and 2,000 test images, scaled to [0, 1], as (N, 1, 28, 28).
Data load(const std::string& dir, int64_t limit) {
  auto images = [&](const std::string& split, int64_t n) {
    Tensor x = data::read_idx(dir + "/" + split + "-images-idx3-ubyte.gz").astype(Float32) / 255.0;
    return slice(x.reshape({-1, 1, 28, 28}), 0, 0, n);
  };
  auto labels = [&](const std::string& split, int64_t n) {
    return slice(data::read_idx(dir + "/" + split + "-labels-idx1-ubyte.gz").astype(Int64), 0, 0, n);
  };
  return {images("train", limit), labels("train", limit), images("t10k", 2000), labels("t10k", 2000)};
}

train::LossFn cross_entropy_loss() {
  return [](const Tensor& y, const Tensor& t) { return train::cross_entropy(y, t); };
}

}  // namespace

int main(int argc, char** argv) {
  std::string store_path = "flow_two_stage.db", dir = "/usr/share/datasets/fashion-mnist";
  int64_t limit = 12000;
  int epochs = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--store") store_path = v;
    else if (a == "--data") dir = v;
    else if (a == "--limit") limit = std::stoll(v);
    else if (a == "--epochs") epochs = std::stoi(v);
  }
  std::filesystem::remove(store_path);
  store::Store s = store::Store::open(store_path);
  flow::Tasks tasks(s);

  // the master submits the plan: stage 2 waits for stage 1 and receives its result
  flow::Plans plans(tasks);
  const json hyper = {{"limit", limit}, {"epochs", epochs}};
  const int64_t plan = plans.submit({.name = "cnn, then a model on its features",
                                     .tasks = {{.name = "cnn", .kind = "train_cnn", .hyper_parameters = hyper.dump()},
                                               {.name = "head", .kind = "train_head", .hyper_parameters = hyper.dump(),
                                                .depends_on = {"cnn"}}}});

  flow::Agent agent(tasks, "two-stage-agent");
  agent.register_kind("train_cnn", [&](const std::string& hp, flow::TaskContext& ctx) {
    const json h = json::parse(hp);
    const Data d = load(dir, h["limit"].get<int64_t>());
    manual_seed(1);
    nn::Input x(Shape{-1, 1, 28, 28}, Float32, "image");
    nn::Conv2D c1(x, 16, {3, 3}, {.padding = 1}, "conv1");
    nn::Activation r1(c1, nn::relu, "relu1");
    nn::MaxPool2D p1(r1, {2, 2}, {}, "pool1");
    nn::Conv2D c2(p1, 32, {3, 3}, {.padding = 1}, "conv2");
    nn::Activation r2(c2, nn::relu, "relu2");
    nn::MaxPool2D p2(r2, {2, 2}, {}, "pool2");
    nn::Flatten f(p2, "flatten");
    nn::Linear feat(f, 64, {}, "features");
    nn::Activation fr(feat, nn::relu, "features_relu");
    nn::Linear out(fr, 10, {}, "logits");
    const Graph g = Graph::build({out}, {x});
    train::Model model(g, cross_entropy_loss(), std::make_shared<train::Adam>(g.parameters(), train::AdamOptions{.lr = 2e-3}),
                       {std::make_shared<train::Accuracy>()});
    model.fit(d.x_train, d.y_train, {.epochs = h["epochs"].get<int>(), .progress = false, .batch_size = 64});
    const double accuracy = model.evaluate(d.x_test, d.y_test)["accuracy"];
    const store::ModelInfo saved = s.models().save("fashion-cnn", g, {{"accuracy", accuracy}}, hp, {}, ctx.produced_by());
    std::printf("stage 1 (task %lld): CNN test accuracy %.4f, saved fashion-cnn version %lld\n",
                static_cast<long long>(ctx.claim().task_id), accuracy, static_cast<long long>(saved.version));
    return json{{"model", saved.name}, {"version", saved.version}, {"accuracy", accuracy}}.dump();
  });
  agent.register_kind("train_head", [&](const std::string& hp, flow::TaskContext& ctx) {
    // the dependency's result says which model version stage 1 saved
    const json cnn = json::parse(ctx.claim().dependencies.at(0).result);
    const Graph trained = s.models().load(cnn["model"].get<std::string>(), cnn["version"].get<int64_t>());
    const Graph features = Graph::build({trained.layer("features_relu")}, trained.inputs());
    const auto run = features.as_function();
    const Data d = load(dir, json::parse(hp)["limit"].get<int64_t>());
    Tensor f_train, f_test;
    {
      NoGrad no_grad;
      f_train = run({d.x_train})[0];
      f_test = run({d.x_test})[0];
    }
    manual_seed(2);
    nn::Input z(64, Float32, "cnn_features");
    nn::Linear h1(z, 32, {}, "head_hidden");
    nn::Activation a1(h1, nn::relu, "head_relu");
    nn::Linear logits(a1, 10, {}, "head_logits");
    const Graph head = Graph::build({logits}, {z});
    train::Model model(head, cross_entropy_loss(), std::make_shared<train::Adam>(head.parameters(), train::AdamOptions{.lr = 3e-3}),
                       {std::make_shared<train::Accuracy>()});
    model.fit(f_train, d.y_train, {.epochs = 5, .progress = false, .batch_size = 64});
    const double accuracy = model.evaluate(f_test, d.y_test)["accuracy"];
    const store::ModelInfo saved = s.models().save("fashion-head", head, {{"accuracy", accuracy}}, hp, {}, ctx.produced_by());
    std::printf("stage 2 (task %lld): a model on fashion-cnn v%lld's features, test accuracy %.4f, saved fashion-head v%lld\n",
                static_cast<long long>(ctx.claim().task_id), static_cast<long long>(cnn["version"].get<int64_t>()), accuracy,
                static_cast<long long>(saved.version));
    return json{{"model", saved.name}, {"version", saved.version}, {"accuracy", accuracy}}.dump();
  });
  agent.run({.stop_when_idle = true});

  const flow::PlanInfo info = plans.get(plan);
  std::printf("plan %lld: %s\n", static_cast<long long>(plan), flow::status_name(info.status));
  for (const auto& t : info.tasks)
    std::printf("  task %lld %-10s %-9s %s\n", static_cast<long long>(t.id), t.kind.c_str(), flow::status_name(t.status),
                t.result.c_str());
  for (const std::string name : {"fashion-cnn", "fashion-head"}) {
    const store::ModelInfo m = s.models().get(name);
    std::printf("  %s v%lld produced by task %lld\n", name.c_str(), static_cast<long long>(m.version),
                static_cast<long long>(m.produced_by.task_id));
  }
  const bool ok = info.status == flow::Status::Finished &&
                  json::parse(info.tasks.back().result)["accuracy"].get<double>() >= 0.7;
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
