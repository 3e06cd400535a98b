// Agents killed at random moments (SIGKILL while claiming, working, heartbeating and reporting)
// and restarted: afterwards every task has finished exactly once in effect — one recorded
// result, from the claim that was current, none lost, none stuck running (docs/workflow.md,
// "Guarantees").
//
// On both backends. Each agent is this test binary re-executed with FlowKill.AgentLoop selected
// and LOOM_FLOW_SOAK_DB (the store's URL) and LOOM_FLOW_SOAK_EFFECTS (the log) set. A task's
// effect is a line "E <task> <token>" appended to the log before its result is reported; an
// accepted result is acknowledged by "A <task> <token>" after finish() returns. Effects of stale
// claims may exist (they are what fencing exists for); only the one whose token the task ended
// with counts. Every other agent claims 4 tasks at a time and records their results with its
// next claims in one transaction (Tasks::complete, as AgentOptions::batch does).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <loom/flow/agent.h>
#include <loom/flow/events.h>
#include <loom/flow/plans.h>
#include <loom/flow/tasks.h>
#include <loom/store/store.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <random>
#include <set>
#include <thread>

#include "unit/flow/flow_test_util.h"

using namespace loom;
using loom_test::TempDir;

extern char** environ;

namespace {

constexpr int64_t kLeaseMs = 200;

void append_line(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const std::string l = line + "\n";
  const ssize_t n = ::write(fd, l.data(), l.size());
  (void)n;
  ::close(fd);
}

// The soak's task: its effect (logged with the claim's token), a little work, its result.
flow::TaskFunction soak_task(const std::string& log, std::mt19937& rng) {
  return [&log, &rng](const std::string&, flow::TaskContext& ctx) {
    const flow::Claim& c = ctx.claim();
    // What the claim saw of its dependencies (plans): "D <task> <token> <dependency> <result>"
    for (const flow::DependencyResult& d : c.dependencies)
      append_line(log, "D " + std::to_string(c.task_id) + " " + std::to_string(c.token) + " " + std::to_string(d.task_id) + " " +
                           (d.result.empty() ? "-" : d.result));
    append_line(log, "E " + std::to_string(c.task_id) + " " + std::to_string(c.token));
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 8));
    return "{\"task\": " + std::to_string(c.task_id) + ", \"token\": " + std::to_string(c.token) + "}";
  };
}

// Claims and runs soak tasks; `until` says when to return (never, in a killed agent). With
// `batch` above 1, claims up to that many at a time and records their results with the next
// claims (Tasks::complete, as a batching Agent::run does), acknowledging each recorded one.
void agent_loop(const std::string& db, const std::string& effects, const std::function<bool(bool idle)>& until, int64_t batch = 1) {
  flow::Tasks tasks(store::Store::open(db));
  flow::Agent agent(tasks, "soak-" + std::to_string(::getpid()));
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  agent.register_kind("soak", soak_task(effects, rng));
  if (batch > 1) {
    const flow::TaskFunction run = soak_task(effects, rng);
    std::vector<flow::TaskEnd> ends;
    for (;;) {
      const flow::Handover h = tasks.complete(ends, {"soak"}, agent.name(), batch);
      for (size_t i = 0; i < ends.size(); ++i)
        if (h.recorded[i]) append_line(effects, "A " + std::to_string(ends[i].claim.task_id) + " " + std::to_string(ends[i].claim.token));
      ends.clear();
      for (const flow::Claim& c : h.claims) {
        flow::TaskContext ctx(c, [&tasks] { return tasks.now_ms(); });
        flow::TaskEnd e;
        e.claim = c;
        e.result = run(c.hyper_parameters, ctx);
        ends.push_back(std::move(e));
      }
      if (h.claims.empty()) {
        if (until(true)) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
  for (;;) {
    const std::optional<flow::Claim> c = tasks.claim({"soak"}, agent.name());
    if (c && agent.execute(*c) == flow::Outcome::Finished)
      append_line(effects, "A " + std::to_string(c->task_id) + " " + std::to_string(c->token));
    if (until(!c)) return;
    if (!c) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

TEST(FlowKill, AgentLoop) {
  const char* db = std::getenv("LOOM_FLOW_SOAK_DB");
  const char* effects = std::getenv("LOOM_FLOW_SOAK_EFFECTS");
  if (!db || !effects) GTEST_SKIP() << "run by FlowKill.KilledAgentsFinishEveryTaskExactlyOnceInEffect";
  const char* batch = std::getenv("LOOM_FLOW_SOAK_BATCH");
  agent_loop(db, effects, [](bool) { return false; }, batch ? std::stoll(batch) : 1);
}

namespace {

// Agent `i` of a soak: the odd ones claim and record in batches of 4 (Tasks::complete).
pid_t start_agent(const std::string& db, const std::string& effects, int i) {
  std::vector<std::string> env{"LOOM_FLOW_SOAK_DB=" + db, "LOOM_FLOW_SOAK_EFFECTS=" + effects, "LOOM_NUM_THREADS=1",
                               "LOOM_FLOW_SOAK_BATCH=" + std::string(i % 2 ? "4" : "1")};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LOOM_FLOW_SOAK_", 15) != 0 && std::strncmp(*e, "LOOM_NUM_THREADS=", 17) != 0) env.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  char arg0[] = "loom_flow_tests", arg1[] = "--gtest_filter=FlowKill.AgentLoop";
  char* argv[] = {arg0, arg1, nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

void kill_agent(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "an agent exited by itself (status " << status << ")";
}

class FlowKill : public loom_test::FlowBackendTest {};

}  // namespace

INSTANTIATE_STORE_BACKENDS(FlowKill);

TEST_P(FlowKill, KilledAgentsFinishEveryTaskExactlyOnceInEffect) {
  const std::string db = url(), effects_log = tmp / "effects";
  flow::Tasks tasks(store::Store::open(db));
  const flow::TaskOptions options{.max_attempts = 1000, .lease_ms = kLeaseMs};
  int64_t submitted = 0;
  auto top_up = [&] {  // keeps the agents busy, so that kills land while they work
    const size_t pending = tasks.list({.status = flow::Status::Pending}).size();
    for (size_t i = pending; i < 40; ++i, ++submitted) tasks.submit("soak", "{}", options);
  };
  top_up();

  constexpr int kAgents = 4, kKills = 200;
  std::vector<pid_t> agents;
  for (int i = 0; i < kAgents; ++i) agents.push_back(start_agent(db, effects_log, i));
  std::mt19937 rng(20240917);
  const auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < kKills; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10 + rng() % 40));
    const size_t i = rng() % kAgents;
    ASSERT_GT(agents[i], 0) << "cannot start an agent";
    kill_agent(agents[i]);
    agents[i] = start_agent(db, effects_log, static_cast<int>(i));
    top_up();
  }
  for (pid_t pid : agents) kill_agent(pid);
  const double kill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const size_t finished_under_kills = tasks.list({.status = flow::Status::Finished}).size();

  // The rest is drained by an agent in this process (expired leases are replayed).
  const auto drain_until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  agent_loop(db, effects_log, [&](bool idle) {
    return (idle && tasks.list({.status = flow::Status::Running}).empty() && tasks.list({.status = flow::Status::Pending}).empty()) ||
           std::chrono::steady_clock::now() > drain_until;
  });

  std::map<int64_t, std::set<int64_t>> effects;  // task -> tokens whose effect happened
  std::map<int64_t, std::vector<int64_t>> acks;  // task -> tokens whose result was accepted
  std::ifstream log(effects_log);
  std::string op;
  int64_t task = 0, token = 0;
  while (log >> op >> task >> token) {
    if (op == "E") effects[task].insert(token);
    else if (op == "A") acks[task].push_back(token);
    else log.ignore(1 << 20, '\n');  // "D": the plan soak's
  }

  const std::vector<flow::TaskInfo> all = tasks.list();
  ASSERT_EQ(static_cast<int64_t>(all.size()), submitted);
  int64_t replayed = 0, stale_effects = 0;
  for (const flow::TaskInfo& t : all) {
    SCOPED_TRACE("task " + std::to_string(t.id));
    ASSERT_EQ(t.status, flow::Status::Finished) << "lost or stuck: " << t.error;
    EXPECT_EQ(t.result, "{\"task\":" + std::to_string(t.id) + ",\"token\":" + std::to_string(t.token) + "}")
        << "the recorded result is not the current claim's";
    EXPECT_TRUE(effects[t.id].count(t.token)) << "the accepted result has no effect behind it";
    EXPECT_LE(acks[t.id].size(), 1u) << "two results were accepted";
    if (!acks[t.id].empty()) EXPECT_EQ(acks[t.id][0], t.token);
    replayed += t.attempts > 1;
    stale_effects += static_cast<int64_t>(effects[t.id].size()) - 1;
  }
  std::printf("flow soak (%s): %d kills of %d agents in %.1f s; %lld tasks, %zu finished under kills, %lld replayed, %lld effects of interrupted attempts\n",
              GetParam().c_str(), kKills + kAgents, kAgents, kill_s, static_cast<long long>(submitted), finished_under_kills, static_cast<long long>(replayed),
              static_cast<long long>(stale_effects));
  EXPECT_GT(finished_under_kills, 0u) << "the agents never got to work: the soak proves little";
  EXPECT_GT(replayed, 0) << "no kill interrupted a task: the soak proves little";
}

// The same kills while plans run: each plan is three roots, a stage depending on all of them and
// a last stage depending on that one. Afterwards every task finished exactly once in effect (as
// above); every claim of a dependent saw each dependency's final result (so none was claimed
// before its dependencies finished); and a subscriber that follows the events throughout,
// restarting from its saved cursor every few events, saw exactly one "finished" per task, in id
// order, with none lost.
TEST_P(FlowKill, KilledAgentsRunPlansInDependencyOrderAndNoEventIsLost) {
  const std::string db = url(), effects_log = tmp / "effects";
  flow::Tasks tasks(store::Store::open(db));
  flow::Plans plans(tasks);
  const flow::TaskOptions options{.max_attempts = 1000, .lease_ms = kLeaseMs};
  int64_t submitted_plans = 0;
  auto top_up = [&] {
    while (tasks.list({.status = flow::Status::Pending}).size() < 30) {
      flow::TaskGraph p{.name = "soak-" + std::to_string(submitted_plans++)};
      for (const char* root : {"a", "b", "c"}) p.tasks.push_back({.name = root, .kind = "soak", .options = options});
      p.tasks.push_back({.name = "join", .kind = "soak", .options = options, .depends_on = {"a", "b", "c"}});
      p.tasks.push_back({.name = "last", .kind = "soak", .options = options, .depends_on = {"join"}});
      plans.submit(p);
    }
  };
  top_up();

  // the subscriber: a thread with a connection of its own, restarted from its cursor every 7 events
  std::mutex m;
  std::vector<flow::TaskEvent> seen;
  std::atomic<bool> stop{false};
  std::thread subscriber([&] {
    flow::Tasks mine(store::Store::open(db));
    int64_t cursor = 0;
    while (!stop.load()) {
      flow::Subscription sub(mine, {.after = cursor, .recheck_ms = 5000});
      for (int n = 0; n < 7 && !stop.load();) {
        std::optional<flow::TaskEvent> e = sub.next(100);
        if (!e) continue;
        std::lock_guard<std::mutex> l(m);
        seen.push_back(*e);
        ++n;
      }
      cursor = sub.cursor();
    }
  });

  constexpr int kAgents = 4, kKills = 60;
  std::vector<pid_t> agents;
  for (int i = 0; i < kAgents; ++i) agents.push_back(start_agent(db, effects_log, i));
  std::mt19937 rng(20261128);
  for (int k = 0; k < kKills; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10 + rng() % 40));
    const size_t i = rng() % kAgents;
    ASSERT_GT(agents[i], 0) << "cannot start an agent";
    kill_agent(agents[i]);
    agents[i] = start_agent(db, effects_log, static_cast<int>(i));
    top_up();
  }
  for (pid_t pid : agents) kill_agent(pid);
  const auto drain_until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  agent_loop(db, effects_log, [&](bool idle) {
    return (idle && tasks.list({.status = flow::Status::Running}).empty() && tasks.list({.status = flow::Status::Pending}).empty()) ||
           std::chrono::steady_clock::now() > drain_until;
  });
  const std::vector<flow::TaskEvent> stored = flow::read_events(tasks, 0);
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30); std::chrono::steady_clock::now() < until;) {
    {
      std::lock_guard<std::mutex> l(m);
      if (seen.size() >= stored.size()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop.store(true);
  subscriber.join();

  std::map<int64_t, std::set<int64_t>> effects;
  std::map<int64_t, std::vector<int64_t>> acks;
  std::map<std::pair<int64_t, int64_t>, std::map<int64_t, std::string>> saw;  // (task, token) -> dependency -> result
  std::ifstream log(effects_log);
  for (std::string line; std::getline(log, line);) {
    std::istringstream in(line);
    std::string op;
    int64_t task = 0, token = 0, dep = 0;
    in >> op >> task >> token;
    if (op == "E") effects[task].insert(token);
    else if (op == "A") acks[task].push_back(token);
    else if (in >> dep) in >> saw[{task, token}][dep];
  }

  const std::vector<flow::TaskInfo> all = tasks.list();
  ASSERT_EQ(static_cast<int64_t>(all.size()), submitted_plans * 5);
  std::map<int64_t, const flow::TaskInfo*> by_id;
  for (const flow::TaskInfo& t : all) by_id[t.id] = &t;
  int64_t replayed = 0, dependent_claims = 0;
  for (const flow::TaskInfo& t : all) {
    SCOPED_TRACE("task " + std::to_string(t.id));
    ASSERT_EQ(t.status, flow::Status::Finished) << "lost or stuck: " << t.error;
    EXPECT_EQ(t.result, "{\"task\":" + std::to_string(t.id) + ",\"token\":" + std::to_string(t.token) + "}");
    EXPECT_TRUE(effects[t.id].count(t.token)) << "the accepted result has no effect behind it";
    EXPECT_LE(acks[t.id].size(), 1u) << "two results were accepted";
    replayed += t.attempts > 1;
    for (int64_t token : effects[t.id]) {  // every claim that ran, interrupted or not
      const auto& deps = saw[{t.id, token}];
      EXPECT_EQ(deps.size(), t.depends_on.size()) << "claim " << token << " did not see every dependency";
      for (const auto& [dep, result] : deps) {
        ++dependent_claims;
        EXPECT_EQ(result, by_id.at(dep)->result) << "claim " << token << " ran before dependency " << dep << " finished";
      }
    }
  }
  std::map<int64_t, int> finished_events;
  for (const flow::TaskEvent& e : stored) {
    EXPECT_EQ(e.kind, flow::EventKind::Finished);
    ++finished_events[e.task_id];
  }
  EXPECT_EQ(finished_events.size(), all.size());
  for (const auto& [id, n] : finished_events) EXPECT_EQ(n, 1) << "task " << id;
  ASSERT_EQ(seen.size(), stored.size()) << "the subscriber lost events";
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].id, stored[i].id) << "event " << i;
  std::printf("flow plan soak (%s): %d kills of %d agents; %lld plans, %zu tasks, %lld replayed, %lld dependency results checked, %zu events followed\n",
              GetParam().c_str(), kKills + kAgents, kAgents, static_cast<long long>(submitted_plans), all.size(),
              static_cast<long long>(replayed), static_cast<long long>(dependent_claims), seen.size());
  EXPECT_GT(replayed, 0) << "no kill interrupted a task: the soak proves little";
}
