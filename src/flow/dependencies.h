#pragma once
// The dependency graph of the task queue and its events, shared by Tasks and Plans: the
// statements each runs inside the caller's session (docs/workflow.md, "Plans", "Notifications").
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "loom/flow/events.h"
#include "loom/flow/plans.h"
#include "loom/flow/tasks.h"
#include "loom/store/record.h"
#include "loom/store/session.h"

namespace loom::flow::detail {

// Canonical JSON text of `text`, which must parse (and be an object when `object`); ValueError
// naming `op` and `what` otherwise.
std::string canonical_json(const char* op, const char* what, const std::string& text, bool object);
// ValueError unless the options' numbers are in range and depends_on has no repeated id.
void check_options(const char* op, const TaskOptions& o);
// An error text as stored: its last 16 KiB, storable by every backend.
std::string clip_error(const std::string& e);

// The notification channel of task events (store::Notifications).
inline constexpr const char* kEventChannel = "loom_task_events";
// The channel that wakes idle agents: notified by every commit that may make a task claimable
// (a submission without pending dependencies, a release of dependents, a retry, a replay). A
// lease running out is no commit: agents still re-read at their poll interval.
inline constexpr const char* kReadyChannel = "loom_task_ready";

// ValueError / store::NotFoundError for a bad Lineage (tasks.h); reads the store's catalogs.
void check_lineage(const store::Store& store, const char* op, const Lineage& l);
// The lineage columns of the tasks table, from Lineage's fields (loom/store/record.h).
const std::string& lineage_columns();

// A task status or event kind as an SQL string literal ('pending'), made from its enum's one
// spelling (tasks.h, events.h), for the statements that compare or set a state column: no state
// is spelled twice. The spellings are lowercase words, so quoting needs no escaping.
constexpr bool is_plain_word(const char* s) {
  for (; *s; ++s)
    if (!(*s >= 'a' && *s <= 'z') && *s != '_') return false;
  return true;
}
template <store::SpelledEnum E>
std::string sql_literal(E state) {
  static_assert(std::ranges::all_of(spellings(E{}).names, is_plain_word), "a state spelled as SQL quotes it");
  return "'" + std::string(store::to_string(state)) + "'";
}
// Several as a list for "IN (...)": "'pending', 'running'".
template <store::SpelledEnum E>
std::string sql_literals(std::initializer_list<E> states) {
  std::string out;
  for (E s : states) out += (out.empty() ? "" : ", ") + sql_literal(s);
  return out;
}
// The task status in column `i` of `row`; store::BadStateError naming the column for text that
// is none of the spellings (a database written by something else).
Status stored_status(const store::SqlRow& row, size_t i);

// Takes the events' lock: the first statement of every session that may record an event.
void lock_events(store::Session& session);
// Records an event of task `id` (after lock_events).
void record_event(store::Session& session, int64_t id, EventKind event, const std::string& detail, int64_t now);

// Locks the rows of `ids` (PostgreSQL) and checks each is a task that may be depended on:
// NotFoundError for an unknown one, ConflictError for a failed or cancelled one. Returns how
// many have not finished.
int64_t check_dependencies(store::Session& session, const char* op, const std::vector<int64_t>& ids);
// A plan checked without reading the store (names, kinds, hyper-parameters, options, cycles;
// ValueError as Plans::submit says): each task's canonical hyper-parameters, and an order in
// which each task comes after its dependencies.
struct CheckedPlan {
  std::vector<std::string> hyper;
  std::vector<size_t> order;
};
CheckedPlan check_plan(const TaskGraph& plan);
// Inserts a checked plan (its lineage checked too) in the caller's session: its row, then its
// tasks, pending; NotFoundError / ConflictError for a bad id in a task's options.depends_on.
// Returns the plan's id.
int64_t insert_plan(store::Session& session, const TaskGraph& plan, const CheckedPlan& checked, int64_t now);
// Inserts a pending task (its arguments already checked); returns its id.
int64_t insert_task(store::Session& session, const std::string& kind, const std::string& hyper, const TaskOptions& o,
                    int64_t plan_id, const std::string& name, const std::vector<int64_t>& depends_on, int64_t waiting,
                    int64_t now);

// After the tasks `ids` finished: their dependents wait for as many dependencies fewer.
void release_dependents(store::Session& session, const std::vector<int64_t>& ids);
// Records the "finished" events of the tasks `ids` (after lock_events), in id order.
void record_finished(store::Session& session, const std::vector<int64_t>& ids, int64_t now);
// "?, ?, ..." with `n` placeholders, for "IN (...)".
std::string in_list(size_t n);
// After task `id` failed for good or was cancelled (`why`: "failed: <error>", "was cancelled"):
// cancels its pending and running dependents, transitively, each with the error "dependency N
// <why>", and records their events.
void cancel_dependents(store::Session& session, int64_t id, const std::string& why, int64_t now);
// Tasks::replay for several roots at once (after lock_events); returns the reopened ids.
std::vector<int64_t> replay_in(store::Session& session, const std::vector<int64_t>& roots, int64_t now);

// " FOR UPDATE SKIP LOCKED" on PostgreSQL, "" on SQLite (whose write transaction excludes
// every other writer); lock_rows: " FOR UPDATE" / "".
std::string skip_locked(const store::Session& session);
std::string lock_rows(const store::Session& session);

}  // namespace loom::flow::detail
