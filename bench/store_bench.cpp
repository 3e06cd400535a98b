// The store and workflow benchmarks (bench/store_bench.sh runs them next to the MLflow peer,
// bench/mlflow_peer.py, and prints the ratios). Each mode prints one JSON line.
//
//   store_bench registry --store URL [--runs 200] [--epochs 10]
//       log `runs` training runs (hyper-parameters, per-epoch metrics, the model: a 784-256-10
//       MLP, architecture and weights), then the top 5 runs by final accuracy, then load the
//       best run's model into a runnable graph and run it once.
//   store_bench tasks --store URL --agents N [--tasks 400]
//       no-op tasks: submit them, then N agent processes (flow::Agent) claim and finish them all;
//       tasks per second from the first claim to the last finish.
//   store_bench claim --store URL [--tasks 300]
//       the latency of one claim (and of one finish) with one agent and a full queue.
//   store_bench dag --store URL --agents N [--tasks 1000] [--poll-ms 5] [--batch 0]
//       a plan of no-op tasks, one root, tasks - 2 that depend on it, one that depends on all of
//       those (fan-out, then fan-in), submitted in one transaction and run by N agent processes:
//       tasks per second from the root's start to the last task's end. --batch: the agents'
//       flow::AgentOptions::batch (tasks claimed, and results recorded, per transaction; 0, the
//       default, adapts).
//   store_bench chain --store URL --agents N [--tasks 100] [--poll-ms 5] [--batch 0]
//       a plan of no-op tasks in a chain (each depends on the one before): the time from a
//       task's end to its dependent's start (median, p90), as the tasks recorded them.
//   store_bench commit --store URL [--tasks 500]
//       the rate of durable commits of a one-row UPDATE, one after another (a write session
//       each): the ceiling of anything that commits once per task.
//   store_bench dataset --store URL [--data DIR]
//       one epoch of the Fashion-MNIST training set (batch 128, shuffled) through the loader,
//       read from the IDX files and through a dataset-store query (imported once beforehand).
//   store_bench ui-fill --store URL [--runs 200] [--epochs 10] [--dump FILE]   (ui_bench.sh: 1000 x 50)
//       the dashboard benchmark's store (bench/ui_bench.sh): `runs` finished runs of `epochs`
//       epochs (loss, accuracy, val_loss, val_accuracy; five hyper-parameters; some tags), a
//       model of 10 versions, a dataset of 64 images and 100 tasks. FILE gets the runs as JSON
//       for the MLflow side (bench/ui_mlflow.py logs the same values).
#include <loom/loom.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "timing.h"

using namespace loom;
using nlohmann::json;

namespace {

struct Args {
  std::string mode, store, data = "/usr/share/datasets/fashion-mnist", dump;
  int64_t runs = 200, epochs = 10, agents = 1, tasks = 400, poll_ms = 5, batch = 0;
  bool tasks_given = false;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "store_bench: " << why
            << "\nusage: store_bench registry|tasks|claim|dag|chain|commit|dataset|ui-fill --store URL [--runs N] [--epochs N] [--agents N]"
               " [--tasks N] [--poll-ms N] [--batch N] [--data DIR] [--dump FILE]\n";
  std::exit(2);
}

Args parse(int argc, char** argv) {
  if (argc < 2) usage("no mode");
  Args a;
  a.mode = argv[1];
  for (int i = 2; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) usage("no value for " + k);
    const std::string v = argv[i + 1];
    if (k == "--store") a.store = v;
    else if (k == "--data") a.data = v;
    else if (k == "--dump") a.dump = v;
    else if (k == "--runs") a.runs = std::stoll(v);
    else if (k == "--epochs") a.epochs = std::stoll(v);
    else if (k == "--agents") a.agents = std::stoll(v);
    else if (k == "--tasks") a.tasks = std::stoll(v), a.tasks_given = true;
    else if (k == "--poll-ms") a.poll_ms = std::stoll(v);
    else if (k == "--batch") a.batch = std::stoll(v);
    else usage("unknown option " + k);
  }
  if (a.store.empty()) usage("--store is required");
  return a;
}

std::string backend(const std::string& url) { return url.rfind("postgres", 0) == 0 ? "postgresql" : "sqlite"; }

Graph mlp() {
  nn::Input x(Shape{-1, 784}, Float32, "x");
  nn::Linear hidden(x, 256, {}, "hidden");
  nn::Activation relu(hidden, nn::relu, "relu");
  nn::Linear logits(relu, 10, {}, "logits");
  return Graph::build({logits}, {x});
}

// MLflow's workload, the same calls in the same order (bench/mlflow_peer.py).
void registry(const Args& a) {
  store::Store s = store::Store::open(a.store);
  store::Runs runs = s.runs();
  store::Models models = s.models();
  std::mt19937_64 rng(0);
  std::uniform_real_distribution<double> u(0.0, 1.0);

  const double t0 = bench::now_s();
  for (int64_t r = 0; r < a.runs; ++r) {
    manual_seed(static_cast<uint64_t>(r));
    const Graph g = mlp();
    const json hyper = {{"lr", 1e-3 * (1 + r % 7)}, {"hidden", 256}, {"batch_size", 64 << (r % 3)}, {"seed", r}};
    const store::RunInfo run = runs.start("bench", "", hyper.dump());
    double acc = 0;
    for (int64_t e = 0; e < a.epochs; ++e) {
      acc = 0.5 + 0.45 * u(rng);
      runs.log_epoch(run.id, e, {{"loss", 1.0 - acc + 0.1 * u(rng)}, {"accuracy", acc}});
    }
    models.save("bench-mlp", g, {{"accuracy", acc}}, hyper.dump(), {"run-" + std::to_string(run.id)});
    runs.finish(run.id);
  }
  const double t_log = bench::now_s() - t0;

  const double t1 = bench::now_s();
  const std::vector<store::RunInfo> top = runs.find_top("accuracy", store::At::Final, 5, {.experiment = "bench"});
  const double t_search = bench::now_s() - t1;

  const double t2 = bench::now_s();
  const std::vector<store::ModelInfo> best = models.find({.name = "bench-mlp", .tags = {"run-" + std::to_string(top.at(0).id)}});
  Graph g = models.load(best.at(0));
  Plan plan = g.compile();
  const Tensor y = plan(zeros({1, 784}));
  const double t_load = bench::now_s() - t2;
  if (y.shape() != Shape{1, 10}) throw Error("store_bench: the loaded model gave the wrong shape");

  std::cout << json{{"bench", "registry"}, {"impl", "loom"}, {"backend", backend(a.store)}, {"runs", a.runs},
                    {"epochs", a.epochs}, {"log_s", t_log}, {"search_s", t_search}, {"load_s", t_load},
                    {"total_s", t_log + t_search + t_load}}
                   .dump()
            << std::endl;
}

// Runs a no-op agent in a child process until the queue is empty.
pid_t spawn_agent(const std::string& url, int i) {
  const pid_t pid = fork();
  if (pid < 0) throw Error("store_bench: fork failed");
  if (pid > 0) return pid;
  int code = 0;
  try {
    flow::Agent agent(flow::Tasks(store::Store::open(url)), "bench-agent-" + std::to_string(i));
    agent.register_kind("noop", [](const std::string&, flow::TaskContext&) { return std::string("{}"); });
    agent.run({.poll_ms = 5, .stop_when_idle = true});
  } catch (const std::exception& e) {
    std::cerr << "agent " << i << ": " << e.what() << "\n";
    code = 1;
  }
  std::_Exit(code);
}

void tasks(const Args& a) {
  flow::Tasks q(store::Store::open(a.store));
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < a.tasks; ++i) ids.push_back(q.submit("noop", "{}", {.lease_ms = 60000}));

  const double t0 = bench::now_s();
  std::vector<pid_t> pids;
  for (int i = 0; i < a.agents; ++i) pids.push_back(spawn_agent(a.store, i));
  bool ok = true;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  const double wall = bench::now_s() - t0;
  if (!ok) throw Error("store_bench: an agent failed");

  // From the first claim to the last finish, as the tasks recorded them (excludes process start).
  int64_t first = INT64_MAX, last = 0, finished = 0;
  std::map<std::string, int64_t> per_agent;
  for (const flow::TaskInfo& t : q.list({.kind = "noop"})) {
    if (t.status != flow::Status::Finished) continue;
    ++finished;
    first = std::min(first, t.started_ms);
    last = std::max(last, t.finished_ms);
    ++per_agent[t.agent];
  }
  if (finished != a.tasks) throw Error("store_bench: only " + std::to_string(finished) + " tasks finished");
  const double span = std::max<int64_t>(1, last - first) / 1000.0;
  std::cout << json{{"bench", "tasks"},   {"impl", "loom"},         {"backend", backend(a.store)},
                    {"agents", a.agents}, {"tasks", a.tasks},       {"span_s", span},
                    {"wall_s", wall},     {"tasks_per_s", a.tasks / span}, {"agents_used", per_agent.size()}}
                   .dump()
            << std::endl;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// CLOCK_MONOTONIC in microseconds: one clock for every process of the machine (Ray's peer
// reads the same clock through Python's time.monotonic()).
double monotonic_us() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

// An agent process for a plan: runs no-op tasks, each returning when it started and ended,
// until the plan's last task (`last`) has ended.
pid_t spawn_plan_agent(const Args& a, int i, int64_t last) {
  const pid_t pid = fork();
  if (pid < 0) throw Error("store_bench: fork failed");
  if (pid > 0) return pid;
  int code = 0;
  try {
    flow::Tasks tasks(store::Store::open(a.store));
    flow::Agent agent(tasks, "bench-agent-" + std::to_string(i));
    agent.register_kind("noop", [](const std::string&, flow::TaskContext&) {
      const double start = monotonic_us();
      return json{{"start_us", start}, {"end_us", monotonic_us()}}.dump();
    });
    while (!flow::is_terminal(tasks.get(last).status)) {
      agent.run({.poll_ms = a.poll_ms, .stop_when_idle = true, .batch = a.batch});
      std::this_thread::sleep_for(std::chrono::milliseconds(a.poll_ms));
    }
  } catch (const std::exception& e) {
    std::cerr << "agent " << i << ": " << e.what() << "\n";
    code = 1;
  }
  std::_Exit(code);
}

struct PlanRun {
  std::map<std::string, std::pair<double, double>> times;  // task name -> (start, end) in µs
  double submit_s = 0;
};

// Submits the plan, runs it with a.agents agent processes, returns every task's times.
PlanRun run_plan(const Args& a, const flow::TaskGraph& plan) {
  flow::Plans plans{flow::Tasks(store::Store::open(a.store))};
  const double t0 = bench::now_s();
  const int64_t id = plans.submit(plan);
  PlanRun r;
  r.submit_s = bench::now_s() - t0;
  const int64_t last = plans.get(id).task_id(plan.tasks.back().name);
  std::vector<pid_t> pids;
  for (int i = 0; i < a.agents; ++i) pids.push_back(spawn_plan_agent(a, i, last));
  bool ok = true;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  if (!ok) throw Error("store_bench: an agent failed");
  const flow::PlanInfo info = plans.get(id);
  if (info.status != flow::Status::Finished) throw Error("store_bench: the plan did not finish");
  for (const flow::TaskInfo& t : info.tasks) {
    const json j = json::parse(t.result);
    r.times[t.name] = {j.at("start_us").get<double>(), j.at("end_us").get<double>()};
  }
  return r;
}

void dag(const Args& a) {
  const int64_t n = a.tasks_given ? a.tasks : 1000;
  if (n < 3) usage("dag needs --tasks >= 3");
  flow::TaskGraph plan{.name = "dag bench"};
  plan.tasks.push_back({.name = "root", .kind = "noop"});
  flow::PlanTask sink{.name = "sink", .kind = "noop"};
  for (int64_t i = 0; i < n - 2; ++i) {
    plan.tasks.push_back({.name = "t" + std::to_string(i), .kind = "noop", .depends_on = {"root"}});
    sink.depends_on.push_back(plan.tasks.back().name);
  }
  plan.tasks.push_back(sink);
  const PlanRun r = run_plan(a, plan);
  const double span_s = (r.times.at("sink").second - r.times.at("root").first) / 1e6;
  std::cout << json{{"bench", "dag"},         {"impl", "loom"},    {"backend", backend(a.store)},
                    {"agents", a.agents},     {"tasks", n},        {"poll_ms", a.poll_ms},
                    {"batch", a.batch},       {"submit_s", r.submit_s}, {"span_s", span_s},  {"tasks_per_s", static_cast<double>(n) / span_s}}
                   .dump()
            << std::endl;
}

void chain(const Args& a) {
  const int64_t n = a.tasks_given ? a.tasks : 100;
  if (n < 2) usage("chain needs --tasks >= 2");
  flow::TaskGraph plan{.name = "chain bench"};
  for (int64_t i = 0; i < n; ++i) {
    plan.tasks.push_back({.name = "t" + std::to_string(i), .kind = "noop"});
    if (i > 0) plan.tasks.back().depends_on = {"t" + std::to_string(i - 1)};
  }
  const PlanRun r = run_plan(a, plan);
  std::vector<double> gaps;
  for (int64_t i = 1; i < n; ++i)
    gaps.push_back((r.times.at("t" + std::to_string(i)).first - r.times.at("t" + std::to_string(i - 1)).second) / 1e3);
  std::cout << json{{"bench", "chain"},       {"impl", "loom"},   {"backend", backend(a.store)},
                    {"agents", a.agents},     {"tasks", n},       {"poll_ms", a.poll_ms},
                    {"batch", a.batch},       {"gap_ms_median", median(gaps)}, {"gap_ms_p90", percentile(gaps, 0.9)}}
                   .dump()
            << std::endl;
}

void claim_latency(const Args& a) {
  flow::Tasks q(store::Store::open(a.store));
  for (int64_t i = 0; i < a.tasks; ++i) q.submit("noop", "{}");
  std::vector<double> claims, finishes;
  for (int64_t i = 0; i < a.tasks; ++i) {
    const double t0 = bench::now_s();
    std::optional<flow::Claim> c = q.claim({"noop"}, "bench");
    const double t1 = bench::now_s();
    if (!c) throw Error("store_bench: the queue ran dry");
    q.finish(*c, "{}");
    finishes.push_back((bench::now_s() - t1) * 1e3);
    claims.push_back((t1 - t0) * 1e3);
  }
  std::cout << json{{"bench", "claim"},
                    {"impl", "loom"},
                    {"backend", backend(a.store)},
                    {"tasks", a.tasks},
                    {"claim_ms_median", median(claims)},
                    {"claim_ms_p99", percentile(claims, 0.99)},
                    {"finish_ms_median", median(finishes)}}
                   .dump()
            << std::endl;
}

void commit_rate(const Args& a) {
  const int64_t n = a.tasks_given ? a.tasks : 500;
  store::Store s = store::Store::open(a.store);
  {
    store::Session session(s, store::Access::Write);
    session.execute(session.render("CREATE TABLE IF NOT EXISTS bench_commits (id {int} PRIMARY KEY, n {int} NOT NULL)"));
    session.execute("INSERT INTO bench_commits (id, n) VALUES (1, 0) ON CONFLICT (id) DO NOTHING");
    session.commit();
  }
  const double t0 = bench::now_s();
  for (int64_t i = 0; i < n; ++i) {
    store::Session session(s, store::Access::RowWrite);
    session.execute("UPDATE bench_commits SET n = n + 1 WHERE id = 1");
    session.commit();
  }
  const double span_s = bench::now_s() - t0;
  std::cout << json{{"bench", "commit"}, {"impl", "loom"}, {"backend", backend(a.store)}, {"commits", n},
                    {"commits_per_s", static_cast<double>(n) / span_s}}
                   .dump()
            << std::endl;
}

// Drains one epoch; returns the samples seen (and touches every batch's bytes).
int64_t epoch(std::shared_ptr<const data::Dataset> ds) {
  data::DataLoader loader(std::move(ds), {.batch_size = 128, .shuffle = true, .seed = 1});
  int64_t n = 0;
  for (const data::Batch& b : loader) n += b.at(0).dim(0);
  return n;
}

void dataset(const Args& a) {
  const std::string images = a.data + "/train-images-idx3-ubyte.gz", labels = a.data + "/train-labels-idx1-ubyte.gz";
  store::Store s = store::Store::open(a.store);
  store::Datasets ds = s.datasets();
  const double ti = bench::now_s();
  const store::DatasetInfo info = ds.import_idx("fashion-train", images, labels);
  const double t_import = bench::now_s() - ti;

  // Best of 3 epochs each, alternating, so that both see the same machine state.
  double best_idx = 1e30, best_store = 1e30;
  int64_t n_idx = 0, n_store = 0;
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = bench::now_s();
    auto idx = std::make_shared<data::TensorDataset>(std::vector<Tensor>{data::read_idx(images), data::read_idx(labels)});
    n_idx = epoch(idx);
    best_idx = std::min(best_idx, bench::now_s() - t0);

    t0 = bench::now_s();
    n_store = epoch(ds.query("fashion-train", info.version));
    best_store = std::min(best_store, bench::now_s() - t0);
  }
  if (n_idx != 60000 || n_store != 60000) throw Error("store_bench: an epoch did not see 60000 samples");
  std::cout << json{{"bench", "dataset"},        {"impl", "loom"},          {"backend", backend(a.store)},
                    {"samples", n_store},        {"import_s", t_import},    {"idx_epoch_s", best_idx},
                    {"store_epoch_s", best_store}, {"store_over_idx_speed", best_idx / best_store}}
                   .dump()
            << std::endl;
}

// The dashboard benchmark's store: training-like curves (loss falling at a rate of the run's
// learning rate, noisy), every value also written to --dump for MLflow.
void ui_fill(const Args& a) {
  store::Store s = store::Store::open(a.store);
  store::Runs runs = s.runs();
  std::mt19937_64 rng(1);
  std::normal_distribution<double> noise(0.0, 0.01);
  const std::vector<std::string> optimizers = {"adam", "sgd", "rmsprop"};
  json dump = json::array();
  const double t0 = bench::now_s();
  for (int64_t r = 0; r < a.runs; ++r) {
    const json hyper = {{"lr", 1e-3 * static_cast<double>(1 + r % 10)}, {"batch_size", 32 << (r % 4)}, {"hidden", 64 << (r % 3)},
                        {"optimizer", optimizers[static_cast<size_t>(r % 3)]}, {"seed", r}};
    std::vector<std::string> tags = {"sweep-" + std::to_string(r / 100)};
    if (r % 10 == 0) tags.push_back("baseline");
    const std::string name = "run-" + std::to_string(r);
    const store::RunInfo run = runs.start("ui-bench", name, hyper.dump(), tags);
    const double rate = 0.02 + 0.01 * static_cast<double>(1 + r % 10);
    json metrics = {{"loss", json::array()}, {"accuracy", json::array()}, {"val_loss", json::array()}, {"val_accuracy", json::array()}};
    for (int64_t e = 0; e < a.epochs; ++e) {
      const double decay = std::exp(-rate * static_cast<double>(e));
      const std::map<std::string, double> m = {{"loss", 2.3 * decay + 0.05 + noise(rng)},
                                               {"accuracy", 0.98 - 0.88 * decay + noise(rng)},
                                               {"val_loss", 2.3 * decay + 0.12 + 2 * noise(rng)},
                                               {"val_accuracy", 0.95 - 0.85 * decay + 2 * noise(rng)}};
      runs.log_epoch(run.id, e, m);
      for (const auto& kv : m) metrics[kv.first].push_back(kv.second);
    }
    runs.finish(run.id);
    dump.push_back({{"id", run.id}, {"name", name}, {"experiment", "ui-bench"}, {"hyper_parameters", hyper}, {"tags", tags}, {"metrics", metrics}});
  }
  const double t_runs = bench::now_s() - t0;
  for (int v = 0; v < 10; ++v) {
    manual_seed(static_cast<uint64_t>(v));
    s.models().save("ui-bench-mlp", mlp(), {{"accuracy", 0.8 + 0.01 * v}}, R"({"hidden": 256})", {"v" + std::to_string(v)},
                    {.task_id = 0, .run_id = dump.empty() ? 0 : dump[static_cast<size_t>(v) % dump.size()]["id"].get<int64_t>()});
  }
  s.models().set_alias("ui-bench-mlp", "production", 3);
  store::DatasetWriter w = s.datasets().create("ui-bench-digits", {.fields = {"image", "label"}});
  for (int64_t i = 0; i < 64; ++i) {
    std::vector<uint8_t> px(28 * 28);
    for (size_t k = 0; k < px.size(); ++k) px[k] = static_cast<uint8_t>((static_cast<size_t>(i) * 7 + k) % 256);
    w.append({.tensors = {{"image", from_vector(px, {1, 28, 28})}, {"label", scalar_tensor(static_cast<double>(i % 10), Int64)}},
              .metadata = R"({"label": )" + std::to_string(i % 10) + "}"});
  }
  w.commit();
  flow::Tasks tasks(s);
  for (int i = 0; i < 100; ++i) tasks.submit(i % 2 ? "train" : "evaluate", json{{"i", i}}.dump());
  for (int i = 0; i < 50; ++i)
    if (auto c = tasks.claim({"train", "evaluate"}, "agent-" + std::to_string(i % 4))) tasks.finish(*c, "{}");
  if (!a.dump.empty()) {
    std::ofstream f(a.dump);
    f << dump.dump();
    if (!f) throw IOError("store_bench: cannot write " + a.dump);
  }
  std::cout << json{{"bench", "ui-fill"}, {"impl", "loom"}, {"backend", backend(a.store)}, {"runs", a.runs}, {"epochs", a.epochs}, {"log_s", t_runs}}.dump()
            << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  try {
    if (a.mode == "registry") registry(a);
    else if (a.mode == "tasks") tasks(a);
    else if (a.mode == "claim") claim_latency(a);
    else if (a.mode == "commit") commit_rate(a);
    else if (a.mode == "dag") dag(a);
    else if (a.mode == "chain") chain(a);
    else if (a.mode == "dataset") dataset(a);
    else if (a.mode == "ui-fill") ui_fill(a);
    else usage("unknown mode " + a.mode);
  } catch (const std::exception& e) {
    std::cerr << "store_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
