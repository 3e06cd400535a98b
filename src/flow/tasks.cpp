#include "loom/flow/tasks.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <thread>

#include "core/json_util.h"
#include "core/utf8.h"
#include "flow/dependencies.h"
#include "flow/kind.h"
#include "flow/task_schema.h"
#include "loom/store/notifications.h"
#include "loom/store/session.h"
#include "loom/store/text.h"

namespace loom::flow {

using store::Access;
using store::Session;
using Row = store::SqlRow;
using Value = store::SqlValue;
using detail::check_kind;
using store::storable_text;
using detail::canonical_json;
using detail::clip_error;
using detail::lock_events;
using detail::record_event;

namespace {

// The columns of a TaskInfo, from its field list (loom/store/record.h).
const std::string& select_tasks() {
  static const std::string sql = "SELECT " + store::column_list<TaskInfo>() + " FROM tasks";
  return sql;
}

int64_t int_or_zero(const Row& r, size_t i) { return r.is_null(i) ? 0 : r.integer(i); }
std::string text_or_empty(const Row& r, size_t i) { return r.is_null(i) ? std::string() : r.text(i); }

TaskInfo info_of(const Row& r) {
  static const store::RowReader<TaskInfo> reader;
  return reader.read(r);
}

// What a claim reads of a task: its columns, and the reader of its lineage among them.
const std::pair<std::string, store::RowReader<Lineage>>& claim_columns() {
  static const auto columns = [] {
    std::vector<std::string> names{"id", "kind", "hyper_parameters", "token", "max_attempts", "timeout_ms", "lease_ms", "attempts"};
    for (std::string& c : store::column_names<Lineage>()) names.push_back(std::move(c));
    std::string list;
    for (const std::string& c : names) list += (list.empty() ? "" : ", ") + c;
    return std::pair<std::string, store::RowReader<Lineage>>(list, store::RowReader<Lineage>(names));
  }();
  return columns;
}

// Fills the depends_on of `tasks` (ordered by id) from one query.
void attach_dependencies(Session& session, std::vector<TaskInfo>& tasks) {
  if (tasks.empty()) return;
  std::map<int64_t, TaskInfo*> by_id;
  for (TaskInfo& t : tasks) by_id[t.id] = &t;
  for (const Row& r : session.query("SELECT task_id, depends_on FROM task_dependencies WHERE task_id >= ? AND task_id <= ? "
                                    "ORDER BY task_id, depends_on",
                                    {by_id.begin()->first, by_id.rbegin()->first}))
    if (auto it = by_id.find(r.integer(0)); it != by_id.end()) it->second->depends_on.push_back(r.integer(1));
}

std::vector<DependencyResult> dependency_results(Session& session, int64_t id) {
  std::vector<DependencyResult> out;
  for (const Row& r : session.query("SELECT t.id, t.name, t.kind, t.result FROM task_dependencies d JOIN tasks t ON t.id = d.depends_on "
                                    "WHERE d.task_id = ? ORDER BY t.id",
                                    {id}))
    out.push_back({r.integer(0), text_or_empty(r, 1), r.text(2), text_or_empty(r, 3)});
  return out;
}

// The lease of an attempt that started at `start`: `now + lease`, never past the deadline.
int64_t lease_until(int64_t now, int64_t lease_ms, int64_t deadline_ms) {
  const int64_t until = now + lease_ms;
  return deadline_ms > 0 && deadline_ms < until ? deadline_ms : until;
}

// Why a claim of task `id` is not current, for ClaimLostError.
[[noreturn]] void claim_lost(Session& session, const char* op, const Claim& c) {
  const std::vector<Row> rows = session.query("SELECT status, token FROM tasks WHERE id = ?", {c.task_id});
  if (rows.empty()) throw store::NotFoundError(std::string(op) + ": there is no task " + std::to_string(c.task_id));
  throw ClaimLostError(std::string(op) + ": claim " + std::to_string(c.token) + " of task " + std::to_string(c.task_id) +
                       " is no longer current (the task is " + rows[0].text(0) + " at claim " + std::to_string(rows[0].integer(1)) +
                       "): nothing was recorded");
}

}  // namespace

bool detail::follows_kind_rule(const std::string& text) {
  bool ok = !text.empty() && text.size() <= 128;
  for (char c : text) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' || c == '/' || c == '-');
  return ok;
}

void detail::check_kind(const char* op, const std::string& kind) {
  if (!follows_kind_rule(kind))
    throw ValueError(std::string(op) + ": invalid task kind " + loom::detail::quote_text(kind) + " (valid: " + kKindRule + ")");
}

const char* status_name(Status s) { return store::to_string(s); }

Status parse_status(const std::string& name) { return store::parse_state<Status>(name); }

int64_t system_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool Tasks::ready(const store::Store& store) {
  store::Session read(store, store::Access::Read);
  for (const store::SchemaPart* part : {&detail::task_schema(), &detail::stream_schema()}) {
    const auto rows = read.query("SELECT version FROM loom_schema_parts WHERE part = ?", {part->name});
    if (rows.empty() || rows[0].integer(0) != part->migrations.back().version) return false;
  }
  read.commit();
  return true;
}

Tasks::Tasks(store::Store store, Clock clock) : store_(std::move(store)), clock_(clock ? std::move(clock) : Clock(system_clock_ms)) {
  store_.ensure_schema(detail::task_schema());    // flow's tables, created on first use of a store
  store_.ensure_schema(detail::stream_schema());  // and the stream controllers' (after: it extends tasks)
}

int64_t Tasks::submit(const std::string& kind, const std::string& hyper_parameters, const TaskOptions& o) {
  check_kind("submit", kind);
  const std::string hyper = canonical_json("submit", "hyper-parameters", hyper_parameters, true);
  detail::check_options("submit", o);
  detail::check_lineage(store_, "submit", o.lineage);
  Session session(store_, Access::RowWrite);
  const int64_t waiting = detail::check_dependencies(session, "submit", o.depends_on);
  const int64_t id = detail::insert_task(session, kind, hyper, o, 0, "", o.depends_on, waiting, clock_());
  session.commit();
  return id;
}

TaskInfo Tasks::get(int64_t id) const {
  Session session(store_, Access::Read);
  const std::vector<Row> rows = session.query(select_tasks() + " WHERE id = ?", {id});
  if (rows.empty()) throw store::NotFoundError("tasks: there is no task " + std::to_string(id));
  std::vector<TaskInfo> one{info_of(rows[0])};
  attach_dependencies(session, one);
  return one[0];
}

std::vector<TaskInfo> Tasks::list(const TaskFilter& f) const {
  if (f.kind) check_kind("list", *f.kind);
  if (f.limit < 0) throw ValueError("list: limit " + std::to_string(f.limit) + " is negative (valid: 0 for all, or a count)");
  std::string sql = select_tasks() + " WHERE 1 = 1";
  std::vector<Value> params;
  if (f.kind) {
    sql += " AND kind = ?";
    params.emplace_back(*f.kind);
  }
  if (f.status) {
    sql += " AND status = ?";
    params.emplace_back(std::string(status_name(*f.status)));
  }
  if (f.plan_id) {
    sql += " AND plan_id = ?";
    params.emplace_back(*f.plan_id);
  }
  sql += " ORDER BY id";
  if (f.limit > 0) {
    sql += " LIMIT ?";
    params.emplace_back(f.limit);
  }
  Session session(store_, Access::Read);
  std::vector<TaskInfo> out;
  for (const Row& r : session.query(sql, params)) out.push_back(info_of(r));
  attach_dependencies(session, out);
  return out;
}

bool Tasks::cancel(int64_t id) {
  Session session(store_, Access::RowWrite);
  lock_events(session);
  const int64_t now = clock_();
  const int64_t changed = session.execute(
      "UPDATE tasks SET status = " + detail::sql_literal(Status::Cancelled) + ", finished_ms = ?, lease_expires_ms = NULL WHERE id = ? " +
          "AND status IN (" + detail::sql_literals({Status::Pending, Status::Running}) + ")",
      {now, id});
  if (changed == 0 && session.query("SELECT id FROM tasks WHERE id = ?", {id}).empty())
    throw store::NotFoundError("cancel: there is no task " + std::to_string(id));
  if (changed > 0) {
    record_event(session, id, EventKind::Cancelled, "", now);
    detail::cancel_dependents(session, id, "was cancelled", now);
  }
  session.commit();
  return changed > 0;
}

int64_t Tasks::reclaim_in(Session& session, int64_t now) {
  const std::vector<Row> expired =
      session.query("SELECT id, token, attempts, max_attempts, timeout_ms, deadline_ms, lease_expires_ms, agent FROM tasks "
                 "WHERE status = " + detail::sql_literal(Status::Running) + " AND lease_expires_ms <= ? ORDER BY id" +
                     detail::skip_locked(session),
                 {now});
  for (const Row& r : expired) {
    const int64_t attempts = r.integer(2), max_attempts = r.integer(3), deadline = int_or_zero(r, 5);
    const std::string of = " (attempt " + std::to_string(attempts) + " of " + std::to_string(max_attempts) + ", agent '" +
                           text_or_empty(r, 7) + "')";
    const std::string error = deadline > 0 && r.integer(6) >= deadline
                                  ? "timed out after " + std::to_string(r.integer(4)) + " ms" + of
                                  : "lease expired: the agent stopped heartbeating" + of;
    const bool last = attempts >= max_attempts;
    if (session.execute("UPDATE tasks SET status = ?, error = ?, lease_expires_ms = NULL, deadline_ms = NULL, finished_ms = ? "
                        "WHERE id = ? AND token = ? AND status = " + detail::sql_literal(Status::Running),
                        {std::string(status_name(last ? Status::Failed : Status::Pending)), error, last ? Value(now) : Value(), r.integer(0), r.integer(1)}) > 0) {
      if (!last) {
        session.notify(detail::kReadyChannel);
        continue;
      }
      record_event(session, r.integer(0), EventKind::Failed, error, now);
      detail::cancel_dependents(session, r.integer(0), "failed: " + error, now);
    }
  }
  return static_cast<int64_t>(expired.size());
}

int64_t Tasks::reclaim_expired() {
  Session session(store_, Access::RowWrite);
  lock_events(session);
  const int64_t n = reclaim_in(session, clock_());
  session.commit();
  return n;
}

namespace {

// The kinds of a claim, checked: ValueError for none or an invalid one.
void check_kinds(const char* op, const std::vector<std::string>& kinds) {
  if (kinds.empty()) throw ValueError(std::string(op) + ": no task kinds given (valid: one or more kinds)");
  for (const std::string& k : kinds) check_kind(op, k);
}

// Records the result of claim `c` (after lock_events; its dependents are released and its event
// recorded by the caller); false, nothing written, when the claim is not current.
bool record_result(Session& session, const Claim& c, const std::string& json, int64_t now) {
  return session.execute("UPDATE tasks SET status = " + detail::sql_literal(Status::Finished) +
                             ", result = ?, finished_ms = ?, lease_expires_ms = NULL, deadline_ms = NULL WHERE id = ? AND token = ? "
                             "AND status = " + detail::sql_literal(Status::Running),
                         {json, now, c.task_id, c.token}) > 0;
}

// Records a failed attempt of claim `c` (after lock_events; `error` clipped); its new status, or
// nullopt, nothing written, when the claim is not current.
std::optional<Status> fail_in(Session& session, const Claim& c, const std::string& error, int64_t now) {
  // The next status is decided here rather than in SQL, so that no parameter needs a type
  // the backend would have to infer (a CASE of parameters is text to PostgreSQL).
  const std::vector<Row> rows = session.query(
      "SELECT attempts, max_attempts FROM tasks WHERE id = ? AND token = ? AND status = " + detail::sql_literal(Status::Running),
      {c.task_id, c.token});
  if (rows.empty()) return std::nullopt;
  const Status next = rows[0].integer(0) >= rows[0].integer(1) ? Status::Failed : Status::Pending;
  session.execute("UPDATE tasks SET status = ?, finished_ms = ?, error = ?, lease_expires_ms = NULL, deadline_ms = NULL "
                  "WHERE id = ? AND token = ? AND status = " + detail::sql_literal(Status::Running),
                  {std::string(status_name(next)), next == Status::Failed ? Value(now) : Value(), error, c.task_id, c.token});
  if (next == Status::Failed) {
    record_event(session, c.task_id, EventKind::Failed, error, now);
    detail::cancel_dependents(session, c.task_id, "failed: " + error, now);
  } else {
    session.notify(detail::kReadyChannel);  // its retry
  }
  return next;
}

}  // namespace

std::vector<Claim> Tasks::claim_in(Session& session, const std::vector<std::string>& kinds, const std::string& holder, int64_t max,
                                   bool events_locked) {
  std::vector<Claim> out;
  if (max <= 0) return out;
  std::string in;
  std::vector<Value> params;
  for (const std::string& k : kinds) {
    in += in.empty() ? "?" : ", ?";
    params.emplace_back(k);
  }
  const int64_t now = clock_();
  // A reclaim may fail a task (an event): the events' lock is taken first, but only when there
  // is something to reclaim, so that claims do not queue behind results being recorded.
  if (!session.query("SELECT id FROM tasks WHERE status = " + detail::sql_literal(Status::Running) + " AND lease_expires_ms <= ? LIMIT 1",
                     {now})
           .empty()) {
    if (!events_locked) lock_events(session);
    reclaim_in(session, now);
  }
  // Twice as many as wanted are looked at, and at most half of those taken: another agent
  // claiming at the same time still finds work.
  params.emplace_back(max == 1 ? int64_t{1} : 2 * max);
  const std::vector<Row> rows =
      session.query("SELECT " + claim_columns().first + " FROM tasks "
                    "WHERE status = " + detail::sql_literal(Status::Pending) + " AND waiting = 0 AND kind IN (" + in +
                    ") ORDER BY priority DESC, id LIMIT ?" +
                    detail::skip_locked(session),
                    params);
  const size_t take = std::min(static_cast<size_t>(max), (rows.size() + 1) / 2);
  std::vector<Value> ids;
  std::map<int64_t, size_t> at;  // task id -> its claim in `out`
  for (size_t i = 0; i < rows.size() && out.size() < take; ++i) {
    const Row& r = rows[i];
    if (i > 0 && r.integer(5) != 0) continue;  // a timeout would run while it waits its turn
    Claim c;
    c.task_id = r.integer(0);
    c.kind = r.text(1);
    c.hyper_parameters = r.text(2);
    c.token = r.integer(3) + 1;
    c.attempt = r.integer(7) + 1;
    c.lineage = claim_columns().second.read(r);
    c.max_attempts = r.integer(4);
    c.timeout_ms = r.integer(5);
    c.lease_ms = r.integer(6);
    c.deadline_ms = c.timeout_ms > 0 ? now + c.timeout_ms : 0;
    c.lease_expires_ms = lease_until(now, c.lease_ms, c.deadline_ms);
    ids.emplace_back(c.task_id);
    at[c.task_id] = out.size();
    out.push_back(std::move(c));
  }
  if (out.empty()) return out;
  // One statement for the batch, computing in SQL what the claims above computed (the rows are
  // this transaction's: locked on PostgreSQL, and SQLite's writer is alone).
  const std::string claimed = detail::in_list(ids.size());
  std::vector<Value> update{now, now, now, holder, now};
  update.insert(update.end(), ids.begin(), ids.end());
  session.execute("UPDATE tasks SET status = " + detail::sql_literal(Status::Running) + ", token = token + 1, attempts = attempts + 1, "
                  "deadline_ms = CASE WHEN timeout_ms > 0 THEN ? + timeout_ms END, "
                  "lease_expires_ms = CASE WHEN timeout_ms > 0 AND timeout_ms < lease_ms THEN ? + timeout_ms ELSE ? + lease_ms END, "
                  "agent = ?, started_ms = COALESCE(started_ms, ?) WHERE id IN (" + claimed + ")",
                  update);
  for (const Row& r : session.query("SELECT d.task_id, t.id, t.name, t.kind, t.result FROM task_dependencies d "
                                    "JOIN tasks t ON t.id = d.depends_on WHERE d.task_id IN (" + claimed + ") ORDER BY d.task_id, t.id",
                                    ids))
    out[at.at(r.integer(0))].dependencies.push_back({r.integer(1), text_or_empty(r, 2), r.text(3), text_or_empty(r, 4)});
  return out;
}

std::optional<Claim> Tasks::claim(const std::vector<std::string>& kinds, const std::string& agent) {
  check_kinds("claim", kinds);
  Session session(store_, Access::RowWrite);
  std::vector<Claim> claims = claim_in(session, kinds, storable_text(agent), 1, false);
  session.commit();  // the claim, or the reclaims alone
  if (claims.empty()) return std::nullopt;
  return std::move(claims[0]);
}

Handover Tasks::complete(const std::vector<TaskEnd>& ends, const std::vector<std::string>& kinds, const std::string& agent,
                         int64_t max_claims) {
  if (max_claims < 0 || max_claims > 1000)
    throw ValueError("complete: max_claims " + std::to_string(max_claims) + " is out of range (valid: 0 to 1000)");
  if (max_claims > 0) check_kinds("complete", kinds);
  std::vector<std::string> texts;  // each end's result (canonical JSON) or error (clipped)
  for (const TaskEnd& e : ends) texts.push_back(e.ok ? canonical_json("complete", "result", e.result, false) : clip_error(e.error));
  const std::string holder = storable_text(agent);
  Session session(store_, Access::RowWrite);
  if (!ends.empty()) lock_events(session);
  const int64_t now = clock_();
  Handover h;
  std::vector<int64_t> finished;
  for (size_t i = 0; i < ends.size(); ++i) {
    if (!ends[i].ok) {
      h.recorded.push_back(fail_in(session, ends[i].claim, texts[i], now).has_value());
      continue;
    }
    h.recorded.push_back(record_result(session, ends[i].claim, texts[i], now));
    if (h.recorded.back()) finished.push_back(ends[i].claim.task_id);
  }
  detail::release_dependents(session, finished);
  detail::record_finished(session, finished, now);
  h.claims = claim_in(session, kinds, holder, max_claims, !ends.empty());
  session.commit();
  return h;
}

Heartbeat Tasks::heartbeat(const Claim& c) {
  Session session(store_, Access::RowWrite);
  const int64_t until = lease_until(clock_(), c.lease_ms, c.deadline_ms);
  if (session.execute("UPDATE tasks SET lease_expires_ms = ? WHERE id = ? AND token = ? AND status = " + detail::sql_literal(Status::Running),
                      {until, c.task_id, c.token}) > 0) {
    session.commit();
    return Heartbeat::Renewed;
  }
  const std::vector<Row> rows = session.query("SELECT status, token FROM tasks WHERE id = ?", {c.task_id});
  session.commit();
  if (!rows.empty() && rows[0].integer(1) == c.token && detail::stored_status(rows[0], 0) == Status::Cancelled) return Heartbeat::Cancelled;
  return Heartbeat::Lost;
}

void Tasks::finish(const Claim& c, const std::string& result) {
  const std::string json = canonical_json("finish", "result", result, false);
  Session session(store_, Access::RowWrite);
  lock_events(session);
  const int64_t now = clock_();
  if (!record_result(session, c, json, now)) claim_lost(session, "finish", c);
  detail::release_dependents(session, {c.task_id});
  detail::record_finished(session, {c.task_id}, now);
  session.commit();
}

Status Tasks::fail(const Claim& c, const std::string& error) {
  Session session(store_, Access::RowWrite);
  lock_events(session);
  const std::optional<Status> next = fail_in(session, c, clip_error(error), clock_());
  if (!next) claim_lost(session, "fail", c);
  session.commit();
  return *next;
}

std::vector<int64_t> Tasks::replay(int64_t id) {
  Session session(store_, Access::RowWrite);
  lock_events(session);
  std::vector<int64_t> reopened = detail::replay_in(session, {id}, clock_());
  session.commit();
  return reopened;
}

std::vector<DependencyResult> Tasks::results_of_dependencies(int64_t id) const {
  Session session(store_, Access::Read);
  if (session.query("SELECT id FROM tasks WHERE id = ?", {id}).empty())
    throw store::NotFoundError("results_of_dependencies: there is no task " + std::to_string(id));
  return dependency_results(session, id);
}

std::vector<TaskInfo> Tasks::wait(const std::vector<int64_t>& ids, int64_t timeout_ms, int64_t poll_ms) const {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  store::Notifications events(store_, detail::kEventChannel);  // before the first read: no end is missed
  for (;;) {
    std::vector<TaskInfo> out;
    bool done = true;
    for (int64_t id : ids) {
      out.push_back(get(id));
      done = done && is_terminal(out.back().status);
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    if (done || left <= 0) return out;
    events.wait(std::clamp<int64_t>(left, 1, std::max<int64_t>(1, poll_ms)));
  }
}

}  // namespace loom::flow
