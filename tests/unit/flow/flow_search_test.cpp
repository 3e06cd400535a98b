// Intermediate reports, ASHA and flow::search (docs/workflow.md, "Search"), on SQLite and
// PostgreSQL: reports are fenced and persisted; ASHA's decisions follow Ray Tune's rule (the
// (1 - 1/eta) quantile of the rung's values so far, computed here by hand) and repeat for a
// replayed attempt; a search run by agents ends every trial, stops poor ones early and spends
// fewer steps than running every trial to the end.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/flow/agent.h>
#include <loom/flow/reports.h>
#include <loom/flow/search.h>
#include <loom/flow/tasks.h>
#include <loom/store/error.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <thread>

#include "unit/flow/flow_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using loom_test::FreshStore;
using loom_test::ManualClock;
using flow::Decision;

class FlowSearch : public loom_test::FlowBackendTest {};
INSTANTIATE_STORE_BACKENDS(FlowSearch);

namespace {

std::string count(const std::string& url, const std::string& table) {
  return loom_test::raw_sql(url, "SELECT COUNT(*) FROM " + table).at(0);
}

}  // namespace

TEST_P(FlowSearch, ReportsAreFencedPersistedAndReplaced) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  flow::Reports reports(fs.store, t.clock());
  const int64_t id = tasks.submit("train", "{}", {.max_attempts = 3, .lease_ms = 1000});
  const flow::Claim first = *tasks.claim({"train"}, "a");
  EXPECT_EQ(reports.report(first, 1, 0.5), Decision::Continue);  // not in a search: always go on
  EXPECT_EQ(reports.report(first, 2, 0.25), Decision::Continue);
  EXPECT_THROW(reports.report(first, 0, 1.0), ValueError);
  EXPECT_THROW(reports.report(first, 3, NAN), ValueError);
  EXPECT_THROW(reports.report(first, 3, INFINITY), ValueError);
  // The agent dies: its lease expires and another attempt reports step 1 again.
  t.advance(2000);
  const flow::Claim second = *tasks.claim({"train"}, "b");
  EXPECT_EQ(second.token, 2);
  EXPECT_THROW(reports.report(first, 3, 0.1), flow::ClaimLostError);
  EXPECT_EQ(reports.report(second, 1, 0.75), Decision::Continue);
  const std::vector<flow::Report> r = reports.list(id);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].step, 1);
  EXPECT_DOUBLE_EQ(r[0].value, 0.75);
  EXPECT_EQ(r[0].token, 2);
  EXPECT_EQ(r[1].step, 2);
  EXPECT_DOUBLE_EQ(r[1].value, 0.25);
  EXPECT_EQ(r[1].token, 1);
  EXPECT_EQ(count(url(), "task_reports"), "2");
  tasks.finish(second, "{}");
  EXPECT_THROW(reports.report(second, 3, 0.1), flow::ClaimLostError);
  EXPECT_THROW(reports.list(id + 1), store::NotFoundError);
}

TEST_P(FlowSearch, AshaFollowsTheRungQuantileAndRepeatsDecisionsOnReplay) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  flow::Reports reports(fs.store, t.clock());
  flow::SearchSpace space;
  space.categorical("q", {"0", "1", "2", "3"});
  flow::GridSampler grid;
  // The search runs in a thread of its own; this thread plays the agents, claiming all four
  // trials and reporting in a chosen order. Rungs at 1, 3 and 9 (r = 1, eta = 3, R = 9).
  flow::SearchInfo done;
  std::thread driver([&] {
    done = flow::search(tasks, space, grid,
                        {.kind = "trial", .metric = "accuracy", .mode = flow::Mode::Maximize, .n_trials = 4, .max_concurrent_trials = 4,
                         .asha = flow::Asha{.min_resource = 1, .max_resource = 9, .reduction_factor = 3},
                         .task_options = {.max_attempts = 2, .lease_ms = 1000}, .poll_ms = 5});
  });
  std::map<int, flow::Claim> c;  // by q
  while (c.size() < 4) {
    if (auto claim = tasks.claim({"trial"}, "a"))
      c[nlohmann::json::parse(claim->hyper_parameters)["q"].get<int>()] = *claim;
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Rung 1: the first value goes on; then each against the 2/3 quantile (numpy's linear
  // interpolation) of the values already there.
  EXPECT_EQ(reports.report(c[0], 1, 0.5), Decision::Continue);  // nothing recorded yet
  EXPECT_EQ(reports.report(c[1], 1, 0.9), Decision::Continue);  // quantile of {0.5}: 0.5
  EXPECT_EQ(reports.report(c[2], 1, 0.1), Decision::Stop);      // of {0.5, 0.9}: 0.7667
  EXPECT_EQ(reports.report(c[3], 1, 0.8), Decision::Continue);  // of {0.1, 0.5, 0.9}: 0.6333
  EXPECT_EQ(reports.report(c[0], 2, 0.55), Decision::Continue); // no rung at 2
  // Rung 3.
  EXPECT_EQ(reports.report(c[0], 3, 0.6), Decision::Continue);
  EXPECT_EQ(reports.report(c[1], 3, 0.7), Decision::Continue);  // of {0.6}
  EXPECT_EQ(reports.report(c[3], 5, 0.65), Decision::Stop);     // step 5 reaches rung 3; of {0.6, 0.7}: 0.6667
  // Every agent dies (the clock passes the leases): the replayed attempts get the decisions
  // recorded at the rungs they reach again, even with better values, and the stale claims can
  // report nothing.
  t.advance(2000);
  std::map<int, flow::Claim> again;
  while (auto claim = tasks.claim({"trial"}, "b")) again[nlohmann::json::parse(claim->hyper_parameters)["q"].get<int>()] = *claim;
  ASSERT_EQ(again.size(), 4u);
  EXPECT_THROW(reports.report(c[2], 1, 0.95), flow::ClaimLostError);
  EXPECT_EQ(reports.report(again[2], 1, 0.95), Decision::Stop);
  EXPECT_EQ(reports.report(again[3], 3, 0.99), Decision::Stop);
  EXPECT_EQ(reports.report(again[0], 3, 0.6), Decision::Continue);
  // Rung 9 = max_resource: the first trial there goes on by the rule, but its budget is spent.
  EXPECT_EQ(reports.report(again[1], 9, 0.92), Decision::Stop);
  tasks.finish(again[1], R"({"accuracy": 0.92})");
  tasks.finish(again[0], R"({"accuracy": 0.61})");  // returned on its own at step 3: completed
  tasks.finish(again[2], R"({"accuracy": 0.95})");
  tasks.finish(again[3], "{}");  // no metric: the last report of the attempt that finished counts
  driver.join();
  ASSERT_EQ(done.trials.size(), 4u);
  EXPECT_EQ(done.sampler, "grid");
  EXPECT_EQ(done.trials[0].params, R"({"q":0})");
  EXPECT_EQ(done.trials[0].state, flow::TrialState::Completed);
  EXPECT_EQ(done.trials[1].state, flow::TrialState::Completed);
  EXPECT_EQ(done.trials[2].state, flow::TrialState::Stopped);
  EXPECT_EQ(done.trials[3].state, flow::TrialState::Stopped);
  EXPECT_DOUBLE_EQ(*done.trials[3].value, 0.99);
  EXPECT_EQ(done.trials[1].steps, 9);
  EXPECT_EQ(done.trials[3].steps, 3);  // not the lost attempt's step 5
  EXPECT_EQ(done.total_steps(), 3 + 9 + 1 + 3);
  // The best completed trial, though a stopped one reported more.
  ASSERT_NE(done.best_trial(), nullptr);
  EXPECT_EQ(done.best_trial()->number, 1);
  EXPECT_EQ(flow::get_search(tasks, done.id).trials.size(), 4u);
  EXPECT_EQ(flow::list_searches(tasks).size(), 1u);
}

TEST_P(FlowSearch, AgentsRunASearchAndAshaSavesSteps) {
  // Trials minimise (x - 0.3)^2 + 1/step (a loss that falls with steps); 16 trials of up to
  // 9 steps by 2 agents, TPE after 6 random ones.
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  std::vector<std::thread> agents;
  std::vector<std::unique_ptr<flow::Agent>> owned;
  for (int i = 0; i < 2; ++i) {
    owned.push_back(std::make_unique<flow::Agent>(tasks, "agent-" + std::to_string(i)));
    owned.back()->register_kind("quad", [](const std::string& hyper, flow::TaskContext& ctx) {
      const nlohmann::json h = nlohmann::json::parse(hyper);
      const double x = h["x"].get<double>();
      double loss = 0;
      for (int64_t step = 1; step <= h["steps"].get<int64_t>(); ++step) {
        loss = (x - 0.3) * (x - 0.3) + 1.0 / static_cast<double>(step);
        if (ctx.report(step, loss) == Decision::Stop) break;
      }
      return nlohmann::json{{"loss", loss}}.dump();
    });
  }
  for (auto& a : owned) agents.emplace_back([&a] { a->run({.poll_ms = 5}); });
  flow::SearchSpace space;
  space.uniform("x", -2, 2);
  flow::TPESampler tpe({.n_startup_trials = 6, .seed = 3});
  const flow::SearchInfo s = flow::search(tasks, space, tpe,
                                          {.name = "quad", .kind = "quad", .metric = "loss", .n_trials = 16, .max_concurrent_trials = 2,
                                           .hyper_parameters = R"({"steps": 9})", .asha = flow::Asha{.min_resource = 1, .max_resource = 9},
                                           .poll_ms = 5});
  // A budget of 40 steps: as many random trials as fit, never more steps.
  flow::RandomSampler random(4);
  const flow::SearchInfo b = flow::search(tasks, space, random,
                                          {.kind = "quad", .metric = "loss", .n_trials = 1000, .max_concurrent_trials = 2,
                                           .hyper_parameters = R"({"steps": 9})", .asha = flow::Asha{.min_resource = 1, .max_resource = 9},
                                           .step_budget = 40, .poll_ms = 5});
  for (auto& a : owned) a->stop();
  for (auto& th : agents) th.join();
  EXPECT_LE(b.total_steps(), 40);
  EXPECT_GE(b.trials.size(), 4u);
  EXPECT_LT(b.trials.size(), 40u);
  for (const flow::TrialInfo& tr : b.trials) EXPECT_TRUE(tr.state == flow::TrialState::Completed || tr.state == flow::TrialState::Stopped);
  std::printf("budget 40: %zu trials, %lld steps\n", b.trials.size(), static_cast<long long>(b.total_steps()));
  ASSERT_EQ(s.trials.size(), 16u);
  int stopped = 0;
  double best_completed = INFINITY;
  for (const flow::TrialInfo& tr : s.trials) {
    EXPECT_TRUE(tr.state == flow::TrialState::Completed || tr.state == flow::TrialState::Stopped) << trial_state_name(tr.state);
    ASSERT_TRUE(tr.value);
    EXPECT_EQ(nlohmann::json::parse(tasks.get(tr.task_id).hyper_parameters)["steps"], 9);
    if (tr.state == flow::TrialState::Stopped) {
      ++stopped;
      EXPECT_LT(tr.steps, 9);
    } else {
      EXPECT_EQ(tr.steps, 9);
      best_completed = std::min(best_completed, *tr.value);
    }
  }
  EXPECT_GT(stopped, 0);
  EXPECT_LT(s.total_steps(), 16 * 9);
  ASSERT_NE(s.best_trial(), nullptr);
  EXPECT_EQ(*s.best_trial()->value, best_completed);
  const double x = nlohmann::json::parse(s.best_trial()->params)["x"].get<double>();
  std::printf("%d of 16 trials stopped early, %lld steps of %d, best x %.3f loss %.4f\n", stopped,
              static_cast<long long>(s.total_steps()), 16 * 9, x, *s.best_trial()->value);
  EXPECT_LT(std::abs(x - 0.3), 0.5);
}

// Command trials (child processes) report "STEP VALUE" lines on descriptor 3: the reports are
// recorded, and ASHA's Stop ends a child with SIGTERM; a child that prints JSON on its way out
// has that as its result, its value being its last report ((x - 0.3)^2 + 1/step, computed here).
TEST_P(FlowSearch, CommandTrialsReportAndAshaStopsThem) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  flow::Agent agent(tasks, "command-agent");
  agent.register_command("quad", {.argv = {"/bin/sh", "-c", R"(
x=$(sed -n 's/.*"x":\([-+0-9.eE]*\).*/\1/p' "$LOOM_TASK_HYPER_PARAMETERS")
trap 'echo "{\"terminated\": true}"; exit 0' TERM
s=1
while [ $s -le 9 ]; do
  awk -v x="$x" -v s=$s 'BEGIN { printf "%d %.17g\n", s, (x - 0.3) * (x - 0.3) + 1 / s }' >&$LOOM_TASK_REPORT_FD
  sleep 0.2
  s=$((s + 1))
done
echo '{}')"}});
  std::thread runner([&agent] { agent.run({.poll_ms = 5}); });
  flow::SearchSpace space;
  space.uniform("x", -2, 2);
  flow::RandomSampler random(5);
  const flow::SearchInfo s = flow::search(tasks, space, random,
                                          {.kind = "quad", .metric = "loss", .n_trials = 8, .max_concurrent_trials = 1,
                                           .hyper_parameters = R"({"steps": 9})", .asha = flow::Asha{.min_resource = 1, .max_resource = 9},
                                           .poll_ms = 5});
  agent.stop();
  runner.join();
  ASSERT_EQ(s.trials.size(), 8u);
  int stopped = 0, terminated = 0;
  for (const flow::TrialInfo& tr : s.trials) {
    ASSERT_TRUE(tr.state == flow::TrialState::Completed || tr.state == flow::TrialState::Stopped)
        << trial_state_name(tr.state) << ": " << tr.error;
    const double x = nlohmann::json::parse(tr.params)["x"].get<double>();
    const std::vector<flow::Report> reports = flow::Reports(fs.store).list(tr.task_id);
    ASSERT_EQ(static_cast<int64_t>(reports.size()), tr.steps);
    for (const flow::Report& r : reports) EXPECT_DOUBLE_EQ(r.value, (x - 0.3) * (x - 0.3) + 1.0 / static_cast<double>(r.step));
    ASSERT_TRUE(tr.value);
    EXPECT_DOUBLE_EQ(*tr.value, reports.back().value);
    const nlohmann::json result = nlohmann::json::parse(tr.result);
    if (tr.state == flow::TrialState::Stopped) {
      ++stopped;
      EXPECT_LT(tr.steps, 9);
      // SIGTERM while it ran (its trap printed), or it had ended before the signal came.
      EXPECT_TRUE((result == nlohmann::json{{"terminated", true}} || result == nlohmann::json::object())) << tr.result;
      terminated += result.contains("terminated");
    } else {
      EXPECT_EQ(tr.steps, 9);
    }
  }
  EXPECT_GT(stopped, 0);
  EXPECT_GT(terminated, 0);
  EXPECT_LT(s.total_steps(), 8 * 9);
}

// A child that ignores SIGTERM is killed stop_grace_ms later; its result is its last report. A
// malformed report line fails the attempt, naming the line and the format.
TEST_P(FlowSearch, CommandReportsThatAreStoppedOrMalformed) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  flow::Agent agent(tasks);
  agent.register_command("stubborn", {.argv = {"/bin/sh", "-c", R"(
trap '' TERM
s=1
while [ $s -le 9 ]; do echo "$s 0.5" >&3; sleep 0.1; s=$((s + 1)); done
echo '{"loss": 0.5}')"},
                                      .stop_grace_ms = 100});
  agent.register_command("garbled", {.argv = {"/bin/sh", "-c", R"(echo "1 0.5" >&3; echo "2 nan" >&3; sleep 1; echo '{}')"}});
  agent.register_command("outside", {.argv = {"/bin/sh", "-c", R"(printf '1 0.25\n2\t0.125 \n' >&3; echo '{"done": 1}')"}});
  std::thread runner([&agent] { agent.run({.poll_ms = 5}); });
  flow::SearchSpace space;
  space.uniform("x", 0, 1);
  flow::RandomSampler random(1);
  // Every trial reports 0.5 at each step: the first goes on at each rung, the second (a tie is
  // not worse) too; with R = 3 each gets Stop at step 3, its budget spent.
  const flow::SearchInfo s = flow::search(tasks, space, random,
                                          {.kind = "stubborn", .metric = "loss", .n_trials = 2, .max_concurrent_trials = 1,
                                           .asha = flow::Asha{.min_resource = 1, .max_resource = 3}, .poll_ms = 5});
  const int64_t garbled = tasks.submit("garbled", "{}", {.max_attempts = 1});
  const int64_t outside = tasks.submit("outside", "{}", {.max_attempts = 1});
  while (tasks.get(garbled).status == flow::Status::Pending || tasks.get(garbled).status == flow::Status::Running ||
         tasks.get(outside).status == flow::Status::Pending || tasks.get(outside).status == flow::Status::Running)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  agent.stop();
  runner.join();
  ASSERT_EQ(s.trials.size(), 2u);
  for (const flow::TrialInfo& tr : s.trials) {
    EXPECT_EQ(tr.state, flow::TrialState::Completed) << tr.error;
    EXPECT_EQ(tr.steps, 3);
    EXPECT_EQ(nlohmann::json::parse(tr.result), (nlohmann::json{{"step", 3}, {"value", 0.5}}));  // killed: its last report
  }
  const flow::TaskInfo g = tasks.get(garbled);
  EXPECT_EQ(g.status, flow::Status::Failed);
  EXPECT_NE(g.error.find("'2 nan' on its report descriptor 3"), std::string::npos) << g.error;
  EXPECT_NE(g.error.find("STEP VALUE"), std::string::npos) << g.error;
  ASSERT_EQ(flow::Reports(fs.store).list(garbled).size(), 1u);  // the line before it was recorded
  // Outside a search every report is Continue: recorded, and the child's own result stands.
  const flow::TaskInfo o = tasks.get(outside);
  EXPECT_EQ(o.status, flow::Status::Finished) << o.error;
  EXPECT_EQ(o.result, R"({"done":1})");
  const std::vector<flow::Report> r = flow::Reports(fs.store).list(outside);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].step, 2);
  EXPECT_EQ(r[1].value, 0.125);
}

TEST_P(FlowSearch, BadOptionsWriteNothing) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  flow::SearchSpace space;
  space.uniform("x", 0, 1);
  flow::RandomSampler random(0);
  const flow::SearchOptions good{.kind = "t", .metric = "loss", .n_trials = 1};
  const auto bad = [&](flow::SearchOptions o) { EXPECT_THROW(flow::search(tasks, space, random, o), ValueError); };
  flow::SearchOptions o = good;
  o.kind = "bad kind";
  bad(o);
  o = good;
  o.metric = "";
  bad(o);
  o = good;
  o.n_trials = 0;
  bad(o);
  o = good;
  o.max_concurrent_trials = 0;
  bad(o);
  o = good;
  o.hyper_parameters = R"({"x": 1})";  // a parameter of the space
  bad(o);
  o = good;
  o.hyper_parameters = "[1]";
  bad(o);
  o = good;
  o.asha = flow::Asha{.min_resource = 4, .max_resource = 2};
  bad(o);
  o = good;
  o.asha = flow::Asha{.min_resource = 1, .max_resource = 9, .reduction_factor = 1};
  bad(o);
  o = good;
  o.step_budget = 10;  // without ASHA
  bad(o);
  o = good;
  o.task_options.max_attempts = 0;
  bad(o);
  EXPECT_THROW(flow::search(tasks, flow::SearchSpace(), random, good), ValueError);
  EXPECT_TRUE(flow::list_searches(tasks).empty());
  EXPECT_TRUE(tasks.list().empty());
  EXPECT_THROW(flow::get_search(tasks, 1), store::NotFoundError);
}
