// Tasks::complete and batching agents (docs/workflow.md, "Claims in batches"): the ends of
// attempts and the next claims in one transaction, each end fenced by its own claim, batches
// limited to half of what is claimable and to tasks without a timeout beyond the first; agents
// with batches on threads run a graph once, in dependency order. On SQLite and PostgreSQL.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/flow/agent.h>
#include <loom/flow/events.h>
#include <loom/flow/plans.h>
#include <loom/flow/tasks.h>
#include <loom/store/error.h>
#include <loom/store/store.h>

#include <map>
#include <mutex>
#include <set>
#include <algorithm>
#include <thread>

#include "unit/flow/flow_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::FreshStore;
using loom_test::ManualClock;
using flow::Status;

class FlowComplete : public loom_test::FlowBackendTest {};
INSTANTIATE_STORE_BACKENDS(FlowComplete);

namespace {

flow::TaskEnd finished(const flow::Claim& c, const std::string& result) {
  flow::TaskEnd e;
  e.claim = c;
  e.result = result;
  return e;
}

flow::TaskEnd failed(const flow::Claim& c, const std::string& error) {
  flow::TaskEnd e;
  e.claim = c;
  e.ok = false;
  e.error = error;
  return e;
}

std::vector<int64_t> ids_of(const std::vector<flow::Claim>& claims) {
  std::vector<int64_t> out;
  for (const flow::Claim& c : claims) out.push_back(c.task_id);
  return out;
}

}  // namespace

TEST_P(FlowComplete, AFinishAndTheClaimOfWhatItReleasedAreOneTransaction) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  const int64_t a = tasks.submit("prep");
  const int64_t b = tasks.submit("train", R"({"lr": 0.1})", {.depends_on = {a}});
  const flow::Claim ca = *tasks.claim({"prep", "train"}, "agent-1");
  const int64_t events_before = static_cast<int64_t>(flow::read_events(tasks, 0).size());
  t.advance(5);
  const flow::Handover h = tasks.complete({finished(ca, R"({ "rows": 3 })")}, {"prep", "train"}, "agent-1");
  EXPECT_EQ(h.recorded, std::vector<bool>{true});
  ASSERT_EQ(h.claims.size(), 1u);  // b, released by a's finish in the same transaction
  const flow::Claim& cb = h.claims[0];
  EXPECT_EQ(cb.task_id, b);
  EXPECT_EQ(cb.token, 1);
  EXPECT_EQ(cb.hyper_parameters, R"({"lr":0.1})");
  ASSERT_EQ(cb.dependencies.size(), 1u);
  EXPECT_EQ(cb.dependencies[0].task_id, a);
  EXPECT_EQ(cb.dependencies[0].result, R"({"rows":3})");
  const flow::TaskInfo ia = tasks.get(a), ib = tasks.get(b);
  EXPECT_EQ(ia.status, Status::Finished);
  EXPECT_EQ(ia.result, R"({"rows":3})");
  EXPECT_EQ(ia.finished_ms, t.ms());
  EXPECT_EQ(ib.status, Status::Running);
  EXPECT_EQ(ib.agent, "agent-1");
  EXPECT_EQ(ib.lease_expires_ms, t.ms() + ib.lease_ms);
  const std::vector<flow::TaskEvent> ev = flow::read_events(tasks, 0);
  ASSERT_EQ(static_cast<int64_t>(ev.size()), events_before + 1);
  EXPECT_EQ(ev.back().task_id, a);
  EXPECT_EQ(ev.back().kind, flow::EventKind::Finished);
  // Ends alone (no claim wanted) need no kinds.
  const flow::Handover last = tasks.complete({finished(cb, "1")}, {}, "agent-1", 0);
  EXPECT_EQ(last.recorded, std::vector<bool>{true});
  EXPECT_TRUE(last.claims.empty());
  EXPECT_EQ(tasks.get(b).status, Status::Finished);
}

TEST_P(FlowComplete, AnEndWhoseClaimIsNotCurrentIsSkippedAndFailuresAreRecorded) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  const int64_t a = tasks.submit("k", "{}", {.max_attempts = 2});
  const int64_t b = tasks.submit("k");
  const int64_t c = tasks.submit("k", "{}", {.max_attempts = 1});
  const int64_t d = tasks.submit("k", "{}", {.depends_on = {c}});
  const flow::Handover first = tasks.complete({}, {"k"}, "agent", 3);
  ASSERT_EQ(ids_of(first.claims), (std::vector<int64_t>{a, b}));  // half of the 3 claimable, rounded up
  const flow::Claim cc = *tasks.claim({"k"}, "agent");
  EXPECT_EQ(cc.task_id, c);
  ASSERT_TRUE(tasks.cancel(b));
  const flow::Handover h = tasks.complete({failed(first.claims[0], "boom"), finished(first.claims[1], "{}"), failed(cc, "fatal")},
                                          {"k"}, "agent", 1);
  EXPECT_EQ(h.recorded, (std::vector<bool>{true, false, true}));
  const flow::TaskInfo ia = tasks.get(a), ib = tasks.get(b), ic = tasks.get(c), id = tasks.get(d);
  EXPECT_EQ(ib.status, Status::Cancelled);  // the stale finish recorded nothing
  EXPECT_EQ(ib.result, "");
  EXPECT_EQ(ic.status, Status::Failed);     // its last attempt
  EXPECT_EQ(ic.error, "fatal");
  EXPECT_EQ(id.status, Status::Cancelled);  // with its dependent
  EXPECT_TRUE(contains_all(id.error, {"dependency " + std::to_string(c), "fatal"})) << id.error;
  // a went back to pending with its error, and was claimed again in the same transaction.
  ASSERT_EQ(ids_of(h.claims), std::vector<int64_t>{a});
  EXPECT_EQ(h.claims[0].token, 2);
  EXPECT_EQ(h.claims[0].attempt, 2);
  EXPECT_EQ(ia.status, Status::Running);
  EXPECT_EQ(ia.error, "boom");
}

TEST_P(FlowComplete, ABatchTakesHalfOfWhatIsClaimableAndEachClaimIsFencedAlone) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  std::vector<int64_t> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(tasks.submit("k", "{}", {.lease_ms = 1000}));
  const int64_t timed = tasks.submit("k", "{}", {.priority = 1, .timeout_ms = 500});
  const int64_t timed_too = tasks.submit("k", "{}", {.timeout_ms = 500});
  // Sees 8 (twice the 4 wanted), takes 4; the first is the highest priority, whatever its
  // timeout; later ones only without one.
  const flow::Handover h = tasks.complete({}, {"k"}, "agent-1", 4);
  ASSERT_EQ(ids_of(h.claims), (std::vector<int64_t>{timed, ids[0], ids[1], ids[2]}));
  EXPECT_EQ(h.claims[0].deadline_ms, t.ms() + 500);
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(h.claims[i].deadline_ms, 0);
    EXPECT_EQ(h.claims[i].token, 1);
    EXPECT_EQ(h.claims[i].lease_expires_ms, t.ms() + 1000);
  }
  EXPECT_EQ(tasks.get(timed_too).status, Status::Pending);
  // Each claim has its own lease: one heartbeated stays, the others expire and are replayed.
  t.advance(600);
  EXPECT_EQ(tasks.heartbeat(h.claims[1]), flow::Heartbeat::Renewed);
  t.advance(600);
  EXPECT_EQ(tasks.reclaim_expired(), 3);
  EXPECT_EQ(tasks.get(ids[0]).status, Status::Running);
  EXPECT_EQ(tasks.get(ids[1]).status, Status::Pending);
  // A stale claim of the batch is fenced, the current one recorded.
  const flow::Handover again = tasks.complete({finished(h.claims[1], "0"), finished(h.claims[2], "1")}, {"k"}, "agent-2", 1);
  EXPECT_EQ(again.recorded, (std::vector<bool>{true, false}));
  EXPECT_EQ(tasks.get(ids[0]).status, Status::Finished);
  EXPECT_EQ(tasks.get(ids[1]).result, "");
  ASSERT_EQ(again.claims.size(), 1u);
  EXPECT_EQ(again.claims[0].task_id, timed);  // timed out, pending again, still the highest priority
  EXPECT_EQ(again.claims[0].token, 2);
  EXPECT_EQ(tasks.get(timed).agent, "agent-2");
}

TEST_P(FlowComplete, BadInputWritesNothing) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  tasks.submit("k");
  tasks.submit("k");
  const flow::Claim c = *tasks.claim({"k"}, "agent");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { tasks.complete({finished(c, "{}"), finished(c, "{bad")}, {"k"}, "agent"); }),
                           {"complete", "result"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { tasks.complete({finished(c, "{}")}, {"k"}, "agent", 1001); }),
                           {"max_claims 1001", "0 to 1000"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { tasks.complete({finished(c, "{}")}, {}, "agent", 1); }), {"no task kinds"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { tasks.complete({finished(c, "{}")}, {"bad kind"}, "agent", 1); }),
                           {"invalid task kind"}));
  EXPECT_EQ(tasks.get(c.task_id).status, Status::Running);  // the good end was not recorded either
  EXPECT_EQ(loom_test::raw_sql(fs.url(), "SELECT COUNT(*) FROM tasks WHERE status = 'pending'"), std::vector<std::string>{"1"});
  flow::Agent agent(tasks, "a");
  agent.register_kind("k", [](const std::string&, flow::TaskContext&) { return std::string("1"); });
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { agent.run({.batch = -1}); }), {"batch -1", "1 to 1000", "0 to adapt"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { agent.run({.batch = 1001}); }), {"batch 1001"}));
}

// The default batch adapts to the tasks' run time: tasks far shorter than
// AgentOptions::kAdaptiveBatchMs share commits (several held by the agent at once), tasks
// longer than it are claimed one at a time (never held back behind each other).
TEST_P(FlowComplete, TheDefaultBatchGrowsForShortTasksAndStaysOneForLongOnes) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  flow::Tasks observer(store::Store::open(url()));
  const auto held = [&](const std::string& agent) {  // this agent's claims now, read by another handle
    int64_t n = 0;
    for (const flow::TaskInfo& t : observer.list({.status = Status::Running})) n += t.agent == agent;
    return n;
  };
  for (int i = 0; i < 200; ++i) tasks.submit("short");
  flow::Agent fast(tasks, "fast");
  int64_t most = 0;
  fast.register_kind("short", [&](const std::string&, flow::TaskContext&) {
    most = std::max(most, held("fast"));
    return std::string("{}");
  });
  EXPECT_EQ(fast.run({.stop_when_idle = true}), 200);
  EXPECT_GT(most, 4) << "short tasks were claimed one at a time";
  EXPECT_LE(most, flow::AgentOptions::kAdaptiveBatchMax);

  for (int i = 0; i < 6; ++i) tasks.submit("long");
  flow::Agent slow(tasks, "slow");
  most = 0;
  slow.register_kind("long", [&](const std::string&, flow::TaskContext&) {
    most = std::max(most, held("slow"));
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * flow::AgentOptions::kAdaptiveBatchMs));
    return std::string("{}");
  });
  EXPECT_EQ(slow.run({.stop_when_idle = true}), 6);
  EXPECT_EQ(most, 1) << "a task longer than a batch's time was held behind another";
}

// Agents with batches on threads, each with its own store connection, run a fan-out/fan-in
// plan twice over: every task runs once, never before its dependencies finished, and every
// task's finish leaves one event.
TEST_P(FlowComplete, BatchingAgentsRunAGraphOnceInDependencyOrder) {
  FreshStore fs(url());
  flow::TaskGraph p{.name = "fan"};
  p.tasks.push_back({.name = "root", .kind = "k"});
  flow::PlanTask mid{.name = "mid", .kind = "k"};
  for (int i = 0; i < 30; ++i) {
    p.tasks.push_back({.name = "a" + std::to_string(i), .kind = "k", .depends_on = {"root"}});
    mid.depends_on.push_back(p.tasks.back().name);
  }
  p.tasks.push_back(mid);
  flow::PlanTask last{.name = "last", .kind = "k"};
  for (int i = 0; i < 30; ++i) {
    p.tasks.push_back({.name = "b" + std::to_string(i), .kind = "k", .depends_on = {"mid"}});
    last.depends_on.push_back(p.tasks.back().name);
  }
  p.tasks.push_back(last);
  const int64_t plan = flow::Plans(flow::Tasks(fs.store)).submit(p);
  std::mutex m;
  std::map<int64_t, int> runs;
  std::vector<std::string> violations;
  std::vector<std::thread> agents;
  for (int a = 0; a < 3; ++a)
    agents.emplace_back([&, a] {
      flow::Tasks tasks(store::Store::open(fs.url()));
      flow::Agent agent(tasks, "agent-" + std::to_string(a));
      agent.register_kind("k", [&](const std::string&, flow::TaskContext& ctx) {
        std::lock_guard<std::mutex> l(m);
        ++runs[ctx.claim().task_id];
        for (const flow::DependencyResult& d : ctx.claim().dependencies)
          if (d.result != std::to_string(d.task_id))
            violations.push_back(std::to_string(ctx.claim().task_id) + " ran before " + std::to_string(d.task_id) + " finished");
        return std::to_string(ctx.claim().task_id);
      });
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!flow::is_terminal(flow::Plans(tasks).get(plan).status) && std::chrono::steady_clock::now() < give_up)
        agent.run({.poll_ms = 2, .stop_when_idle = true, .batch = 4});
    });
  for (auto& th : agents) th.join();
  EXPECT_TRUE(violations.empty()) << violations.front();
  flow::Tasks tasks(fs.store);
  EXPECT_EQ(flow::Plans(tasks).get(plan).status, Status::Finished);
  EXPECT_EQ(runs.size(), 63u);
  for (const auto& r : runs) EXPECT_EQ(r.second, 1) << "task " << r.first;
  std::set<int64_t> events;
  for (const flow::TaskEvent& e : flow::read_events(tasks, 0, 0, plan)) {
    EXPECT_EQ(e.kind, flow::EventKind::Finished);
    EXPECT_TRUE(events.insert(e.task_id).second) << "two events of task " << e.task_id;
  }
  EXPECT_EQ(events.size(), 63u);
}

// A task of a batch cancelled while the batch runs is never recorded as finished; max_tasks
// bounds the batch.
TEST_P(FlowComplete, ACancelledTaskOfABatchStaysCancelledAndMaxTasksBoundsTheBatch) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  const int64_t a = tasks.submit("k");
  const int64_t b = tasks.submit("k");
  for (int i = 0; i < 6; ++i) tasks.submit("k");
  flow::Agent agent(tasks, "agent");
  agent.register_kind("k", [&](const std::string&, flow::TaskContext& ctx) {
    if (ctx.claim().task_id == a) flow::Tasks(store::Store::open(fs.url())).cancel(b);
    return std::string("{}");
  });
  EXPECT_EQ(agent.run({.stop_when_idle = true, .max_tasks = 3, .batch = 8}), 3);
  EXPECT_EQ(tasks.get(a).status, Status::Finished);
  EXPECT_EQ(tasks.get(b).status, Status::Cancelled);
  EXPECT_EQ(tasks.get(b).result, "");
  EXPECT_EQ(tasks.list({.status = Status::Finished}).size(), 2u);
  EXPECT_EQ(tasks.list({.status = Status::Pending}).size(), 5u);
  EXPECT_EQ(tasks.list({.status = Status::Running}).size(), 0u);
}
