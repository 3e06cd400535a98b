// Agents (docs/workflow.md): function kinds and command kinds (child processes through
// /bin/sh) with exceptions, crashes, non-zero exits, bad JSON output, timeouts and
// cancellation; the agent survives them all.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/flow/agent.h>
#include <loom/flow/plans.h>
#include <loom/flow/tasks.h>
#include <loom/store/store.h>

#include <chrono>
#include <deque>
#include <thread>

#include "unit/flow/flow_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::FreshStore;
using flow::Outcome;
using flow::Status;

namespace {

flow::Command sh(const std::string& script) { return {.argv = {"/bin/sh", "-c", script}}; }

}  // namespace

class FlowAgent : public loom_test::FlowBackendTest {};
INSTANTIATE_STORE_BACKENDS(FlowAgent);

TEST_P(FlowAgent, RunsFunctionKindsUntilIdle) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(tasks.submit("double", "{\"x\": " + std::to_string(i) + "}"));
  const int64_t untouched = tasks.submit("other");
  flow::Agent agent(tasks, "test-agent");
  agent.register_kind("double", [](const std::string& hyper, flow::TaskContext& ctx) {
    const size_t colon = hyper.find(':');
    const int x = std::stoi(hyper.substr(colon + 1));
    return "{\"y\": " + std::to_string(2 * x) + ", \"token\": " + std::to_string(ctx.claim().token) + "}";
  });
  EXPECT_EQ(agent.run({.stop_when_idle = true}), 3);
  for (int i = 0; i < 3; ++i) {
    const flow::TaskInfo t = tasks.get(ids[i]);
    EXPECT_EQ(t.status, Status::Finished);
    EXPECT_EQ(t.result, "{\"token\":1,\"y\":" + std::to_string(2 * i) + "}");
    EXPECT_EQ(t.agent, "test-agent");
  }
  EXPECT_EQ(tasks.get(untouched).status, Status::Pending);
  tasks.submit("double", R"({"x": 5})");
  tasks.submit("double", R"({"x": 6})");
  EXPECT_EQ(agent.run({.stop_when_idle = true, .max_tasks = 1}), 1);
}

TEST_P(FlowAgent, ExceptionsAndBadResultsAreFailedAttempts) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  const int64_t throws = tasks.submit("throws", "{}", {.max_attempts = 2});
  const int64_t bad = tasks.submit("bad", "{}", {.max_attempts = 1});
  flow::Agent agent(tasks);
  int calls = 0;
  agent.register_kind("throws", [&](const std::string&, flow::TaskContext& ctx) -> std::string {
    ++calls;
    throw std::runtime_error("attempt " + std::to_string(ctx.claim().attempt) + " broke");
  });
  agent.register_kind("bad", [](const std::string&, flow::TaskContext&) { return std::string("{not json"); });
  EXPECT_EQ(agent.run({.stop_when_idle = true}), 3);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(tasks.get(throws).status, Status::Failed);
  EXPECT_EQ(tasks.get(throws).error, "attempt 2 broke");
  EXPECT_EQ(tasks.get(bad).status, Status::Failed);
  EXPECT_TRUE(contains_all(tasks.get(bad).error, {"not JSON"}));
}

TEST_P(FlowAgent, TimeoutAndCancellationStopAFunction) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  const int64_t slow = tasks.submit("wait", "{}", {.priority = 1, .max_attempts = 1, .timeout_ms = 150});
  const int64_t cancelled = tasks.submit("wait", "{}", {.lease_ms = 60});
  flow::Agent agent(tasks);
  agent.register_kind("wait", [](const std::string&, flow::TaskContext& ctx) {
    const auto start = std::chrono::steady_clock::now();
    while (!ctx.should_stop() && std::chrono::steady_clock::now() - start < std::chrono::seconds(20))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return std::string("{}");
  });
  const auto start = std::chrono::steady_clock::now();
  auto c = tasks.claim({"wait"}, agent.name());
  ASSERT_EQ(c->task_id, slow);
  EXPECT_EQ(agent.execute(*c), Outcome::Failed);
  EXPECT_EQ(tasks.get(slow).status, Status::Failed);
  EXPECT_TRUE(contains_all(tasks.get(slow).error, {"timed out after 150 ms"}));

  c = tasks.claim({"wait"}, agent.name());
  ASSERT_EQ(c->task_id, cancelled);
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    tasks.cancel(cancelled);
  });
  EXPECT_EQ(agent.execute(*c), Outcome::Cancelled) << "the heartbeat saw the cancellation";
  canceller.join();
  EXPECT_EQ(tasks.get(cancelled).status, Status::Cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST_P(FlowAgent, CommandKindReadsHyperParametersAndPrintsTheResult) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  const int64_t echo = tasks.submit("echo", R"({"lr": 0.25})");
  const int64_t env = tasks.submit("env", "{}");
  const int64_t file = tasks.submit("file", R"({"n": 3})");
  flow::Agent agent(tasks);
  agent.register_command("echo", sh("cat"));
  agent.register_command("env", sh(R"(printf '{"id": %s, "token": %s, "attempt": %s}' "$LOOM_TASK_ID" "$LOOM_TASK_TOKEN" "$LOOM_TASK_ATTEMPT")"));
  agent.register_command("file", sh(R"(cat "$LOOM_TASK_HYPER_PARAMETERS"; echo "some log" >&2)"));
  EXPECT_EQ(agent.run({.stop_when_idle = true}), 3);
  EXPECT_EQ(tasks.get(echo).result, R"({"lr":0.25})");
  EXPECT_EQ(tasks.get(env).result, "{\"attempt\":1,\"id\":" + std::to_string(env) + ",\"token\":1}");
  EXPECT_EQ(tasks.get(file).result, R"({"n":3})");
  for (int64_t id : {echo, env, file}) EXPECT_EQ(tasks.get(id).status, Status::Finished);
}

// A command that closes its stdout and stderr before it exits (coreutils' cat does, at exit)
// has not ended yet: the agent waits for its exit instead of killing it at end of file.
TEST_P(FlowAgent, CommandThatClosesItsOutputBeforeExitingIsWaitedFor) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  const int64_t id = tasks.submit("closes", "{}", {.max_attempts = 1});
  flow::Agent agent(tasks);
  agent.register_command("closes", sh(R"(echo '{"ok": 1}'; exec >&- 2>&-; sleep 0.3; exit 0)"));
  EXPECT_EQ(agent.run({.stop_when_idle = true}), 1);
  EXPECT_EQ(tasks.get(id).status, Status::Finished) << tasks.get(id).error;
  EXPECT_EQ(tasks.get(id).result, R"({"ok":1})");
}

TEST_P(FlowAgent, CommandFailuresNeverTakeTheAgentDown) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  const flow::TaskOptions once{.max_attempts = 1};
  const int64_t crash = tasks.submit("crash", "{}", once);
  const int64_t exit3 = tasks.submit("exit3", "{}", once);
  const int64_t garbage = tasks.submit("garbage", "{}", once);
  const int64_t silent = tasks.submit("silent", "{}", once);
  const int64_t missing = tasks.submit("missing", "{}", once);
  const int64_t flood = tasks.submit("flood", "{}", once);
  const int64_t ok = tasks.submit("ok", "{}", {.priority = -1});  // last: the agent is still alive
  flow::Agent agent(tasks);
  agent.register_command("crash", sh("echo about to crash >&2; kill -SEGV $$"));
  agent.register_command("exit3", sh("echo something went wrong >&2; exit 3"));
  agent.register_command("garbage", sh("echo this is not json"));
  agent.register_command("silent", sh("true"));
  agent.register_command("missing", {.argv = {"/nonexistent/loom-task"}});
  agent.register_command("flood", {.argv = {"/bin/sh", "-c", "yes"}, .max_output_bytes = 1000});
  agent.register_command("ok", sh("echo '[1, 2]'"));
  EXPECT_EQ(agent.run({.stop_when_idle = true}), 7);
  auto error = [&](int64_t id) {
    EXPECT_EQ(tasks.get(id).status, Status::Failed) << id;
    return tasks.get(id).error;
  };
  EXPECT_TRUE(contains_all(error(crash), {"command '/bin/sh'", "killed by signal 11", "about to crash"}));
  EXPECT_TRUE(contains_all(error(exit3), {"exited with status 3", "stderr: something went wrong"}));
  EXPECT_TRUE(contains_all(error(garbage), {"printed no JSON result", "this is not json"}));
  EXPECT_TRUE(contains_all(error(silent), {"printed no JSON result"}));
  EXPECT_TRUE(contains_all(error(missing), {"/nonexistent/loom-task"}));
  EXPECT_TRUE(contains_all(error(flood), {"more than 1000 bytes"}));
  EXPECT_EQ(tasks.get(ok).status, Status::Finished);
  EXPECT_EQ(tasks.get(ok).result, "[1,2]");
}

TEST_P(FlowAgent, CommandTimeoutAndCancellationKillTheProcessGroup) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  const std::string marker = tmp / "survivor";
  // a grandchild that would write the marker if it outlived the kill
  const std::string script = "(sleep 1; touch '" + marker + "') & sleep 30";
  const int64_t slow = tasks.submit("slow", "{}", {.max_attempts = 1, .timeout_ms = 200});
  flow::Agent agent(tasks);
  agent.register_command("slow", sh(script));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(agent.run({.stop_when_idle = true}), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(contains_all(tasks.get(slow).error, {"timed out after 200 ms"}));

  const int64_t cancelled = tasks.submit("slow", "{}", {.lease_ms = 60});
  auto c = tasks.claim({"slow"}, agent.name());
  ASSERT_EQ(c->task_id, cancelled);
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    tasks.cancel(cancelled);
  });
  EXPECT_EQ(agent.execute(*c), Outcome::Cancelled);
  canceller.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  EXPECT_FALSE(std::filesystem::exists(marker)) << "a grandchild outlived the kill";
}

TEST_P(FlowAgent, BadRegistrationsAndKinds) {
  FreshStore fs(url());
  flow::Agent agent(flow::Tasks(fs.store));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { agent.run(); }), {"no task kinds"}));
  agent.register_kind("a", [](const std::string&, flow::TaskContext&) { return std::string("1"); });
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { agent.register_command("a", sh("true")); }), {"'a'", "already registered"}));
  EXPECT_THROW(agent.register_kind("b c", [](const std::string&, flow::TaskContext&) { return std::string("1"); }), ValueError);
  EXPECT_THROW(agent.register_kind("b", nullptr), ValueError);
  EXPECT_THROW(agent.register_command("b", {}), ValueError);
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { agent.run({.kinds = {"a", "train"}}); }),
                           {"unknown task kind 'train'", "registered: a"}));
}

// Idle agents and waiters are woken by the commits that concern them (docs/workflow.md,
// "Notifications"), not by their poll interval: every interval here is an hour, so only the
// wakes can finish the test within its deadline. A submission wakes the first agent; the first
// stage's finish, committed by that agent, wakes the second (which alone runs the second
// stage); the ends wake Plans::wait and Tasks::wait.
TEST_P(FlowAgent, IdleAgentsAndWaitersWakeOnCommitsNotOnTheirPollInterval) {
  FreshStore fs(url());
  constexpr int64_t kHour = 3'600'000;
  std::deque<flow::Agent> agents;  // not movable: they stay where they are made
  for (const std::string kind : {"first", "second"}) {
    agents.emplace_back(flow::Tasks(store::Store::open(url())), kind + "-agent");  // a handle each, as another process has
    agents.back().register_kind(kind, [](const std::string&, flow::TaskContext& ctx) {
      return "{\"by\": " + std::to_string(ctx.claim().task_id) + "}";
    });
  }
  std::vector<std::thread> running;
  for (flow::Agent& agent : agents) running.emplace_back([&agent] { agent.run({.poll_ms = kHour}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // both past their first claim, waiting

  flow::Tasks tasks(fs.store);
  flow::Plans plans(tasks);
  const auto start = std::chrono::steady_clock::now();
  const int64_t plan = plans.submit({.name = "two stages", .tasks = {{.name = "a", .kind = "first"},
                                                                     {.name = "b", .kind = "second", .depends_on = {"a"}}}});
  const flow::PlanInfo p = plans.wait(plan, 20'000, kHour);
  const double plan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(p.status, Status::Finished) << "an idle agent slept through a submission or a release";
  EXPECT_LT(plan_s, 19.0) << "Plans::wait slept through the ends";

  const int64_t a = tasks.submit("first"), b = tasks.submit("second");
  const std::vector<flow::TaskInfo> ended = tasks.wait({a, b}, 20'000, kHour);
  EXPECT_EQ(ended[0].status, Status::Finished);
  EXPECT_EQ(ended[1].status, Status::Finished);
  EXPECT_EQ(ended[1].agent, "second-agent");
  for (flow::Agent& agent : agents) agent.stop();  // seen within 10 ms
  for (std::thread& t : running) t.join();
}
