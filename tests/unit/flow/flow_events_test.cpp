// Task events and subscriptions (docs/workflow.md, "Notifications"): every task that finished,
// failed for good, was cancelled or replayed leaves one event, numbered in commit order; a
// subscriber resumes from its cursor without losing or repeating one; a blocked next() is woken
// by a commit in another connection (LISTEN/NOTIFY on PostgreSQL, a watched file on SQLite), not
// by re-reading. On SQLite and PostgreSQL.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/flow/events.h>
#include <loom/flow/plans.h>
#include <loom/flow/tasks.h>
#include <loom/store/notifications.h>
#include <loom/store/session.h>
#include <loom/store/store.h>

#include <thread>

#include "unit/flow/flow_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using loom_test::FreshStore;
using loom_test::ManualClock;
using flow::EventKind;

class FlowEvents : public loom_test::FlowBackendTest {};
INSTANTIATE_STORE_BACKENDS(FlowEvents);

namespace {

std::vector<std::pair<int64_t, EventKind>> kinds(const std::vector<flow::TaskEvent>& events) {
  std::vector<std::pair<int64_t, EventKind>> out;
  for (const auto& e : events) out.emplace_back(e.task_id, e.kind);
  return out;
}

}  // namespace

TEST_P(FlowEvents, EveryEndAndReplayLeavesOneEventInOrder) {
  FreshStore fs(url());
  ManualClock t;
  flow::Tasks tasks(fs.store, t.clock());
  const int64_t a = tasks.submit("k", "{}", {.max_attempts = 2});
  const int64_t b = tasks.submit("k", "{}", {.depends_on = {a}});
  const int64_t c = tasks.submit("k");
  auto ca = tasks.claim({"k"}, "x");
  ASSERT_EQ(ca->task_id, a);
  tasks.fail(*ca, "first");  // attempts left: a retry, no event
  EXPECT_TRUE(flow::read_events(tasks, 0).empty());
  ca = tasks.claim({"k"}, "x");
  ASSERT_EQ(ca->task_id, a);
  tasks.fail(*ca, "second");
  auto cc = tasks.claim({"k"}, "x");
  ASSERT_EQ(cc->task_id, c);
  tasks.finish(*cc, "{}");
  tasks.replay(a);

  const std::vector<flow::TaskEvent> events = flow::read_events(tasks, 0);
  EXPECT_EQ(kinds(events), (std::vector<std::pair<int64_t, EventKind>>{{a, EventKind::Failed},
                                                                       {b, EventKind::Cancelled},
                                                                       {c, EventKind::Finished},
                                                                       {a, EventKind::Replayed},
                                                                       {b, EventKind::Replayed}}));
  EXPECT_EQ(events[0].detail, "second");
  EXPECT_EQ(events[1].detail, "dependency " + std::to_string(a) + " failed: second");
  for (size_t i = 1; i < events.size(); ++i) EXPECT_GT(events[i].id, events[i - 1].id);
  EXPECT_EQ(events[2].created_ms, t.ms());
  EXPECT_EQ(flow::read_events(tasks, events[2].id).size(), 2u);
  EXPECT_EQ(flow::read_events(tasks, 0, 1).size(), 1u);
  EXPECT_EQ(std::string(flow::event_name(EventKind::Replayed)), "replayed");
}

TEST_P(FlowEvents, ASubscriberResumesFromItsCursorWithoutLossOrRepeat) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  flow::Plans plans(tasks);
  const int64_t plan = plans.submit({.name = "p", .tasks = {{.name = "one", .kind = "k"}, {.name = "two", .kind = "k"}}});
  const int64_t alone = tasks.submit("k");
  std::vector<int64_t> seen;
  int64_t cursor = 0;
  {
    flow::Subscription sub(tasks);
    EXPECT_FALSE(sub.next(0)) << "nothing yet";
    tasks.finish(*tasks.claim({"k"}, "x"), "{}");
    tasks.finish(*tasks.claim({"k"}, "x"), "{}");
    const auto e = sub.next(0);
    ASSERT_TRUE(e);
    seen.push_back(e->task_id);
    cursor = sub.cursor();
    EXPECT_EQ(cursor, e->id);
  }  // the subscriber stops here (its second event read but not returned: it is not lost)
  tasks.finish(*tasks.claim({"k"}, "x"), "{}");
  flow::Subscription again(tasks, {.after = cursor});
  while (auto e = again.next(0)) seen.push_back(e->task_id);
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 3u);

  flow::Subscription only_plan(tasks, {.plan_id = plan});
  int n = 0;
  while (auto e = only_plan.next(0)) {
    EXPECT_EQ(e->plan_id, plan);
    EXPECT_NE(e->task_id, alone);
    ++n;
  }
  EXPECT_EQ(n, 2);
  EXPECT_THROW(flow::Subscription(tasks, {.after = -1}), ValueError);
}

// next() blocks until another connection commits an event. Its re-read interval is set far
// beyond the test's limit, so only the wake (NOTIFY, or the watched file) can deliver it in time.
TEST_P(FlowEvents, ACommitElsewhereWakesABlockedSubscriber) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  const int64_t id = tasks.submit("k");
  flow::Subscription sub(tasks, {.recheck_ms = 600'000});
  std::thread finisher([u = fs.url()] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let next() block first
    flow::Tasks other(store::Store::open(u));
    other.finish(*other.claim({"k"}, "elsewhere"), R"({"done": true})");
  });
  const auto e = sub.next(120'000);
  finisher.join();
  ASSERT_TRUE(e) << "the subscriber was not woken";
  EXPECT_EQ(e->task_id, id);
  EXPECT_EQ(e->kind, EventKind::Finished);
}

TEST_P(FlowEvents, AListenerIsWokenByCommitsOnlyAndRefusesBadChannels) {
  FreshStore fs(url());
  store::Notifications listener(fs.store, "test_channel");
  store::Store writer = store::Store::open(fs.url());
  {
    store::Session s(writer, store::Access::Write);
    s.notify("test_channel");
  }  // rolled back: nothing sent
  EXPECT_FALSE(listener.wait(100));
  {
    store::Session s(writer, store::Access::Write);
    s.notify("other_channel");
    s.commit();
  }
  EXPECT_FALSE(listener.wait(100)) << "another channel";
  {
    store::Session s(writer, store::Access::Write);
    s.notify("test_channel");
    s.notify("test_channel");
    s.commit();
  }
  EXPECT_TRUE(listener.wait(60'000));
  EXPECT_FALSE(listener.wait(0)) << "a wait consumes every pending notification";
  EXPECT_THROW(store::Notifications(fs.store, "Bad-Channel"), ValueError);
  store::Session s(writer, store::Access::Write);
  EXPECT_THROW(s.notify(""), ValueError);
}
