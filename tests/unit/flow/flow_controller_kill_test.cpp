// Stream controllers killed at random moments (SIGKILL while reading, deciding, submitting) and
// restarted, two of them always running the same controller, while this process pushes dataset
// versions and agents (FlowKill.AgentLoop, killed too) run the tasks: afterwards every committed
// version is in exactly one batch or still pending (fewer samples than a batch needs), every
// batch has exactly one plan of two tasks, the second depending on the first (read from the
// tasks' own hyper-parameters, not the controller's records), no second stage started before
// its first finished, and every task finished exactly once in effect (docs/workflow.md,
// "Guarantees").
//
// On both backends. A controller is this test binary re-executed with
// FlowControllerKill.ControllerLoop selected and LOOM_FLOW_SOAK_DB set.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <loom/flow/agent.h>
#include <loom/flow/controllers.h>
#include <loom/flow/tasks.h>
#include <loom/ops/creation.h>
#include <loom/store/datasets.h>
#include <loom/store/store.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "unit/flow/flow_test_util.h"

using namespace loom;

extern char** environ;

namespace {

constexpr const char* kController = "soak";
constexpr int64_t kMinSamples = 5;

pid_t spawn_child(const std::string& filter, const std::vector<std::string>& vars) {
  std::vector<std::string> env = vars;
  env.emplace_back("LOOM_NUM_THREADS=1");
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LOOM_FLOW_SOAK_", 15) != 0 && std::strncmp(*e, "LOOM_NUM_THREADS=", 17) != 0) env.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string arg0 = "loom_flow_tests", arg1 = "--gtest_filter=" + filter;
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

pid_t start_controller(const std::string& db) {
  return spawn_child("FlowControllerKill.ControllerLoop", {"LOOM_FLOW_SOAK_DB=" + db});
}
pid_t start_agent(const std::string& db, const std::string& effects) {
  return spawn_child("FlowKill.AgentLoop", {"LOOM_FLOW_SOAK_DB=" + db, "LOOM_FLOW_SOAK_EFFECTS=" + effects});
}

void kill_child(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "a child exited by itself (status " << status << ")";
}

class FlowControllerKill : public loom_test::FlowBackendTest {};

}  // namespace

TEST(FlowControllerKill, ControllerLoop) {
  const char* db = std::getenv("LOOM_FLOW_SOAK_DB");
  if (!db) GTEST_SKIP() << "run by FlowControllerKill.KilledControllersSubmitEveryBatchExactlyOnce";
  flow::Tasks tasks(store::Store::open(db));
  flow::Controllers(tasks).run(kController, [] { return false; }, 50);
}

INSTANTIATE_STORE_BACKENDS(FlowControllerKill);

TEST_P(FlowControllerKill, KilledControllersSubmitEveryBatchExactlyOnce) {
  const std::string db = url(), effects_log = tmp / "effects";
  store::Store s = store::Store::open(db);
  flow::Tasks tasks(s);
  flow::Controllers controllers(tasks);
  flow::TaskGraph two_stages{.name = "soak", .tasks = {}};
  for (const char* stage : {"first", "second"}) {
    two_stages.tasks.push_back({.name = stage, .kind = "soak"});
    two_stages.tasks.back().options.max_attempts = 1000;
    two_stages.tasks.back().options.lease_ms = 200;
  }
  two_stages.tasks[1].depends_on = {"first"};
  controllers.create({.name = kController, .dataset = "stream", .min_samples = kMinSamples, .plan = two_stages});

  constexpr int kControllers = 2, kAgents = 2, kKills = 96;
  std::vector<pid_t> running, agents;
  for (int i = 0; i < kControllers; ++i) running.push_back(start_controller(db));
  for (int i = 0; i < kAgents; ++i) agents.push_back(start_agent(db, effects_log));
  std::mt19937 rng(20261128);
  int64_t pushed = 0, versions = 0;
  int controller_kills = 0, agent_kills = 0;
  const auto start = std::chrono::steady_clock::now();
  // a version of 1 to 4 samples, then a kill wait_ms later, of a controller three times in four
  const auto push_then_kill = [&](int64_t wait_ms) {
    store::DatasetWriter w = s.datasets().create("stream", {.fields = {"x"}});
    const int64_t n = 1 + static_cast<int64_t>(rng() % 4);
    for (int64_t i = 0; i < n; ++i) w.append({.tensors = {{"x", ones({2})}}});
    w.commit();
    pushed += n;
    ++versions;
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    if (rng() % 4 != 0) {
      const size_t i = rng() % kControllers;
      ASSERT_GT(running[i], 0) << "cannot start a controller";
      kill_child(running[i]);
      running[i] = start_controller(db);
      ++controller_kills;
    } else {
      const size_t i = rng() % kAgents;
      ASSERT_GT(agents[i], 0) << "cannot start an agent";
      kill_child(agents[i]);
      agents[i] = start_agent(db, effects_log);
      ++agent_kills;
    }
  };
  // kills 0 to 30 ms apart land in every phase of a controller's work
  for (int k = 0; k < kKills && !HasFatalFailure(); ++k) push_then_kill(static_cast<int64_t>(rng() % 30));
  // Where processes start slower than that (the sanitized build beside other tests: 2 batches in
  // 96 kills), the controllers have barely worked: kills go on, each a longer wait after its
  // version (100 ms doubling to 1.6 s, 30 s at most), until they have submitted five batches.
  const auto slow_until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int64_t wait_ms = 100; !HasFatalFailure() && controllers.get(kController).batches < 5 && std::chrono::steady_clock::now() < slow_until;
       wait_ms = std::min<int64_t>(2 * wait_ms, 1600))
    push_then_kill(wait_ms);
  if (HasFatalFailure()) return;
  // the last versions are taken by the controllers still running, then everyone is killed
  const auto settle = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (controllers.get(kController).pending_samples >= kMinSamples && std::chrono::steady_clock::now() < settle)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (pid_t pid : running) kill_child(pid);
  for (pid_t pid : agents) kill_child(pid);
  const double kill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // the tasks drained here (expired leases of killed agents reclaimed)
  flow::Agent agent(tasks, "drain");
  agent.register_kind("soak", [&](const std::string&, flow::TaskContext& ctx) {
    for (const flow::DependencyResult& d : ctx.claim().dependencies)  // as FlowKill.AgentLoop's tasks log them
      std::ofstream(effects_log, std::ios::app) << "D " << ctx.claim().task_id << " " << ctx.claim().token << " " << d.task_id << " "
                                                << (d.result.empty() ? "-" : d.result) << "\n";
    std::ofstream(effects_log, std::ios::app) << "E " << ctx.claim().task_id << " " << ctx.claim().token << "\n";
    return "{\"task\": " + std::to_string(ctx.claim().task_id) + ", \"token\": " + std::to_string(ctx.claim().token) + "}";
  });
  const auto drain_until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < drain_until) {
    const std::optional<flow::Claim> c = tasks.claim({"soak"}, agent.name());
    if (c) agent.execute(*c);
    else if (tasks.list({.status = flow::Status::Running}).empty() && tasks.list({.status = flow::Status::Pending}).empty()) break;
    else std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  std::map<int64_t, std::set<int64_t>> effects;
  std::map<std::pair<int64_t, int64_t>, std::map<int64_t, std::string>> saw;  // (task, token) -> dependency -> its result
  {
    std::ifstream log(effects_log);
    for (std::string line; std::getline(log, line);) {
      std::istringstream in(line);
      std::string op;
      int64_t task = 0, token = 0, dep = 0;
      if (!(in >> op >> task >> token)) continue;
      if (op == "E") effects[task].insert(token);
      else if (op == "D" && in >> dep) in >> saw[{task, token}][dep];
    }
  }
  // Every batch, from the tasks themselves.
  std::map<int64_t, int> version_batches;
  std::map<int64_t, std::map<std::string, flow::TaskInfo>> batch_tasks;  // batch -> stage -> task
  int64_t in_batches = 0;
  const std::vector<flow::TaskInfo> all = tasks.list();
  for (const flow::TaskInfo& t : all) {
    SCOPED_TRACE("task " + std::to_string(t.id));
    const nlohmann::json stream = nlohmann::json::parse(t.hyper_parameters)["stream"];
    const int64_t batch = stream["batch"].get<int64_t>();
    EXPECT_TRUE(batch_tasks[batch].emplace(t.name, t).second) << "two " << t.name << " tasks for batch " << batch;
    ASSERT_EQ(t.status, flow::Status::Finished) << "lost or stuck: " << t.error;
    EXPECT_TRUE(effects[t.id].count(t.token)) << "the accepted result has no effect behind it";
    if (t.name != "first") continue;
    for (int64_t v : stream["versions"].get<std::vector<int64_t>>()) ++version_batches[v];
    in_batches += stream["samples"].get<int64_t>();
    EXPECT_GE(stream["samples"].get<int64_t>(), kMinSamples) << "a batch triggered before it was significant";
  }
  std::set<int64_t> batch_numbers;
  for (const auto& [batch, stages] : batch_tasks) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    batch_numbers.insert(batch);
    ASSERT_EQ(stages.size(), 2u) << "a plan lost a stage";
    const flow::TaskInfo &first = stages.at("first"), &second = stages.at("second");
    EXPECT_EQ(first.plan_id, second.plan_id);
    EXPECT_GT(first.plan_id, 0);
    EXPECT_EQ(second.depends_on, std::vector<int64_t>{first.id});
    for (int64_t token : effects[second.id])  // every claim of the second stage that ran saw the first's final result
      EXPECT_EQ(saw[std::make_pair(second.id, token)][first.id], first.result) << "claim " << token << " of the second stage ran before the first finished";
  }
  const flow::ControllerInfo info = controllers.get(kController);
  EXPECT_EQ(static_cast<int64_t>(all.size()), 2 * info.batches) << "one plan of two tasks per batch";
  EXPECT_EQ(static_cast<int64_t>(batch_numbers.size()), info.batches);
  if (!batch_numbers.empty()) EXPECT_EQ(*batch_numbers.rbegin(), info.batches) << "batches numbered 1, 2, ... without a gap";
  for (const auto& [v, n] : version_batches) EXPECT_EQ(n, 1) << "version " << v << " in " << n << " batches";
  EXPECT_EQ(static_cast<int64_t>(version_batches.size()) + info.pending_versions, versions) << "a version lost";
  EXPECT_EQ(in_batches + info.pending_samples, pushed) << "samples lost";
  EXPECT_LT(info.pending_samples, kMinSamples) << "a significant batch was never submitted";
  std::printf("controller soak (%s): %d kills (%d of controllers, %d of agents) in %.1f s; %lld versions, %lld samples, %zu batches\n",
              GetParam().c_str(), controller_kills + agent_kills + kControllers + kAgents, controller_kills + kControllers,
              agent_kills + kAgents, kill_s, static_cast<long long>(versions), static_cast<long long>(pushed), batch_numbers.size());
  // about 35 on an idle 2-core machine, 9 with three other soaks beside it
  EXPECT_GE(batch_numbers.size(), 5u) << "the controllers never got to work: the soak proves little";
}
