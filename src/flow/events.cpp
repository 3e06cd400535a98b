#include "loom/flow/events.h"

#include <algorithm>
#include <chrono>

#include "flow/dependencies.h"
#include "loom/store/session.h"

namespace loom::flow {

namespace {

// The columns of a TaskEvent, from its field list (loom/store/record.h).
const std::string& select_events() {
  static const std::string sql = "SELECT " + store::column_list<TaskEvent>() + " FROM task_events";
  return sql;
}

}  // namespace

const char* event_name(EventKind k) { return store::to_string(k); }

std::vector<TaskEvent> read_events(const Tasks& tasks, int64_t after, int64_t limit, std::optional<int64_t> plan_id) {
  if (limit < 0) throw ValueError("read_events: limit " + std::to_string(limit) + " is negative (valid: 0 for all, or a count)");
  std::string sql = select_events() + " WHERE id > ?";
  std::vector<store::SqlValue> params{after};
  if (plan_id) {
    sql += " AND plan_id = ?";
    params.emplace_back(*plan_id);
  }
  sql += " ORDER BY id";
  if (limit > 0) {
    sql += " LIMIT ?";
    params.emplace_back(limit);
  }
  store::Session session(tasks.store(), store::Access::Read);
  static const store::RowReader<TaskEvent> reader;
  std::vector<TaskEvent> out;
  for (const store::SqlRow& r : session.query(sql, params))
    out.push_back(reader.read(r));  // an unknown event: a BadStateError naming the column and the valid ones
  session.commit();
  return out;
}

Subscription::Subscription(Tasks tasks, SubscriptionOptions options)
    : tasks_(std::move(tasks)), options_(std::move(options)), listener_(tasks_.store(), detail::kEventChannel), cursor_(options_.after) {
  if (options_.after < 0) throw ValueError("Subscription: cursor " + std::to_string(options_.after) + " is negative (valid: 0 or an event id)");
  if (options_.recheck_ms < 1)
    throw ValueError("Subscription: recheck_ms " + std::to_string(options_.recheck_ms) + " is out of range (valid: 1 or more)");
}

std::optional<TaskEvent> Subscription::next(int64_t timeout_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms));
  for (;;) {
    if (ready_.empty()) {
      // Reading after the last event seen is enough: ids are taken and committed in one order
      // (the events' lock, src/flow/dependencies.h), so no lower id can commit later.
      const int64_t last = ready_.empty() ? cursor_ : ready_.back().id;
      for (TaskEvent& e : read_events(tasks_, last, 256, options_.plan_id)) ready_.push_back(std::move(e));
    }
    if (!ready_.empty()) {
      TaskEvent e = std::move(ready_.front());
      ready_.pop_front();
      cursor_ = e.id;
      return e;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    if (left <= 0) return std::nullopt;
    listener_.wait(std::min<int64_t>(left, options_.recheck_ms));
  }
}

}  // namespace loom::flow
