#pragma once
// Task events (docs/workflow.md, "Notifications"): every task that finished, failed for good,
// was cancelled or replayed leaves an event in the store, numbered in commit order. A
// Subscription reads them after a cursor and blocks for the next without polling the tasks:
//
//   flow::Subscription events(tasks, {.after = saved_cursor});
//   while (auto e = events.next(/*timeout_ms=*/60'000))
//     std::printf("task %lld %s\n", (long long)e->task_id, flow::event_name(e->kind));
//   save(events.cursor());   // a restarted subscriber resumes after it: no event is lost
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/flow/tasks.h"
#include "loom/store/notifications.h"
#include "loom/store/record.h"

namespace loom::flow {

enum class EventKind { Finished, Failed, Cancelled, Replayed };
// Its one spelling per value (loom/store/record.h), the stored text.
constexpr store::Spellings<4> spellings(EventKind) { return {"task event", {"finished", "failed", "cancelled", "replayed"}}; }
LOOM_API const char* event_name(EventKind k);  // "finished", "failed", "cancelled", "replayed"

struct LOOM_API TaskEvent {
  int64_t id = 0;       // increasing in commit order: every event below it committed before it
  int64_t task_id = 0;
  int64_t plan_id = 0;  // 0: the task is in no plan
  EventKind kind = EventKind::Finished;
  std::string detail;   // failed: the error; cancelled: why (a dependency, a plan); else ""
  int64_t created_ms = 0;

  // Its columns of task_events and its JSON's keys, listed once (loom/store/record.h): the
  // reader and `loom tasks events --json` come from this list.
  template <class Visit>
  void fields(Visit&& visit) {
    visit("id", id);
    visit("task_id", task_id);
    visit("plan_id", plan_id);
    visit("event", kind);
    visit("detail", detail);
    visit("created_ms", created_ms);
  }
};

// Events with an id above `after` (of the plan `plan_id` only, when given), oldest first, at
// most `limit` (0: all).
LOOM_API std::vector<TaskEvent> read_events(const Tasks& tasks, int64_t after, int64_t limit = 0,
                                            std::optional<int64_t> plan_id = std::nullopt);

struct LOOM_API SubscriptionOptions {
  int64_t after = 0;               // the cursor to resume from (0: every event in the store)
  std::optional<int64_t> plan_id;  // only this plan's tasks' events
  // The longest a wait goes without re-reading the events table, so that an event whose wake
  // was lost (its writer killed between its commit and the wake, on SQLite; a listener
  // connection that broke) still arrives within this bound.
  int64_t recheck_ms = 1000;
};

class LOOM_API Subscription {
 public:
  explicit Subscription(Tasks tasks, SubscriptionOptions options = {});

  // The next event after the cursor, waiting at most `timeout_ms` for one to be committed
  // (nullopt then); moves the cursor to it.
  std::optional<TaskEvent> next(int64_t timeout_ms);
  // The id of the last event next() returned (options.after before the first): persist it to
  // resume after a restart.
  int64_t cursor() const { return cursor_; }

 private:
  Tasks tasks_;
  SubscriptionOptions options_;
  store::Notifications listener_;  // made before the first read: no commit falls between them
  std::deque<TaskEvent> ready_;
  int64_t cursor_ = 0;
};

}  // namespace loom::flow
