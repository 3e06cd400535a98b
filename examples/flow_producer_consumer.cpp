// The exchange of distributed reinforcement learning, on one store (docs/workflow.md,
// "Examples"): producer processes act with the latest published parameters and push what they
// observe as records; one consumer process trains on every new record and publishes the
// updated parameters as a new model version, which the producers load for their next records.
//
// Here the "environment" is a noisy linear function y = x.w + b of 4 inputs and the policy a
// linear layer; what matters is the traffic: records (tensors + metadata) go through the
// dataset store, one committed version per push, and the consumer removes each version once it
// has trained on it, so every record is consumed once; parameters go through the model
// registry, where "latest" always names the newest version.
//
//   ./build/examples/flow_producer_consumer run [--store exchange-example/exchange.db]
//        [--producers 3] [--rounds 4] [--records 64]
//   (run starts the other roles itself:)
//   ./build/examples/flow_producer_consumer consumer --store PATH --expect PUSHES
//   ./build/examples/flow_producer_consumer producer --store PATH --id K --rounds R --records N
#include <loom/loom.h>
#include <loom/data/loader.h>
#include <loom/store/datasets.h>
#include <loom/store/model_registry.h>
#include <loom/train/model.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "flow_example_util.h"

using namespace loom;
using flow_example::json_number;
using flow_example::int_option;
using flow_example::option;

namespace {

const char* const kRecords = "experience";  // a dataset: one version per push
const char* const kPolicy = "policy";        // a model: one version per update
const int64_t kWaitMs = 120'000;             // how long a process waits for the other side

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void pause() { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

// --- a producer ----------------------------------------------------------------------------

// The newest published parameters, once their version is above `seen` (waits for the consumer).
store::ModelInfo wait_for_parameters(const store::Store& s, int64_t seen) {
  for (const int64_t start = now_ms(); now_ms() - start < kWaitMs; pause()) {
    try {
      store::ModelInfo latest = s.models().get(kPolicy, "latest");
      if (latest.version > seen) return latest;
    } catch (const store::NotFoundError&) {
      // nothing published yet
    }
  }
  throw Error("no parameters newer than version " + std::to_string(seen) + " were published within " +
              std::to_string(kWaitMs / 1000) + " s");
}

int producer(int argc, char** argv) {
  flow_example::check_options(argc, argv, {"--store", "--id", "--rounds", "--records"});
  store::Store s = store::Store::open(option(argc, argv, "--store", ""));
  const int id = static_cast<int>(int_option(argc, argv, "--id", 1));
  const int rounds = static_cast<int>(int_option(argc, argv, "--rounds", 4));
  const int64_t records = int_option(argc, argv, "--records", 64);
  const Tensor w = tensor({1.5f, -2.0f, 0.5f, 3.0f}).reshape({4, 1});

  int64_t seen = 0;
  for (int round = 1; round <= rounds; ++round) {
    // Act with the latest parameters: here, measure how well they predict what we observe.
    const store::ModelInfo params = wait_for_parameters(s, seen);
    seen = params.version;
    Plan policy = s.models().load(params).compile();
    Generator gen(static_cast<uint64_t>(id) * 1000 + static_cast<uint64_t>(round));
    const Tensor x = randn({records, 4}, Float32, default_device(), &gen);
    const Tensor y = matmul(x, w) + 0.5 + randn({records, 1}, Float32, default_device(), &gen) * 0.1;
    double loss = 0;
    {
      NoGrad no_grad;
      loss = mean(square(policy(x) - y)).item<double>();
    }

    // Push the records: one new version of the records dataset, visible once committed.
    store::DatasetWriter push = s.datasets().create(kRecords, {.fields = {"x", "y"}, .tags = {"producer-" + std::to_string(id)}});
    for (int64_t i = 0; i < records; ++i) {
      char meta[160];
      std::snprintf(meta, sizeof meta, R"({"producer": %d, "round": %d, "record": %lld, "params_version": %lld})", id, round,
                    static_cast<long long>(i), static_cast<long long>(params.version));
      push.append({.tensors = {{"x", slice(x, 0, i, i + 1).reshape({4})}, {"y", slice(y, 0, i, i + 1).reshape({1})}},
                   .metadata = meta});
    }
    const store::DatasetInfo pushed = push.commit();
    std::printf("pushed producer=%d round=%d records=%lld params=%lld loss=%.6f (%s v%lld)\n", id, round,
                static_cast<long long>(records), static_cast<long long>(params.version), loss, kRecords,
                static_cast<long long>(pushed.version));
  }
  return 0;
}

// --- the consumer --------------------------------------------------------------------------

int consumer(int argc, char** argv) {
  flow_example::check_options(argc, argv, {"--store", "--expect"});
  store::Store s = store::Store::open(option(argc, argv, "--store", ""));
  const int64_t expect = int_option(argc, argv, "--expect", 1);

  // The policy and its trainer live as long as the consumer; version 1 is the initial one.
  manual_seed(7);
  nn::Input in(4, Float32, "x");
  nn::Linear out(in, 1);
  Graph graph = Graph::build({out}, {in});
  train::Model model(graph, [](const Tensor& p, const Tensor& t) { return train::mse(p, t); },
                     std::make_shared<train::SGD>(graph.parameters(), train::SGDOptions{.lr = 0.05}));
  std::printf("published params=%lld\n", static_cast<long long>(s.models().save(kPolicy, graph).version));

  int64_t consumed = 0;
  for (int64_t idle_since = now_ms(); consumed < expect;) {
    // Every committed push not yet consumed (a push still being written is not listed).
    const std::vector<store::DatasetInfo> pushes = s.datasets().versions(kRecords);
    if (pushes.empty()) {
      if (now_ms() - idle_since > kWaitMs) throw Error("no records arrived within " + std::to_string(kWaitMs / 1000) + " s");
      pause();
      continue;
    }
    for (const store::DatasetInfo& push : pushes) {
      auto records = s.datasets().query(kRecords, push.version);
      data::DataLoader loader(records, {.batch_size = 16, .shuffle = true, .seed = static_cast<uint64_t>(push.version)});
      model.fit(loader, {.epochs = 5, .progress = false});  // 5 more epochs on this push
      // Consumed: removed from the store, so that no later poll sees it again.
      s.datasets().remove(kRecords, push.version);
      const std::string& first = records->metadata(0);
      std::printf("consumed producer=%g round=%g records=%lld (%s v%lld)\n", json_number(first, "producer", 0),
                  json_number(first, "round", 0), static_cast<long long>(records->size()), kRecords,
                  static_cast<long long>(push.version));
      ++consumed;
    }
    const store::ModelInfo published = s.models().save(kPolicy, graph, {}, R"({"pushes_consumed": )" + std::to_string(consumed) + "}");
    std::printf("published params=%lld after %lld pushes\n", static_cast<long long>(published.version),
                static_cast<long long>(consumed));
    idle_since = now_ms();
  }
  return 0;
}

// --- the launcher --------------------------------------------------------------------------

int run(int argc, char** argv) {
  flow_example::check_options(argc, argv, {"--store", "--producers", "--rounds", "--records"});
  const std::string store_path = option(argc, argv, "--store", "exchange-example/exchange.db");
  const int producers = static_cast<int>(int_option(argc, argv, "--producers", 3));
  const int rounds = static_cast<int>(int_option(argc, argv, "--rounds", 4));
  const int64_t records = int_option(argc, argv, "--records", 64);
  if (producers < 1 || producers > 64 || rounds < 1 || rounds > 10000 || records < 1 || records > 100000) {
    std::fprintf(stderr, "run: --producers must be 1 to 64, --rounds 1 to 10000, --records 1 to 100000\n");
    return 2;
  }
  if (std::filesystem::path(store_path).has_parent_path())
    std::filesystem::create_directories(std::filesystem::path(store_path).parent_path());
  store::Store s = store::Store::open(store_path);
  if (!s.datasets().versions(kRecords).empty() || !s.models().versions(kPolicy).empty()) {
    std::fprintf(stderr, "run: %s already holds '%s' records or '%s' parameters: use a new store\n", store_path.c_str(), kRecords,
                 kPolicy);
    return 2;
  }

  std::vector<pid_t> pids{flow_example::spawn_self(
      {"consumer", "--store", store_path, "--expect", std::to_string(static_cast<int64_t>(producers) * rounds)})};
  for (int k = 1; k <= producers; ++k)
    pids.push_back(flow_example::spawn_self({"producer", "--store", store_path, "--id", std::to_string(k), "--rounds",
                                             std::to_string(rounds), "--records", std::to_string(records)}));
  int failed = 0;
  for (pid_t pid : pids) failed += flow_example::wait_for(pid) != 0;

  std::printf("records left unconsumed: %zu; parameter versions published: %zu\n", s.datasets().versions(kRecords).size(),
              s.models().versions(kPolicy).size());
  if (failed > 0) std::fprintf(stderr, "run: %d process(es) failed\n", failed);
  return failed > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // whole lines, as several processes share stdout
  const std::string role = argc > 1 ? argv[1] : "";
  try {
    if (role == "run") return run(argc, argv);
    if (role == "producer") return producer(argc, argv);
    if (role == "consumer") return consumer(argc, argv);
    std::fprintf(stderr, "usage: %s run|producer|consumer [--option value ...] (see the top of examples/flow_producer_consumer.cpp)\n",
                 argv[0]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s %s: %s\n", argv[0], role.c_str(), e.what());
    return 1;
  }
}
