#include "flow/dependencies.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "core/json_util.h"
#include "core/utf8.h"
#include "loom/store/datasets.h"
#include "loom/store/model_registry.h"
#include "loom/store/queries.h"
#include "loom/store/text.h"

namespace loom::flow::detail {

using store::Session;
using Row = store::SqlRow;
using Value = store::SqlValue;

namespace {

constexpr size_t kMaxErrorBytes = 16384;  // an error text keeps its tail (where the cause usually is)

void check_range(const char* op, const char* option, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    throw ValueError(std::string(op) + ": " + option + " " + std::to_string(v) + " is out of range (valid: " + std::to_string(lo) +
                     " to " + std::to_string(hi) + ")");
}

Value opt(const std::string& s) { return s.empty() ? Value() : Value(store::storable_text(s)); }
Value opt(int64_t v) { return v ? Value(v) : Value(); }

}  // namespace

std::string in_list(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += i ? ", ?" : "?";
  return s;
}

std::string canonical_json(const char* op, const char* what, const std::string& text, bool object) {
  std::string error;
  const std::optional<nlohmann::json> j = loom::detail::parse_json(text, &error);
  if (!j) throw ValueError(std::string(op) + ": the " + what + " is not valid JSON: " + error);
  if (object && !j->is_object()) throw ValueError(std::string(op) + ": the " + what + " must be a JSON object, not " + j->type_name());
  return j->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void check_options(const char* op, const TaskOptions& o) {
  check_range(op, "max_attempts", o.max_attempts, 1, 1000);
  check_range(op, "timeout_ms", o.timeout_ms, 0, int64_t(365) * 24 * 3600 * 1000);
  check_range(op, "lease_ms", o.lease_ms, 10, int64_t(24) * 3600 * 1000);
  std::set<int64_t> seen;
  for (int64_t d : o.depends_on)
    if (!seen.insert(d).second)
      throw ValueError(std::string(op) + ": depends_on names task " + std::to_string(d) + " twice (valid: each dependency once)");
}

std::string clip_error(const std::string& e) {
  return store::storable_text(e.size() <= kMaxErrorBytes ? e : "..." + e.substr(e.size() - kMaxErrorBytes));
}

void check_lineage(const store::Store& store, const char* op, const Lineage& l) {
  const auto version = [&](const char* what, int64_t v, const std::string& name) {
    if (v < 0) throw ValueError(std::string(op) + ": lineage " + what + " " + std::to_string(v) + " is negative (valid: 0 for the latest, or a version)");
    if (v > 0 && name.empty()) throw ValueError(std::string(op) + ": lineage names a " + what + " but no name");
  };
  version("input_dataset_version", l.input_dataset_version, l.input_dataset);
  version("input_model_version", l.input_model_version, l.input_model);
  if (l.input_dataset_query.size() > 4096 || (!l.input_dataset_query.empty() && l.input_dataset.empty()))
    throw ValueError(std::string(op) + ": lineage input_dataset_query must be at most 4096 bytes and go with an input_dataset");
  const auto name = [&](const char* what, const std::string& s) {
    if (!s.empty()) store::check_label(op, what, s);  // the store's rule for model and dataset names; empty: none
  };
  name("lineage input_dataset", l.input_dataset);
  name("lineage input_model", l.input_model);
  name("lineage output_model", l.output_model);
  name("lineage output_dataset", l.output_dataset);
  if (l.input_dataset_last_version < 0 || (l.input_dataset_last_version > 0 && l.input_dataset_last_version < l.input_dataset_version) ||
      (l.input_dataset_last_version > 0 && l.input_dataset_version == 0))
    throw ValueError(std::string(op) + ": lineage input_dataset_last_version " + std::to_string(l.input_dataset_last_version) +
                     " does not end a range from input_dataset_version " + std::to_string(l.input_dataset_version) +
                     " (valid: 0 for one version, or a version >= input_dataset_version >= 1)");
  if (!l.input_query.empty()) {
    const store::NamedQuery q = store.queries().get(l.input_query);  // NotFoundError for an unknown one
    if (!l.input_dataset.empty() && q.dataset != l.input_dataset)
      throw ValueError(std::string(op) + ": lineage input_query '" + l.input_query + "' is over dataset " +
                       loom::detail::quote_text(q.dataset) + ", not input_dataset " + loom::detail::quote_text(l.input_dataset) +
                       " (valid: the query's dataset, or no input_dataset)");
  }
  // A pinned version must exist; an unpinned name may be made by a dependency first.
  if (l.input_dataset_version > 0) store.datasets().get(l.input_dataset, l.input_dataset_version);
  if (l.input_dataset_last_version > 0) store.datasets().get(l.input_dataset, l.input_dataset_last_version);
  if (l.input_model_version > 0) store.models().get(l.input_model, l.input_model_version);
}

const std::string& lineage_columns() {
  static const std::string columns = store::column_list<Lineage>();
  return columns;
}

std::string skip_locked(const Session& session) { return session.backend() == "postgresql" ? " FOR UPDATE SKIP LOCKED" : ""; }
std::string lock_rows(const Session& session) { return session.backend() == "postgresql" ? " FOR UPDATE" : ""; }

void lock_events(Session& session) { session.execute("UPDATE task_event_lock SET n = n + 1 WHERE id = 1"); }

Status stored_status(const Row& row, size_t i) {
  constexpr auto s = spellings(Status{});
  const std::string& text = row.text(i);
  for (size_t k = 0; k < s.names.size(); ++k)
    if (text == s.names[k]) return static_cast<Status>(k);
  store::detail::bad_stored_state("status", s.what, text, s.names.data(), s.names.size());
}

void record_event(Session& session, int64_t id, EventKind event, const std::string& detail, int64_t now) {
  session.execute("INSERT INTO task_events (task_id, plan_id, event, detail, created_ms) "
                  "SELECT id, plan_id, ?, ?, ? FROM tasks WHERE id = ?",
                  {std::string(event_name(event)), clip_error(detail), now, id});
  session.notify(kEventChannel);
}

int64_t check_dependencies(Session& session, const char* op, const std::vector<int64_t>& ids) {
  if (ids.empty()) return 0;
  std::vector<Value> params(ids.begin(), ids.end());
  std::map<int64_t, Status> status;
  for (const Row& r : session.query("SELECT id, status FROM tasks WHERE id IN (" + in_list(ids.size()) + ")" + lock_rows(session), params))
    status[r.integer(0)] = stored_status(r, 1);
  int64_t waiting = 0;
  for (int64_t d : ids) {
    const auto it = status.find(d);
    if (it == status.end())
      throw store::NotFoundError(std::string(op) + ": dependency " + std::to_string(d) +
                                 " is not a task of this store (valid: the id of a task in the same store)");
    if (it->second == Status::Failed || it->second == Status::Cancelled)
      throw store::ConflictError(std::string(op) + ": dependency " + std::to_string(d) + " is " + status_name(it->second) +
                                 ", so this task could never run (replay it first; valid: a pending, running or finished task)");
    waiting += it->second != Status::Finished;
  }
  return waiting;
}

int64_t insert_task(Session& session, const std::string& kind, const std::string& hyper, const TaskOptions& o, int64_t plan_id,
                    const std::string& name, const std::vector<int64_t>& depends_on, int64_t waiting, int64_t now) {
  std::vector<Value> params{kind, hyper, o.priority, o.max_attempts, o.timeout_ms, o.lease_ms, now, plan_id ? Value(plan_id) : Value(),
                            name.empty() ? Value() : Value(name), waiting};
  std::string lineage_marks;
  // the lineage's values in its columns' order (none given: NULL)
  store::detail::visit_fields(o.lineage, [&](const char*, const auto& v, store::RecordField = {}) {
    params.push_back(opt(v));
    lineage_marks += ", ?";
  });
  const int64_t id =
      session
          .query("INSERT INTO tasks (kind, hyper_parameters, priority, status, attempts, max_attempts, timeout_ms, lease_ms, token, "
                 "created_ms, plan_id, name, waiting, " + lineage_columns() + ") VALUES (?, ?, ?, " + sql_literal(Status::Pending) +
                 ", 0, ?, ?, ?, 0, ?, ?, ?, ?" +
                 lineage_marks + ") RETURNING id",
                 params)[0]
          .integer(0);
  for (int64_t d : depends_on) session.execute("INSERT INTO task_dependencies (task_id, depends_on) VALUES (?, ?)", {id, d});
  if (waiting == 0) session.notify(kReadyChannel);
  return id;
}

void release_dependents(Session& session, const std::vector<int64_t>& ids) {
  if (ids.empty()) return;
  // A decrement, not a recount: PostgreSQL re-reads `waiting` after any row lock it waited for
  // (and then re-evaluates the count, of dependency rows that do not change).
  const std::string in = in_list(ids.size());
  std::vector<Value> params(ids.begin(), ids.end());
  params.insert(params.end(), ids.begin(), ids.end());
  int64_t released = 0;
  if (ids.size() == 1)
    released = session.execute("UPDATE tasks SET waiting = waiting - 1 WHERE status = " + sql_literal(Status::Pending) +
                               " AND waiting > 0 AND id IN (SELECT task_id FROM task_dependencies WHERE depends_on = ?)",
                               {ids[0]});
  else
    released = session.execute("UPDATE tasks SET waiting = waiting - (SELECT COUNT(*) FROM task_dependencies d WHERE d.task_id = tasks.id AND "
                               "d.depends_on IN (" + in + ")) WHERE status = " + sql_literal(Status::Pending) + " AND waiting > 0 AND id IN "
                               "(SELECT task_id FROM task_dependencies WHERE depends_on IN (" + in + "))",
                               params);
  if (released > 0) session.notify(kReadyChannel);  // a dependent may now wait for nothing
}

void record_finished(Session& session, const std::vector<int64_t>& ids, int64_t now) {
  if (ids.empty()) return;
  std::vector<Value> params{now};
  params.insert(params.end(), ids.begin(), ids.end());
  session.execute("INSERT INTO task_events (task_id, plan_id, event, detail, created_ms) "
                  "SELECT id, plan_id, " + sql_literal(EventKind::Finished) + ", '', ? FROM tasks WHERE id IN (" + in_list(ids.size()) +
                  ") ORDER BY id",
                  params);
  session.notify(kEventChannel);
}

void cancel_dependents(Session& session, int64_t id, const std::string& why, int64_t now) {
  std::vector<std::pair<int64_t, std::string>> frontier{{id, why}};
  while (!frontier.empty()) {
    const auto [from, reason] = frontier.back();
    frontier.pop_back();
    const std::vector<Row> dependents = session.query(
        "SELECT t.id FROM task_dependencies d JOIN tasks t ON t.id = d.task_id WHERE d.depends_on = ? "
        "AND t.status IN (" + sql_literals({Status::Pending, Status::Running}) + ") ORDER BY t.id",
        {from});
    for (const Row& r : dependents) {
      const std::string error = clip_error("dependency " + std::to_string(from) + " " + reason);
      if (session.execute("UPDATE tasks SET status = " + sql_literal(Status::Cancelled) +
                              ", error = ?, finished_ms = ?, lease_expires_ms = NULL, deadline_ms = NULL WHERE id = ? AND status IN (" +
                              sql_literals({Status::Pending, Status::Running}) + ")",
                          {error, now, r.integer(0)}) == 0)
        continue;
      record_event(session, r.integer(0), EventKind::Cancelled, error, now);
      frontier.emplace_back(r.integer(0), "was cancelled: " + error);
    }
  }
}

std::vector<int64_t> replay_in(Session& session, const std::vector<int64_t>& roots, int64_t now) {
  // The roots, locked first: a concurrent submit of a dependent then commits before the walk
  // below, which therefore finds it.
  std::set<int64_t> all;
  for (int64_t root : roots) {
    const std::vector<Row> rows = session.query("SELECT status FROM tasks WHERE id = ?" + lock_rows(session), {root});
    if (rows.empty()) throw store::NotFoundError("replay: there is no task " + std::to_string(root));
    const Status status = stored_status(rows[0], 0);
    if (status == Status::Pending || status == Status::Running)
      throw store::ConflictError("replay: task " + std::to_string(root) + " is " + status_name(status) +
                                 " (valid: a finished, failed or cancelled task)");
    all.insert(root);
  }
  // Every dependent, transitively, whatever its state: a finished one ran on a result that is
  // about to change.
  std::vector<int64_t> frontier(all.begin(), all.end());
  while (!frontier.empty()) {
    const int64_t from = frontier.back();
    frontier.pop_back();
    for (const Row& r : session.query("SELECT task_id FROM task_dependencies WHERE depends_on = ?", {from}))
      if (all.insert(r.integer(0)).second) frontier.push_back(r.integer(0));
  }
  // A dependency outside the set that failed or was cancelled would leave a reopened task
  // waiting for ever.
  for (int64_t t : all)
    for (const Row& r : session.query("SELECT t.id, t.status FROM task_dependencies d JOIN tasks t ON t.id = d.depends_on "
                                      "WHERE d.task_id = ? ORDER BY t.id",
                                      {t}))
      if (const Status dependency = stored_status(r, 1);
          !all.count(r.integer(0)) && (dependency == Status::Failed || dependency == Status::Cancelled))
        throw store::ConflictError("replay: task " + std::to_string(t) + " depends on task " + std::to_string(r.integer(0)) +
                                   ", which is " + status_name(dependency) + " (replay that one, or its plan, instead): nothing was changed");
  std::vector<int64_t> reopened;
  for (int64_t t : all)
    if (session.execute("UPDATE tasks SET status = " + sql_literal(Status::Pending) +
                            ", attempts = 0, result = NULL, error = NULL, lease_expires_ms = NULL, deadline_ms = NULL, started_ms = NULL, "
                            "finished_ms = NULL WHERE id = ? AND status <> " + sql_literal(Status::Pending),
                        {t}) > 0)
      reopened.push_back(t);
  for (int64_t t : all)
    session.execute("UPDATE tasks SET waiting = (SELECT COUNT(*) FROM task_dependencies d JOIN tasks u ON u.id = d.depends_on "
                    "WHERE d.task_id = ? AND u.status <> " + sql_literal(Status::Finished) + ") WHERE id = ?",
                    {t, t});
  for (int64_t t : reopened) record_event(session, t, EventKind::Replayed, "", now);
  if (!reopened.empty()) session.notify(kReadyChannel);
  return reopened;
}

}  // namespace loom::flow::detail
