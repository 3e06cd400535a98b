#include "loom/flow/plans.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "core/utf8.h"
#include "flow/dependencies.h"
#include "flow/kind.h"
#include "loom/store/notifications.h"
#include "loom/store/session.h"
#include "loom/store/text.h"

namespace loom::flow {

using store::Access;
using store::Session;
using Row = store::SqlRow;

namespace {

// A task's name in a plan follows the rule of kinds (flow/kind.h).
void check_name(const std::string& name) {
  if (!detail::follows_kind_rule(name))
    throw ValueError("submit plan: invalid task name " + loom::detail::quote_text(name) + " (valid: " + detail::kKindRule +
                     ", unique in the plan)");
}

Status plan_status(const std::vector<TaskInfo>& tasks) {
  bool any_failed = false, any_cancelled = false, any_running = false, all_ended = true, all_finished = true;
  for (const TaskInfo& t : tasks) {
    any_failed = any_failed || t.status == Status::Failed;
    any_cancelled = any_cancelled || t.status == Status::Cancelled;
    any_running = any_running || t.status == Status::Running;
    all_ended = all_ended && is_terminal(t.status);
    all_finished = all_finished && t.status == Status::Finished;
  }
  if (all_finished) return Status::Finished;
  if (any_failed) return Status::Failed;
  if (all_ended && any_cancelled) return Status::Cancelled;
  return any_running ? Status::Running : Status::Pending;
}

// The plan's tasks in an order where each comes after its dependencies (Kahn's algorithm);
// ValueError naming the tasks of a cycle.
std::vector<size_t> topological_order(const TaskGraph& plan, const std::map<std::string, size_t>& index) {
  const size_t n = plan.tasks.size();
  std::vector<std::vector<size_t>> dependents(n);
  std::vector<size_t> missing(n, 0);
  for (size_t i = 0; i < n; ++i) {
    std::set<std::string> seen;
    for (const std::string& d : plan.tasks[i].depends_on) {
      const auto it = index.find(d);
      if (it == index.end())
        throw ValueError("submit plan: task '" + plan.tasks[i].name + "' depends on " + loom::detail::quote_text(d) +
                         ", which is not a task of the plan (valid: the name of another task of the plan)");
      if (it->second == i) throw ValueError("submit plan: task '" + plan.tasks[i].name + "' depends on itself");
      if (!seen.insert(d).second)
        throw ValueError("submit plan: task '" + plan.tasks[i].name + "' names dependency '" + d + "' twice");
      dependents[it->second].push_back(i);
      ++missing[i];
    }
  }
  std::vector<size_t> order, ready;
  for (size_t i = n; i-- > 0;)
    if (missing[i] == 0) ready.push_back(i);
  while (!ready.empty()) {
    const size_t i = ready.back();
    ready.pop_back();
    order.push_back(i);
    for (size_t j : dependents[i])
      if (--missing[j] == 0) ready.push_back(j);
  }
  if (order.size() < n) {
    std::string names;
    for (size_t i = 0; i < n; ++i)
      if (missing[i] > 0) names += (names.empty() ? "'" : ", '") + plan.tasks[i].name + "'";
    throw ValueError("submit plan: the dependencies form a cycle through " + names + " (valid: a directed acyclic graph)");
  }
  return order;
}

}  // namespace

int64_t PlanInfo::task_id(const std::string& name) const {
  for (const TaskInfo& t : tasks)
    if (t.name == name) return t.id;
  throw store::NotFoundError("plan " + std::to_string(id) + " has no task " + loom::detail::quote_text(name));
}

namespace detail {

CheckedPlan check_plan(const TaskGraph& plan) {
  if (plan.name.empty() || plan.name.size() > 256)
    throw ValueError("submit plan: the plan's name must be 1 to 256 bytes (it is " + std::to_string(plan.name.size()) + ")");
  if (plan.tasks.empty()) throw ValueError("submit plan: the plan '" + plan.name + "' has no tasks (valid: one or more)");
  std::map<std::string, size_t> index;
  CheckedPlan checked;
  for (size_t i = 0; i < plan.tasks.size(); ++i) {
    const PlanTask& t = plan.tasks[i];
    check_name(t.name);
    if (!index.emplace(t.name, i).second) throw ValueError("submit plan: two tasks are named '" + t.name + "' (valid: unique names)");
    check_kind("submit plan", t.kind);
    checked.hyper.push_back(canonical_json("submit plan", ("hyper-parameters of '" + t.name + "'").c_str(), t.hyper_parameters, true));
    check_options("submit plan", t.options);
  }
  checked.order = topological_order(plan, index);
  return checked;
}

int64_t insert_plan(Session& session, const TaskGraph& plan, const CheckedPlan& checked, int64_t now) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < plan.tasks.size(); ++i) index.emplace(plan.tasks[i].name, i);
  const int64_t plan_id =
      session.query("INSERT INTO plans (name, created_ms) VALUES (?, ?) RETURNING id", {store::storable_text(plan.name), now})[0].integer(0);
  std::vector<int64_t> ids(plan.tasks.size(), 0);
  for (size_t i : checked.order) {
    const PlanTask& t = plan.tasks[i];
    std::vector<int64_t> depends_on = t.options.depends_on;
    int64_t waiting = check_dependencies(session, "submit plan", depends_on);
    for (const std::string& d : t.depends_on) {
      depends_on.push_back(ids[index.at(d)]);
      ++waiting;  // a task of the plan: pending
    }
    ids[i] = insert_task(session, t.kind, checked.hyper[i], t.options, plan_id, t.name, depends_on, waiting, now);
  }
  return plan_id;
}

}  // namespace detail

int64_t Plans::submit(const TaskGraph& plan) {
  const detail::CheckedPlan checked = detail::check_plan(plan);
  for (const PlanTask& t : plan.tasks) detail::check_lineage(tasks_.store(), "submit plan", t.options.lineage);
  Session session(tasks_.store(), Access::RowWrite);
  const int64_t plan_id = detail::insert_plan(session, plan, checked, tasks_.now_ms());
  session.commit();
  return plan_id;
}

PlanInfo Plans::get(int64_t id) const {
  static const store::RowReader<PlanInfo> reader;
  std::vector<Row> rows;
  {
    Session session(tasks_.store(), Access::Read);
    rows = session.query("SELECT " + store::column_list<PlanInfo>() + " FROM plans WHERE id = ?", {id});
    session.commit();
  }
  if (rows.empty()) throw store::NotFoundError("plans: there is no plan " + std::to_string(id));
  PlanInfo p = reader.read(rows[0]);
  TaskFilter filter;
  filter.plan_id = id;
  p.tasks = tasks_.list(filter);
  p.status = plan_status(p.tasks);
  return p;
}

std::vector<PlanInfo> Plans::list(int64_t limit) const {
  if (limit < 0) throw ValueError("list plans: limit " + std::to_string(limit) + " is negative (valid: 0 for all, or a count)");
  std::vector<Row> rows;
  {
    Session session(tasks_.store(), Access::Read);
    rows = session.query(std::string("SELECT id FROM plans ORDER BY id") + (limit > 0 ? " LIMIT ?" : ""),
                         limit > 0 ? std::vector<store::SqlValue>{limit} : std::vector<store::SqlValue>{});
    session.commit();
  }
  std::vector<PlanInfo> out;
  for (const Row& r : rows) out.push_back(get(r.integer(0)));
  return out;
}

int64_t Plans::cancel(int64_t id) {
  Session session(tasks_.store(), Access::RowWrite);
  detail::lock_events(session);
  if (session.query("SELECT id FROM plans WHERE id = ?", {id}).empty())
    throw store::NotFoundError("cancel plan: there is no plan " + std::to_string(id));
  const int64_t now = tasks_.now_ms();
  const std::string open = detail::sql_literals({Status::Pending, Status::Running});
  const auto open_tasks = [&] {
    return session.query("SELECT COUNT(*) FROM tasks WHERE plan_id = ? AND status IN (" + open + ")", {id})[0].integer(0);
  };
  const int64_t before = open_tasks();
  const std::string why = "plan " + std::to_string(id) + " was cancelled";
  for (const Row& r : session.query("SELECT id FROM tasks WHERE plan_id = ? AND status IN (" + open + ") ORDER BY id", {id})) {
    if (session.execute("UPDATE tasks SET status = " + detail::sql_literal(Status::Cancelled) +
                            ", error = ?, finished_ms = ?, lease_expires_ms = NULL, deadline_ms = NULL WHERE id = ? AND status IN (" +
                            open + ")",
                        {why, now, r.integer(0)}) == 0)
      continue;  // ended by the cancellation of a dependency just above
    detail::record_event(session, r.integer(0), EventKind::Cancelled, why, now);
    detail::cancel_dependents(session, r.integer(0), "was cancelled: " + why, now);
  }
  const int64_t n = before - open_tasks();
  session.commit();
  return n;
}

std::vector<int64_t> Plans::replay(int64_t id) {
  Session session(tasks_.store(), Access::RowWrite);
  detail::lock_events(session);
  if (session.query("SELECT id FROM plans WHERE id = ?", {id}).empty())
    throw store::NotFoundError("replay plan: there is no plan " + std::to_string(id));
  std::vector<int64_t> roots;
  for (const Row& r : session.query(
           "SELECT id FROM tasks WHERE plan_id = ? AND status IN (" + detail::sql_literals({Status::Failed, Status::Cancelled}) +
               ") ORDER BY id",
           {id}))
    roots.push_back(r.integer(0));
  std::vector<int64_t> reopened = roots.empty() ? std::vector<int64_t>{} : detail::replay_in(session, roots, tasks_.now_ms());
  session.commit();
  return reopened;
}

PlanInfo Plans::wait(int64_t id, int64_t timeout_ms, int64_t poll_ms) const {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  store::Notifications events(tasks_.store(), detail::kEventChannel);  // before the first read: no end is missed
  for (;;) {
    PlanInfo p = get(id);
    bool done = true;
    for (const TaskInfo& t : p.tasks) done = done && is_terminal(t.status);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    if (done || left <= 0) return p;
    events.wait(std::clamp<int64_t>(left, 1, std::max<int64_t>(1, poll_ms)));
  }
}

}  // namespace loom::flow
