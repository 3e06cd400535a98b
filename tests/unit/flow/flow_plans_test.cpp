// Plans and dependencies (docs/workflow.md, "Plans"): a task is claimable only once its
// dependencies finished and sees their results; a failure or cancellation cancels its
// dependents transitively; replay reopens a stage and what depended on it; plans are submitted
// in one transaction (a cycle or a bad task writes nothing), watched, cancelled and replayed as
// one; a store made before plans upgrades. On a manual clock, on SQLite and PostgreSQL.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/flow/plans.h>
#include <loom/flow/tasks.h>
#include <loom/store/error.h>
#include <loom/store/store.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "unit/flow/flow_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::FreshStore;
using loom_test::ManualClock;
using flow::Status;

class FlowPlans : public loom_test::FlowBackendTest {};
INSTANTIATE_STORE_BACKENDS(FlowPlans);

namespace {

std::string count(const std::string& url, const std::string& table) {
  return loom_test::raw_sql(url, "SELECT COUNT(*) FROM " + table).at(0);
}

// A cross-validation plan: k fold tasks and an aggregate depending on all of them.
flow::TaskGraph cross_validation(int k) {
  flow::TaskGraph p{.name = "cv"};
  flow::PlanTask mean{.name = "mean", .kind = "aggregate"};
  for (int i = 0; i < k; ++i) {
    p.tasks.push_back({.name = "fold-" + std::to_string(i), .kind = "train", .hyper_parameters = "{\"fold\": " + std::to_string(i) + "}"});
    mean.depends_on.push_back("fold-" + std::to_string(i));
  }
  p.tasks.push_back(mean);
  return p;
}

}  // namespace

TEST_P(FlowPlans, ADependentWaitsForItsDependenciesAndSeesTheirResults) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  const int64_t a = tasks.submit("prep");
  const int64_t b = tasks.submit("prep");
  const int64_t c = tasks.submit("train", "{}", {.priority = 10, .depends_on = {b, a}});
  EXPECT_EQ(tasks.get(c).depends_on, (std::vector<int64_t>{a, b}));
  EXPECT_EQ(tasks.get(c).waiting, 2);
  EXPECT_FALSE(tasks.claim({"train"}, "x")) << "a task with unfinished dependencies is not claimable";

  auto ca = tasks.claim({"prep"}, "x");
  ASSERT_TRUE(ca);
  tasks.finish(*ca, R"({"rows": 10})");
  EXPECT_EQ(tasks.get(c).waiting, 1);
  EXPECT_FALSE(tasks.claim({"train"}, "x"));
  auto cb = tasks.claim({"prep"}, "x");
  ASSERT_TRUE(cb);
  tasks.finish(*cb, R"({"rows": 20})");
  EXPECT_EQ(tasks.get(c).waiting, 0);

  const auto cc = tasks.claim({"train", "prep"}, "x");
  ASSERT_TRUE(cc);
  EXPECT_EQ(cc->task_id, c);
  ASSERT_EQ(cc->dependencies.size(), 2u);
  EXPECT_EQ(cc->dependencies[0].task_id, a);
  EXPECT_EQ(cc->dependencies[0].result, R"({"rows":10})");
  EXPECT_EQ(cc->dependencies[1].result, R"({"rows":20})");
  EXPECT_EQ(tasks.results_of_dependencies(c).size(), 2u);

  // a dependency that already finished does not hold a new task back
  const int64_t d = tasks.submit("train", "{}", {.depends_on = {a}});
  EXPECT_EQ(tasks.get(d).waiting, 0);
}

TEST_P(FlowPlans, BadDependenciesWriteNothing) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  const int64_t a = tasks.submit("prep", "{}", {.max_attempts = 1});
  auto ca = tasks.claim({"prep"}, "x");
  tasks.fail(*ca, "boom");
  EXPECT_TRUE(contains_all(error_message<store::NotFoundError>([&] { tasks.submit("train", "{}", {.depends_on = {a + 100}}); }),
                           {"dependency " + std::to_string(a + 100), "not a task of this store"}));
  EXPECT_TRUE(contains_all(error_message<store::ConflictError>([&] { tasks.submit("train", "{}", {.depends_on = {a}}); }),
                           {"dependency " + std::to_string(a), "is failed", "replay it first"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { tasks.submit("train", "{}", {.depends_on = {a, a}}); }), {"twice"}));
  EXPECT_EQ(count(fs.url(), "tasks"), "1");
  EXPECT_EQ(count(fs.url(), "task_dependencies"), "0");
}

TEST_P(FlowPlans, FailureCancelsDependentsTransitivelyAndReplayReopensThem) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  const int64_t a = tasks.submit("prep", "{}", {.max_attempts = 1});
  const int64_t b = tasks.submit("train", "{}", {.depends_on = {a}});
  const int64_t c = tasks.submit("eval", "{}", {.depends_on = {b}});
  const int64_t other = tasks.submit("prep");
  auto ca = tasks.claim({"prep"}, "x");
  ASSERT_EQ(ca->task_id, a);
  EXPECT_EQ(tasks.fail(*ca, "out of memory"), Status::Failed);
  EXPECT_EQ(tasks.get(b).status, Status::Cancelled);
  EXPECT_EQ(tasks.get(b).error, "dependency " + std::to_string(a) + " failed: out of memory");
  EXPECT_EQ(tasks.get(c).status, Status::Cancelled);
  EXPECT_EQ(tasks.get(c).error,
            "dependency " + std::to_string(b) + " was cancelled: dependency " + std::to_string(a) + " failed: out of memory");
  EXPECT_EQ(tasks.get(other).status, Status::Pending) << "a task that does not depend on it is untouched";

  EXPECT_TRUE(contains_all(error_message<store::ConflictError>([&] { tasks.replay(b); }),
                           {"task " + std::to_string(b) + " depends on task " + std::to_string(a), "failed", "nothing was changed"}));
  EXPECT_TRUE(contains_all(error_message<store::ConflictError>([&] { tasks.replay(other); }), {"is pending"}));
  EXPECT_THROW(tasks.replay(999), store::NotFoundError);

  EXPECT_EQ(tasks.replay(a), (std::vector<int64_t>{a, b, c}));
  for (int64_t id : {a, b, c}) {
    const flow::TaskInfo i = tasks.get(id);
    EXPECT_EQ(i.status, Status::Pending);
    EXPECT_EQ(i.attempts, 0);
    EXPECT_EQ(i.error, "");
  }
  EXPECT_EQ(tasks.get(b).waiting, 1);
  EXPECT_EQ(tasks.get(c).waiting, 1);
  ca = tasks.claim({"prep"}, "x");
  ASSERT_EQ(ca->task_id, a);
  EXPECT_EQ(ca->token, 2) << "the fencing token goes on across a replay";
  EXPECT_EQ(ca->attempt, 1);
  tasks.finish(*ca, "1");
  auto cb = tasks.claim({"train"}, "x");
  ASSERT_TRUE(cb);
  tasks.finish(*cb, "2");
  auto cc = tasks.claim({"eval"}, "x");
  ASSERT_TRUE(cc);
  tasks.finish(*cc, "3");

  // replaying a finished stage re-runs it and what depended on it, not its dependencies
  EXPECT_EQ(tasks.replay(b), (std::vector<int64_t>{b, c}));
  EXPECT_EQ(tasks.get(a).status, Status::Finished);
  EXPECT_EQ(tasks.get(b).waiting, 0);
  EXPECT_EQ(tasks.get(c).waiting, 1);
  EXPECT_EQ(tasks.get(c).result, "");
}

TEST_P(FlowPlans, AnExpiredLastAttemptAndACancellationCancelDependents) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  const int64_t a = tasks.submit("prep", "{}", {.max_attempts = 1, .lease_ms = 100});
  const int64_t b = tasks.submit("train", "{}", {.depends_on = {a}});
  ASSERT_TRUE(tasks.claim({"prep"}, "x"));
  t.advance(101);
  EXPECT_EQ(tasks.reclaim_expired(), 1);
  EXPECT_EQ(tasks.get(a).status, Status::Failed);
  EXPECT_TRUE(contains_all(tasks.get(b).error, {"dependency " + std::to_string(a) + " failed: lease expired"}));

  const int64_t c = tasks.submit("prep");
  const int64_t d = tasks.submit("train", "{}", {.depends_on = {c}});
  EXPECT_TRUE(tasks.cancel(c));
  EXPECT_EQ(tasks.get(d).status, Status::Cancelled);
  EXPECT_EQ(tasks.get(d).error, "dependency " + std::to_string(c) + " was cancelled");
}

TEST_P(FlowPlans, ACrossValidationPlanRunsFoldsThenTheAggregate) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  flow::Plans plans(tasks);
  const int64_t id = plans.submit(cross_validation(3));
  flow::PlanInfo p = plans.get(id);
  EXPECT_EQ(p.name, "cv");
  EXPECT_EQ(p.status, Status::Pending);
  ASSERT_EQ(p.tasks.size(), 4u);
  const int64_t mean = p.task_id("mean");
  EXPECT_EQ(p.tasks.back().id, mean);
  EXPECT_EQ(p.tasks.back().waiting, 3);
  EXPECT_EQ(p.tasks.back().depends_on, (std::vector<int64_t>{p.task_id("fold-0"), p.task_id("fold-1"), p.task_id("fold-2")}));
  EXPECT_THROW(p.task_id("fold-9"), store::NotFoundError);

  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(tasks.claim({"aggregate"}, "x"));
    auto c = tasks.claim({"train"}, "x");
    ASSERT_TRUE(c);
    EXPECT_EQ(plans.get(id).status, Status::Running);
    tasks.finish(*c, "{\"accuracy\": 0." + std::to_string(7 + i) + "}");
  }
  auto c = tasks.claim({"aggregate"}, "x");
  ASSERT_TRUE(c);
  ASSERT_EQ(c->dependencies.size(), 3u);
  EXPECT_EQ(c->dependencies[1].name, "fold-1");
  EXPECT_EQ(c->dependencies[1].kind, "train");
  EXPECT_EQ(c->dependencies[1].result, R"({"accuracy":0.8})");
  tasks.finish(*c, R"({"mean": 0.8})");
  EXPECT_EQ(plans.get(id).status, Status::Finished);
  ASSERT_EQ(plans.list().size(), 1u);
  EXPECT_EQ(plans.list()[0].tasks.size(), 4u);
  EXPECT_EQ(tasks.list({.plan_id = id}).size(), 4u);
}

TEST_P(FlowPlans, BadPlansWriteNothing) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  flow::Plans plans(tasks);
  flow::TaskGraph cycle{.name = "c",
                   .tasks = {{.name = "a", .kind = "k", .depends_on = {"c"}},
                             {.name = "b", .kind = "k", .depends_on = {"a"}},
                             {.name = "c", .kind = "k", .depends_on = {"b"}},
                             {.name = "free", .kind = "k"}}};
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { plans.submit(cycle); }), {"cycle", "'a'", "'b'", "'c'"}));
  flow::TaskGraph p = cross_validation(2);
  p.tasks[2].depends_on.push_back("fold-7");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { plans.submit(p); }), {"'fold-7'", "not a task of the plan"}));
  p = cross_validation(2);
  p.tasks[1].name = "fold-0";
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { plans.submit(p); }), {"two tasks are named 'fold-0'"}));
  p = cross_validation(2);
  p.tasks[0].depends_on = {"fold-0"};
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { plans.submit(p); }), {"depends on itself"}));
  p = cross_validation(2);
  p.tasks[2].hyper_parameters = "[1]";
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { plans.submit(p); }), {"hyper-parameters of 'mean'", "JSON object"}));
  p = cross_validation(2);
  p.tasks[1].name = "bad name";
  EXPECT_THROW(plans.submit(p), ValueError);
  EXPECT_THROW(plans.submit({.name = "empty"}), ValueError);
  p = cross_validation(2);
  p.tasks[2].options.depends_on = {12345};  // checked inside the transaction: rolled back
  EXPECT_THROW(plans.submit(p), store::NotFoundError);
  EXPECT_EQ(count(fs.url(), "tasks"), "0");
  EXPECT_EQ(count(fs.url(), "plans"), "0");
  EXPECT_EQ(count(fs.url(), "task_dependencies"), "0");
  EXPECT_THROW(plans.get(1), store::NotFoundError);
}

TEST_P(FlowPlans, APlanIsCancelledAndReplayedAsOne) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  flow::Plans plans(tasks);
  const int64_t id = plans.submit(cross_validation(2));
  const int64_t unrelated = tasks.submit("train");
  auto c = tasks.claim({"train"}, "x");
  ASSERT_TRUE(c);
  EXPECT_EQ(plans.cancel(id), 3) << "both folds and the aggregate (ended with the first fold)";
  EXPECT_EQ(tasks.heartbeat(*c), flow::Heartbeat::Cancelled);
  flow::PlanInfo p = plans.get(id);
  EXPECT_EQ(p.status, Status::Cancelled);
  for (const flow::TaskInfo& task : p.tasks) EXPECT_EQ(task.status, Status::Cancelled);
  EXPECT_EQ(tasks.get(unrelated).status, Status::Pending);
  EXPECT_EQ(plans.cancel(id), 0);

  EXPECT_EQ(plans.replay(id).size(), 3u);
  p = plans.get(id);
  EXPECT_EQ(p.status, Status::Pending);
  EXPECT_EQ(p.tasks.back().waiting, 2);
  EXPECT_EQ(plans.replay(id).size(), 0u) << "nothing failed or cancelled";
  EXPECT_THROW(plans.cancel(99), store::NotFoundError);
}

TEST_P(FlowPlans, AStoreFromBeforePlansUpgradesAndKeepsItsTasks) {
  FreshStore fs(url());
  // flow's schema part as the release before plans had it (its migration 1)
  fs.store.ensure_schema(
      {"loom.flow",
       {{1,
         {"CREATE TABLE IF NOT EXISTS tasks (id {id}, kind {text} NOT NULL, hyper_parameters {text} NOT NULL, "
          "priority {int} NOT NULL, "
          "status {text} NOT NULL CHECK (status IN ('pending', 'running', 'finished', 'failed', 'cancelled')), "
          "attempts {int} NOT NULL, max_attempts {int} NOT NULL, timeout_ms {int} NOT NULL, lease_ms {int} NOT NULL, "
          "token {int} NOT NULL, agent {text}, lease_expires_ms {int}, deadline_ms {int}, result {text}, error {text}, "
          "created_ms {int} NOT NULL, started_ms {int}, finished_ms {int})",
          "CREATE INDEX IF NOT EXISTS tasks_by_queue ON tasks (status, kind, priority, id)",
          "CREATE INDEX IF NOT EXISTS tasks_by_lease ON tasks (status, lease_expires_ms)"}}}});
  loom_test::raw_sql(fs.url(),
                     "INSERT INTO tasks (kind, hyper_parameters, priority, status, attempts, max_attempts, timeout_ms, lease_ms, token, "
                     "created_ms) VALUES ('old', '{}', 0, 'pending', 0, 3, 0, 30000, 0, 1)");
  flow::Tasks tasks(store::Store::open(fs.url()));  // migrates loom.flow to its latest version
  EXPECT_EQ(loom_test::raw_sql(fs.url(), "SELECT version FROM loom_schema_parts WHERE part = 'loom.flow'"),
            std::vector<std::string>{"3"});
  const flow::TaskInfo old = tasks.get(1);
  EXPECT_EQ(old.kind, "old");
  EXPECT_EQ(old.waiting, 0);
  EXPECT_EQ(old.plan_id, 0);
  const int64_t next = tasks.submit("new", "{}", {.depends_on = {1}});
  auto c = tasks.claim({"old", "new"}, "x");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->task_id, 1);
  tasks.finish(*c, "{}");
  EXPECT_EQ(tasks.claim({"new"}, "x")->task_id, next);
}

// Agents on threads, each with its own store connection, run a wide plan: no dependent is ever
// claimed before all of its dependencies finished, and every task runs once.
TEST_P(FlowPlans, ConcurrentAgentsNeverClaimADependentEarly) {
  FreshStore fs(url());
  const int64_t plan = flow::Plans(flow::Tasks(fs.store)).submit([] {
    flow::TaskGraph p{.name = "wide"};
    for (int i = 0; i < 12; ++i) {
      p.tasks.push_back({.name = "a" + std::to_string(i), .kind = "k"});
      p.tasks.push_back({.name = "b" + std::to_string(i), .kind = "k", .depends_on = {"a" + std::to_string(i)}});
    }
    flow::PlanTask last{.name = "last", .kind = "k"};
    for (int i = 0; i < 12; ++i) last.depends_on.push_back("b" + std::to_string(i));
    p.tasks.push_back(last);
    return p;
  }());
  std::mutex m;
  std::map<int64_t, int> runs;
  std::set<int64_t> finished;
  std::vector<std::string> violations;
  std::vector<std::thread> agents;
  for (int a = 0; a < 4; ++a)
    agents.emplace_back([&, a] {
      flow::Tasks tasks(store::Store::open(fs.url()));
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (std::chrono::steady_clock::now() < give_up) {
        {
          std::lock_guard<std::mutex> l(m);
          if (finished.size() == 25) return;
        }
        auto c = tasks.claim({"k"}, "agent-" + std::to_string(a));
        if (!c) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          continue;
        }
        {
          std::lock_guard<std::mutex> l(m);
          ++runs[c->task_id];
          for (const flow::DependencyResult& d : c->dependencies)
            if (!finished.count(d.task_id) || d.result.empty())
              violations.push_back(std::to_string(c->task_id) + " claimed before " + std::to_string(d.task_id) + " finished");
        }
        std::lock_guard<std::mutex> l(m);  // finished is recorded with the commit, under the same lock
        tasks.finish(*c, "{}");
        finished.insert(c->task_id);
      }
    });
  for (auto& th : agents) th.join();
  EXPECT_TRUE(violations.empty()) << violations.front();
  const flow::PlanInfo p = flow::Plans(flow::Tasks(fs.store)).get(plan);
  EXPECT_EQ(p.status, Status::Finished);
  EXPECT_EQ(runs.size(), 25u);
  for (const auto& [id, n] : runs) EXPECT_EQ(n, 1) << "task " << id;
}

TEST(FlowPlanJson, APlanRoundTripsAndBadTextNamesWhatIsWrong) {
  flow::TaskGraph p{.name = "two stages", .tasks = {}};
  p.tasks.push_back({.name = "cnn", .kind = "train", .hyper_parameters = R"({"lr": 0.01, "layers": [32, 64]})"});
  p.tasks.back().options.lineage = {.input_dataset = "fashion", .input_dataset_version = 3, .output_model = "cnn"};
  p.tasks.back().options.depends_on = {7, 9};
  p.tasks.push_back({.name = "rnn", .kind = "decode", .depends_on = {"cnn"}});
  p.tasks.back().options.priority = -2;
  p.tasks.back().options.max_attempts = 1;
  p.tasks.back().options.timeout_ms = 5000;
  p.tasks.back().options.lease_ms = 100;
  const flow::TaskGraph q = flow::TaskGraph::from_json(p.to_json());
  EXPECT_EQ(q.name, p.name);
  ASSERT_EQ(q.tasks.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(q.tasks[0].hyper_parameters), nlohmann::json::parse(p.tasks[0].hyper_parameters));
  EXPECT_EQ(q.tasks[0].options.depends_on, (std::vector<int64_t>{7, 9}));
  EXPECT_EQ(q.tasks[0].options.lineage.input_dataset, "fashion");
  EXPECT_EQ(q.tasks[0].options.lineage.input_dataset_version, 3);
  EXPECT_EQ(q.tasks[0].options.lineage.output_model, "cnn");
  EXPECT_EQ(q.tasks[1].depends_on, std::vector<std::string>{"cnn"});
  EXPECT_EQ(q.tasks[1].kind, "decode");
  EXPECT_EQ(q.tasks[1].options.priority, -2);
  EXPECT_EQ(q.tasks[1].options.max_attempts, 1);
  EXPECT_EQ(q.tasks[1].options.timeout_ms, 5000);
  EXPECT_EQ(q.tasks[1].options.lease_ms, 100);
  EXPECT_EQ(q.to_json(), p.to_json());

  const auto fails = [](const std::string& text) { return error_message<ValueError>([&] { flow::TaskGraph::from_json(text, "in.json"); }); };
  EXPECT_TRUE(contains_all(fails("{"), {"in.json", "not valid JSON"}));
  EXPECT_TRUE(contains_all(fails("[]"), {"JSON object"}));
  EXPECT_TRUE(contains_all(fails(R"({"name": "p", "tasks": [], "x": 1})"), {"unknown key \"x\""}));
  EXPECT_TRUE(contains_all(fails(R"({"name": 3, "tasks": []})"), {"\"name\" must be a string"}));
  EXPECT_TRUE(contains_all(fails(R"({"name": "p", "tasks": [{"name": "a", "after": ["b"]}]})"), {"tasks[0].after", "task ids"}));
  EXPECT_TRUE(contains_all(fails(R"({"name": "p", "tasks": [{"name": "a", "priority": 18446744073709551615}]})"),
                           {"tasks[0].priority must be an integer"}));
  EXPECT_TRUE(contains_all(fails(R"({"name": "p", "tasks": [{"lineage": {"output": "m"}}]})"), {"tasks[0].lineage", "unknown key"}));
  EXPECT_TRUE(contains_all(fails(R"({"name": "p", "tasks": [{"hyper_parameters": [1]}]})"), {"must be a JSON object"}));
}
