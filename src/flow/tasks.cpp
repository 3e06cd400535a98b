#include "loom/flow/tasks.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <chrono>
#include <thread>

#include "core/json_util.h"
#include "core/utf8.h"
#include "flow/kind.h"
#include "flow/task_schema.h"
#include "loom/store/session.h"
#include "loom/store/text.h"

namespace loom::flow {

using store::Access;
using store::Session;
using Row = store::SqlRow;
using Value = store::SqlValue;
using detail::check_kind;
using store::storable_text;

namespace {

constexpr const char* kStatusNames[] = {"pending", "running", "finished", "failed", "cancelled"};
constexpr size_t kMaxErrorBytes = 16384;  // an error text keeps its tail (where the cause usually is)

// Canonical JSON text of `text`, which must parse (and be an object when `object`).
std::string canonical_json(const char* op, const char* what, const std::string& text, bool object) {
  std::string error;
  const std::optional<nlohmann::json> j = loom::detail::parse_json(text, &error);
  if (!j) throw ValueError(std::string(op) + ": the " + what + " is not valid JSON: " + error);
  if (object && !j->is_object()) throw ValueError(std::string(op) + ": the " + what + " must be a JSON object, not " + j->type_name());
  return j->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void check_range(const char* option, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    throw ValueError("submit: " + std::string(option) + " " + std::to_string(v) + " is out of range (valid: " + std::to_string(lo) +
                     " to " + std::to_string(hi) + ")");
}

// (a command's stderr may hold anything: store::storable_text keeps what any backend can)
std::string clip_error(const std::string& e) {
  return storable_text(e.size() <= kMaxErrorBytes ? e : "..." + e.substr(e.size() - kMaxErrorBytes));
}

constexpr const char* kColumns =
    "SELECT id, kind, hyper_parameters, priority, status, attempts, max_attempts, timeout_ms, lease_ms, token, agent, "
    "lease_expires_ms, result, error, created_ms, started_ms, finished_ms FROM tasks";

int64_t int_or_zero(const Row& r, size_t i) { return r.is_null(i) ? 0 : r.integer(i); }
std::string text_or_empty(const Row& r, size_t i) { return r.is_null(i) ? std::string() : r.text(i); }

TaskInfo info_of(const Row& r) {
  TaskInfo t;
  t.id = r.integer(0);
  t.kind = r.text(1);
  t.hyper_parameters = r.text(2);
  t.priority = r.integer(3);
  t.status = parse_status(r.text(4));
  t.attempts = r.integer(5);
  t.max_attempts = r.integer(6);
  t.timeout_ms = r.integer(7);
  t.lease_ms = r.integer(8);
  t.token = r.integer(9);
  t.agent = text_or_empty(r, 10);
  t.lease_expires_ms = int_or_zero(r, 11);
  t.result = text_or_empty(r, 12);
  t.error = text_or_empty(r, 13);
  t.created_ms = r.integer(14);
  t.started_ms = int_or_zero(r, 15);
  t.finished_ms = int_or_zero(r, 16);
  return t;
}

// PostgreSQL: concurrent claimers skip the rows another transaction has locked instead of
// queueing behind it; SQLite's write transaction already excludes every other writer.
std::string locking(const Session& session) {
  return session.backend() == "postgresql" ? " FOR UPDATE SKIP LOCKED" : "";
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

void detail::check_kind(const char* op, const std::string& kind) {
  bool ok = !kind.empty() && kind.size() <= 128;
  for (char c : kind) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' || c == '/' || c == '-');
  if (!ok)
    throw ValueError(std::string(op) + ": invalid task kind " + loom::detail::quote_text(kind) +
                     " (valid: 1 to 128 characters of [A-Za-z0-9_.:/-])");
}

const char* status_name(Status s) { return kStatusNames[static_cast<int>(s)]; }

Status parse_status(const std::string& name) {
  for (int i = 0; i < 5; ++i)
    if (name == kStatusNames[i]) return static_cast<Status>(i);
  throw ValueError("unknown task status '" + name + "' (valid: pending, running, finished, failed, cancelled)");
}

int64_t system_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Tasks::Tasks(store::Store store, Clock clock) : store_(std::move(store)), clock_(clock ? std::move(clock) : Clock(system_clock_ms)) {
  store_.ensure_schema(detail::task_schema());  // flow's tables, created on first use of a store
}

int64_t Tasks::submit(const std::string& kind, const std::string& hyper_parameters, const TaskOptions& o) {
  check_kind("submit", kind);
  const std::string hyper = canonical_json("submit", "hyper-parameters", hyper_parameters, true);
  check_range("max_attempts", o.max_attempts, 1, 1000);
  check_range("timeout_ms", o.timeout_ms, 0, int64_t(365) * 24 * 3600 * 1000);
  check_range("lease_ms", o.lease_ms, 10, int64_t(24) * 3600 * 1000);
  Session session(store_, Access::RowWrite);
  const int64_t id = session
      .query("INSERT INTO tasks (kind, hyper_parameters, priority, status, attempts, max_attempts, timeout_ms, lease_ms, token, "
              "created_ms) VALUES (?, ?, ?, 'pending', 0, ?, ?, ?, 0, ?) RETURNING id",
              {kind, hyper, o.priority, o.max_attempts, o.timeout_ms, o.lease_ms, clock_()})[0]
      .integer(0);
  session.commit();
  return id;
}

TaskInfo Tasks::get(int64_t id) const {
  Session session(store_, Access::Read);
  const std::vector<Row> rows = session.query(std::string(kColumns) + " WHERE id = ?", {id});
  if (rows.empty()) throw store::NotFoundError("tasks: there is no task " + std::to_string(id));
  return info_of(rows[0]);
}

std::vector<TaskInfo> Tasks::list(const TaskFilter& f) const {
  if (f.kind) check_kind("list", *f.kind);
  if (f.limit < 0) throw ValueError("list: limit " + std::to_string(f.limit) + " is negative (valid: 0 for all, or a count)");
  std::string sql = std::string(kColumns) + " WHERE 1 = 1";
  std::vector<Value> params;
  if (f.kind) {
    sql += " AND kind = ?";
    params.emplace_back(*f.kind);
  }
  if (f.status) {
    sql += " AND status = ?";
    params.emplace_back(std::string(status_name(*f.status)));
  }
  sql += " ORDER BY id";
  if (f.limit > 0) {
    sql += " LIMIT ?";
    params.emplace_back(f.limit);
  }
  Session session(store_, Access::Read);
  std::vector<TaskInfo> out;
  for (const Row& r : session.query(sql, params)) out.push_back(info_of(r));
  return out;
}

bool Tasks::cancel(int64_t id) {
  Session session(store_, Access::RowWrite);
  const int64_t changed = session.execute(
      "UPDATE tasks SET status = 'cancelled', finished_ms = ?, lease_expires_ms = NULL WHERE id = ? AND status IN ('pending', 'running')",
      {clock_(), id});
  if (changed == 0 && session.query("SELECT id FROM tasks WHERE id = ?", {id}).empty())
    throw store::NotFoundError("cancel: there is no task " + std::to_string(id));
  session.commit();
  return changed > 0;
}

int64_t Tasks::reclaim_in(Session& session, int64_t now) {
  const std::vector<Row> expired =
      session.query("SELECT id, token, attempts, max_attempts, timeout_ms, deadline_ms, lease_expires_ms, agent FROM tasks "
                 "WHERE status = 'running' AND lease_expires_ms <= ? ORDER BY id" + locking(session),
                 {now});
  for (const Row& r : expired) {
    const int64_t attempts = r.integer(2), max_attempts = r.integer(3), deadline = int_or_zero(r, 5);
    const std::string of = " (attempt " + std::to_string(attempts) + " of " + std::to_string(max_attempts) + ", agent '" +
                           text_or_empty(r, 7) + "')";
    const std::string error = deadline > 0 && r.integer(6) >= deadline
                                  ? "timed out after " + std::to_string(r.integer(4)) + " ms" + of
                                  : "lease expired: the agent stopped heartbeating" + of;
    const bool last = attempts >= max_attempts;
    session.execute("UPDATE tasks SET status = ?, error = ?, lease_expires_ms = NULL, deadline_ms = NULL, finished_ms = ? "
                 "WHERE id = ? AND token = ? AND status = 'running'",
                 {std::string(last ? "failed" : "pending"), error, last ? Value(now) : Value(), r.integer(0), r.integer(1)});
  }
  return static_cast<int64_t>(expired.size());
}

int64_t Tasks::reclaim_expired() {
  Session session(store_, Access::RowWrite);
  const int64_t n = reclaim_in(session, clock_());
  session.commit();
  return n;
}

std::optional<Claim> Tasks::claim(const std::vector<std::string>& kinds, const std::string& agent) {
  if (kinds.empty()) throw ValueError("claim: no task kinds given (valid: one or more kinds)");
  std::string in;
  std::vector<Value> params;
  for (const std::string& k : kinds) {
    check_kind("claim", k);
    in += in.empty() ? "?" : ", ?";
    params.emplace_back(k);
  }
  const std::string holder = storable_text(agent);
  Session session(store_, Access::RowWrite);
  const int64_t now = clock_();
  reclaim_in(session, now);
  const std::vector<Row> rows =
      session.query("SELECT id, kind, hyper_parameters, token, max_attempts, timeout_ms, lease_ms FROM tasks WHERE status = 'pending' "
                 "AND kind IN (" + in + ") ORDER BY priority DESC, id LIMIT 1" + locking(session),
                 params);
  if (rows.empty()) {
    session.commit();  // the reclaims
    return std::nullopt;
  }
  const Row& r = rows[0];
  Claim c;
  c.task_id = r.integer(0);
  c.kind = r.text(1);
  c.hyper_parameters = r.text(2);
  c.token = r.integer(3) + 1;
  c.attempt = c.token;
  c.max_attempts = r.integer(4);
  c.timeout_ms = r.integer(5);
  c.lease_ms = r.integer(6);
  c.deadline_ms = c.timeout_ms > 0 ? now + c.timeout_ms : 0;
  c.lease_expires_ms = lease_until(now, c.lease_ms, c.deadline_ms);
  session.execute("UPDATE tasks SET status = 'running', token = ?, attempts = ?, agent = ?, lease_expires_ms = ?, deadline_ms = ?, "
               "started_ms = COALESCE(started_ms, ?) WHERE id = ?",
               {c.token, c.attempt, holder, c.lease_expires_ms, c.deadline_ms > 0 ? Value(c.deadline_ms) : Value(), now, c.task_id});
  session.commit();
  return c;
}

Heartbeat Tasks::heartbeat(const Claim& c) {
  Session session(store_, Access::RowWrite);
  const int64_t until = lease_until(clock_(), c.lease_ms, c.deadline_ms);
  if (session.execute("UPDATE tasks SET lease_expires_ms = ? WHERE id = ? AND token = ? AND status = 'running'",
                      {until, c.task_id, c.token}) > 0) {
    session.commit();
    return Heartbeat::Renewed;
  }
  const std::vector<Row> rows = session.query("SELECT status, token FROM tasks WHERE id = ?", {c.task_id});
  session.commit();
  if (!rows.empty() && rows[0].integer(1) == c.token && rows[0].text(0) == "cancelled") return Heartbeat::Cancelled;
  return Heartbeat::Lost;
}

void Tasks::finish(const Claim& c, const std::string& result) {
  const std::string json = canonical_json("finish", "result", result, false);
  Session session(store_, Access::RowWrite);
  if (session.execute("UPDATE tasks SET status = 'finished', result = ?, finished_ms = ?, lease_expires_ms = NULL, "
                         "deadline_ms = NULL WHERE id = ? AND token = ? AND status = 'running'",
                         {json, clock_(), c.task_id, c.token}) == 0)
    claim_lost(session, "finish", c);
  session.commit();
}

Status Tasks::fail(const Claim& c, const std::string& error) {
  Session session(store_, Access::RowWrite);
  const int64_t now = clock_();
  // The next status is decided here rather than in SQL, so that no parameter needs a type
  // the backend would have to infer (a CASE of parameters is text to PostgreSQL).
  const std::vector<Row> rows = session.query("SELECT attempts, max_attempts FROM tasks WHERE id = ? AND token = ? AND status = 'running'",
                                           {c.task_id, c.token});
  if (rows.empty()) claim_lost(session, "fail", c);
  const Status next = rows[0].integer(0) >= rows[0].integer(1) ? Status::Failed : Status::Pending;
  session.execute("UPDATE tasks SET status = ?, finished_ms = ?, error = ?, lease_expires_ms = NULL, deadline_ms = NULL "
               "WHERE id = ? AND token = ? AND status = 'running'",
               {std::string(status_name(next)), next == Status::Failed ? Value(now) : Value(), clip_error(error), c.task_id, c.token});
  session.commit();
  return next;
}

std::vector<TaskInfo> Tasks::wait(const std::vector<int64_t>& ids, int64_t timeout_ms, int64_t poll_ms) const {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    std::vector<TaskInfo> out;
    bool done = true;
    for (int64_t id : ids) {
      out.push_back(get(id));
      done = done && is_terminal(out.back().status);
    }
    if (done || std::chrono::steady_clock::now() >= until) return out;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::max<int64_t>(1, poll_ms)));
  }
}

}  // namespace loom::flow
