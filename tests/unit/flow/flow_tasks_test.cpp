// The task queue (docs/workflow.md): submit, claim, finish; priorities; leases expiring and
// replay; fencing of stale claims; retries; timeouts; cancellation; bad input. Time is a manual
// clock, so no test sleeps.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/flow/tasks.h>
#include <loom/store/error.h>
#include <loom/store/store.h>

#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <set>
#include <thread>

#include "unit/flow/flow_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::FreshStore;
using loom_test::ManualClock;
using flow::Heartbeat;
using flow::Status;

class FlowTasks : public loom_test::FlowBackendTest {};
INSTANTIATE_STORE_BACKENDS(FlowTasks);

TEST_P(FlowTasks, TasksCreateTheirTableOnTheStore) {
  FreshStore fs(url());
  EXPECT_EQ(fs.store.schema_version(), store::Store::library_schema_version());
  flow::Tasks tasks(fs.store);  // flow's schema part (tests/unit/flow/store_session_test.cpp: not before)
  EXPECT_EQ(loom_test::raw_sql(fs.url(), "SELECT COUNT(*) FROM tasks"), std::vector<std::string>{"0"});
}

TEST_P(FlowTasks, SubmitClaimFinish) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  const int64_t id = tasks.submit("train", R"({ "lr": 0.5, "layers": [1, 2] })", {.priority = 2, .max_attempts = 4});
  flow::TaskInfo info = tasks.get(id);
  EXPECT_EQ(info.kind, "train");
  EXPECT_EQ(info.hyper_parameters, R"({"layers":[1,2],"lr":0.5})");  // canonical
  EXPECT_EQ(info.status, Status::Pending);
  EXPECT_EQ(info.priority, 2);
  EXPECT_EQ(info.attempts, 0);
  EXPECT_EQ(info.max_attempts, 4);
  EXPECT_EQ(info.created_ms, t.ms());
  EXPECT_EQ(info.started_ms, 0);

  t.advance(10);
  const auto c = tasks.claim({"train"}, "agent-a");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->task_id, id);
  EXPECT_EQ(c->token, 1);
  EXPECT_EQ(c->hyper_parameters, info.hyper_parameters);
  EXPECT_EQ(c->lease_expires_ms, t.ms() + flow::TaskOptions{}.lease_ms);
  info = tasks.get(id);
  EXPECT_EQ(info.status, Status::Running);
  EXPECT_EQ(info.attempts, 1);
  EXPECT_EQ(info.agent, "agent-a");
  EXPECT_EQ(info.started_ms, t.ms());
  EXPECT_FALSE(tasks.claim({"train"}, "agent-b")) << "a running task is not claimed twice";

  t.advance(5);
  tasks.finish(*c, R"({"accuracy": 0.9})");
  info = tasks.get(id);
  EXPECT_EQ(info.status, Status::Finished);
  EXPECT_EQ(info.result, R"({"accuracy":0.9})");
  EXPECT_EQ(info.finished_ms, t.ms());
  EXPECT_EQ(info.lease_expires_ms, 0);

  // filters
  const int64_t other = tasks.submit("eval");
  EXPECT_EQ(tasks.list().size(), 2u);
  EXPECT_EQ(tasks.list({.kind = "eval"}).at(0).id, other);
  EXPECT_EQ(tasks.list({.status = Status::Finished}).at(0).id, id);
  EXPECT_TRUE(tasks.list({.kind = "train", .status = Status::Pending}).empty());
  EXPECT_EQ(tasks.list({.limit = 1}).size(), 1u);
}

TEST_P(FlowTasks, HighestPriorityOldestFirstWithinTheAgentsKinds) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  const int64_t low = tasks.submit("k", "{}", {.priority = -1});
  const int64_t high1 = tasks.submit("k", "{}", {.priority = 5});
  const int64_t other = tasks.submit("other", "{}", {.priority = 100});
  const int64_t mid = tasks.submit("k");
  const int64_t high2 = tasks.submit("k", "{}", {.priority = 5});
  std::vector<int64_t> order;
  while (auto c = tasks.claim({"k"}, "a")) order.push_back(c->task_id);
  EXPECT_EQ(order, (std::vector<int64_t>{high1, high2, mid, low}));
  EXPECT_EQ(tasks.get(other).status, Status::Pending) << "another kind's queue is not touched";
  EXPECT_EQ(tasks.claim({"x", "other"}, "a")->task_id, other);
}

TEST_P(FlowTasks, ExpiredLeaseIsReplayedAndTheStaleAgentIsFenced) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  const int64_t id = tasks.submit("k", R"({"n": 1})", {.lease_ms = 1000});
  const auto a = tasks.claim({"k"}, "agent-a");
  ASSERT_TRUE(a);
  t.advance(999);
  EXPECT_FALSE(tasks.claim({"k"}, "agent-b")) << "the lease has not expired yet";
  t.advance(-499);
  EXPECT_EQ(tasks.heartbeat(*a), Heartbeat::Renewed);  // now +500: the lease runs to +1500
  EXPECT_EQ(tasks.get(id).lease_expires_ms, t.ms() + 1000);
  t.advance(999);
  EXPECT_FALSE(tasks.claim({"k"}, "agent-b")) << "the heartbeat renewed the lease";
  t.advance(1);  // agent-a stops heartbeating: its lease runs out
  const auto b = tasks.claim({"k"}, "agent-b");
  ASSERT_TRUE(b) << "an expired lease is reclaimed by the next claim";
  EXPECT_EQ(b->task_id, id);
  EXPECT_EQ(b->token, 2);
  flow::TaskInfo info = tasks.get(id);
  EXPECT_EQ(info.attempts, 2);
  EXPECT_EQ(info.agent, "agent-b");
  EXPECT_TRUE(contains_all(info.error, {"lease expired", "agent-a", "attempt 1 of 3"}));

  // agent-a comes back: its heartbeat, result and error are all refused
  EXPECT_EQ(tasks.heartbeat(*a), Heartbeat::Lost);
  const std::string msg = error_message<flow::ClaimLostError>([&] { tasks.finish(*a, R"({"from": "a"})"); });
  EXPECT_TRUE(contains_all(msg, {"claim 1", "task " + std::to_string(id), "claim 2", "running", "nothing was recorded"}));
  EXPECT_THROW(tasks.fail(*a, "late error"), flow::ClaimLostError);
  EXPECT_THROW(tasks.fail(*a, "late error"), store::ConflictError);  // the family of the store's errors
  info = tasks.get(id);
  EXPECT_EQ(info.status, Status::Running);
  EXPECT_EQ(info.token, 2);
  EXPECT_EQ(info.result, "");

  tasks.finish(*b, R"({"from": "b"})");
  EXPECT_THROW(tasks.finish(*a, R"({"from": "a"})"), flow::ClaimLostError);
  EXPECT_THROW(tasks.finish(*b, R"({"again": 1})"), flow::ClaimLostError) << "a finished task takes no second result";
  info = tasks.get(id);
  EXPECT_EQ(info.status, Status::Finished);
  EXPECT_EQ(info.result, R"({"from":"b"})");
}

TEST_P(FlowTasks, FailedAttemptsAreRetriedThenTheTaskFailsWithTheLastError) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  const int64_t id = tasks.submit("k", "{}", {.max_attempts = 3, .lease_ms = 100});
  auto c = tasks.claim({"k"}, "a");
  EXPECT_EQ(tasks.fail(*c, "first"), Status::Pending);
  EXPECT_EQ(tasks.get(id).error, "first");
  EXPECT_EQ(tasks.get(id).finished_ms, 0);
  c = tasks.claim({"k"}, "a");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->attempt, 2);
  EXPECT_EQ(tasks.fail(*c, "second"), Status::Pending);
  c = tasks.claim({"k"}, "a");
  ASSERT_TRUE(c);
  t.advance(100);  // the last attempt's agent dies: the reclaim fails the task
  EXPECT_EQ(tasks.reclaim_expired(), 1);
  flow::TaskInfo info = tasks.get(id);
  EXPECT_EQ(info.status, Status::Failed);
  EXPECT_EQ(info.attempts, 3);
  EXPECT_TRUE(contains_all(info.error, {"lease expired", "attempt 3 of 3"}));
  EXPECT_EQ(info.finished_ms, t.ms());
  EXPECT_FALSE(tasks.claim({"k"}, "a"));

  const int64_t id2 = tasks.submit("k", "{}", {.max_attempts = 1});
  c = tasks.claim({"k"}, "a");
  EXPECT_EQ(tasks.fail(*c, std::string(100000, 'x') + "the cause"), Status::Failed);
  info = tasks.get(id2);
  EXPECT_LT(info.error.size(), 20000u) << "a long error keeps its tail only";
  EXPECT_TRUE(contains_all(info.error, {"the cause"}));

  // an error is any bytes (a command's stderr); it is stored as valid UTF-8 without NUL, which
  // every backend accepts, each offending byte replaced
  const int64_t id3 = tasks.submit("k", "{}", {.max_attempts = 1});
  c = tasks.claim({"k"}, std::string("agent\0\xff", 7));
  tasks.fail(*c, std::string("bad \xff\0 \xc0\xaf \xed\xa0\x80 caf\xc3\xa9 \xf0\x9f\x98\x80 \xe2\x82", 27));
  info = tasks.get(id3);
  EXPECT_EQ(info.error, "bad ?? ?? ??? caf\xc3\xa9 \xf0\x9f\x98\x80 ??");
  EXPECT_EQ(info.agent, "agent??");
}

TEST_P(FlowTasks, TimeoutBoundsTheLeaseAndFailsTheAttempt) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  const int64_t id = tasks.submit("k", "{}", {.max_attempts = 2, .timeout_ms = 500, .lease_ms = 10000});
  auto c = tasks.claim({"k"}, "a");
  EXPECT_EQ(c->deadline_ms, t.ms() + 500);
  EXPECT_EQ(c->lease_expires_ms, c->deadline_ms) << "a lease never runs past the attempt's deadline";
  t.advance(400);
  EXPECT_EQ(tasks.heartbeat(*c), Heartbeat::Renewed);
  EXPECT_EQ(tasks.get(id).lease_expires_ms, c->deadline_ms);
  t.advance(100);
  auto c2 = tasks.claim({"k"}, "b");
  ASSERT_TRUE(c2) << "past its deadline, the attempt is over";
  EXPECT_TRUE(contains_all(tasks.get(id).error, {"timed out after 500 ms", "attempt 1 of 2", "agent 'a'"}));
  EXPECT_EQ(c2->deadline_ms, t.ms() + 500) << "each attempt has its own timeout";
  EXPECT_THROW(tasks.finish(*c, "1"), flow::ClaimLostError);
}

TEST_P(FlowTasks, CancelPendingAndRunning) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  const int64_t pending = tasks.submit("k", "{}", {.priority = 0});
  const int64_t running = tasks.submit("k", "{}", {.priority = 1});
  const auto c = tasks.claim({"k"}, "a");
  ASSERT_EQ(c->task_id, running);

  EXPECT_TRUE(tasks.cancel(pending));
  EXPECT_EQ(tasks.get(pending).status, Status::Cancelled);
  EXPECT_EQ(tasks.get(pending).finished_ms, t.ms());
  EXPECT_FALSE(tasks.claim({"k"}, "b")) << "a cancelled task is never claimed";
  EXPECT_FALSE(tasks.cancel(pending)) << "already ended";

  EXPECT_TRUE(tasks.cancel(running));
  EXPECT_EQ(tasks.heartbeat(*c), Heartbeat::Cancelled);
  EXPECT_THROW(tasks.finish(*c, "{}"), flow::ClaimLostError);
  EXPECT_THROW(tasks.fail(*c, "x"), flow::ClaimLostError);
  t.advance(flow::TaskOptions{}.lease_ms * 2);
  EXPECT_EQ(tasks.reclaim_expired(), 0) << "a cancelled task is not replayed";
  const flow::TaskInfo info = tasks.get(running);
  EXPECT_EQ(info.status, Status::Cancelled);
  EXPECT_EQ(info.result, "");

  const int64_t done = tasks.submit("k");
  tasks.finish(*tasks.claim({"k"}, "a"), "{}");
  EXPECT_FALSE(tasks.cancel(done)) << "a finished task stays finished";
  EXPECT_EQ(tasks.get(done).status, Status::Finished);
  EXPECT_THROW(tasks.cancel(12345), store::NotFoundError);
}

TEST_P(FlowTasks, BadInputIsATypedErrorAndWritesNothing) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { tasks.submit("k", R"({"lr": 0.1)"); }), {"submit", "not valid JSON"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { tasks.submit("k", "[1, 2]"); }), {"must be a JSON object", "array"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { tasks.submit("", "{}"); }), {"invalid task kind", "[A-Za-z0-9_.:/-]"}));
  EXPECT_THROW(tasks.submit("a b"), ValueError);
  EXPECT_THROW(tasks.submit(std::string(129, 'k')), ValueError);
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { tasks.submit("k", "{}", {.max_attempts = 0}); }),
                           {"max_attempts 0", "1 to 1000"}));
  EXPECT_THROW(tasks.submit("k", "{}", {.timeout_ms = -1}), ValueError);
  EXPECT_THROW(tasks.submit("k", "{}", {.lease_ms = 0}), ValueError);
  EXPECT_TRUE(tasks.list().empty()) << "nothing was written";

  EXPECT_TRUE(contains_all(error_message<ValueError>([] { flow::parse_status("done"); }), {"'done'", "pending, running, finished"}));
  EXPECT_EQ(flow::parse_status("cancelled"), Status::Cancelled);
  EXPECT_TRUE(contains_all(error_message<store::NotFoundError>([&] { tasks.get(7); }), {"no task 7"}));
  EXPECT_THROW(tasks.claim({}, "a"), ValueError);
  EXPECT_THROW(tasks.claim({"ok", "not ok"}, "a"), ValueError);
  EXPECT_THROW(tasks.list({.limit = -1}), ValueError);

  const int64_t id = tasks.submit("k");
  const auto c = tasks.claim({"k"}, "a");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { tasks.finish(*c, "{oops"); }), {"finish", "result", "not valid JSON"}));
  EXPECT_EQ(tasks.get(id).status, Status::Running) << "a refused result changes nothing";
  flow::Claim forged = *c;
  forged.task_id = 999;
  EXPECT_THROW(tasks.finish(forged, "{}"), store::NotFoundError);
}

TEST_P(FlowTasks, ConcurrentClaimersTakeEachTaskOnce) {
  FreshStore fs(url());
  {
    flow::Tasks tasks(fs.store);
    for (int i = 0; i < 60; ++i) tasks.submit("k", "{\"i\": " + std::to_string(i) + "}");
  }
  std::vector<std::vector<int64_t>> got(4);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      flow::Tasks tasks(store::Store::open(fs.url()));  // a connection of its own, as another process would have
      while (auto c = tasks.claim({"k"}, "w" + std::to_string(w))) {
        got[w].push_back(c->task_id);
        tasks.finish(*c, std::to_string(w));
      }
    });
  for (auto& th : threads) th.join();
  std::set<int64_t> all;
  size_t total = 0;
  for (const auto& g : got) {
    total += g.size();
    all.insert(g.begin(), g.end());
  }
  EXPECT_EQ(total, 60u);
  EXPECT_EQ(all.size(), 60u);
  flow::Tasks tasks(fs.store);
  EXPECT_EQ(tasks.list({.status = Status::Finished}).size(), 60u);
}

// PostgreSQL: the queue's statements lock only the rows they touch, so claims run side by side
// and never queue behind the store's writers (a model or dataset save holds the advisory write
// lock for as long as it runs). Here another session holds that lock throughout: every task
// operation still completes at once, where waiting for it would fail after the 10 s
// lock_timeout. (SQLite has one writer at a time by design.)
class FlowTasksPostgreSQL : public loom_test::FlowBackendTest {};
INSTANTIATE_TEST_SUITE_P(Backends, FlowTasksPostgreSQL, ::testing::Values(std::string("postgresql")),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST_P(FlowTasksPostgreSQL, TaskOperationsDoNotWaitForTheStoreWriteLock) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  const int64_t a = tasks.submit("train"), b = tasks.submit("train");
  std::unique_ptr<PGconn, decltype(&PQfinish)> writer(PQconnectdb(url().c_str()), &PQfinish);
  ASSERT_EQ(PQstatus(writer.get()), CONNECTION_OK) << PQerrorMessage(writer.get());
  // src/store/postgresql.cpp's kWriteLock ("loomstor"), held by this session until it ends
  std::unique_ptr<PGresult, decltype(&PQclear)> held(PQexec(writer.get(), "SELECT pg_advisory_lock(7813586394390228850)"), &PQclear);
  ASSERT_EQ(PQresultStatus(held.get()), PGRES_TUPLES_OK) << PQerrorMessage(writer.get());

  const auto start = std::chrono::steady_clock::now();
  const int64_t c = tasks.submit("train");
  const auto first = tasks.claim({"train"}, "agent-1");
  const auto second = tasks.claim({"train"}, "agent-2");
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->task_id, a);
  EXPECT_EQ(second->task_id, b);
  EXPECT_EQ(tasks.heartbeat(*first), Heartbeat::Renewed);
  tasks.finish(*first, R"({"ok": 1})");
  EXPECT_EQ(tasks.fail(*second, "boom"), Status::Pending);
  EXPECT_TRUE(tasks.cancel(c));
  EXPECT_EQ(tasks.reclaim_expired(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "a task operation waited for the write lock";
  EXPECT_EQ(tasks.get(a).status, Status::Finished);
  EXPECT_EQ(tasks.get(c).status, Status::Cancelled);
}
