#pragma once
// The task queue of a Store (docs/workflow.md): tasks of a kind (their queue) with JSON
// hyper-parameters, claimed atomically by agents under a lease renewed by heartbeat, each
// claim carrying a fencing token so that only the current claim's result is recorded.
//
//   flow::Tasks tasks(store::Store::open("runs.db"));
//   int64_t id = tasks.submit("train", R"({"lr": 0.01})", {.priority = 5, .max_attempts = 3});
//   if (auto c = tasks.claim({"train"}, "agent-1")) {   // in an agent
//     ... tasks.heartbeat(*c) every lease / 3 ...
//     tasks.finish(*c, R"({"accuracy": 0.91})");      // ClaimLostError if no longer current
//   }
//   flow::TaskInfo t = tasks.get(id);                   // t.status, t.result, t.error, ...
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/store/record.h"
#include "loom/store/session.h"
#include "loom/store/store.h"

namespace loom::flow {

// The claim's token is no longer current (the task was reclaimed after its lease expired,
// finished, failed or cancelled): the stale agent's result or error was not recorded.
class LOOM_API ClaimLostError : public store::ConflictError { using store::ConflictError::ConflictError; };

enum class Status { Pending, Running, Finished, Failed, Cancelled };
// A status's one spelling, stored in the tasks table and shown everywhere (loom/store/record.h).
constexpr store::Spellings<5> spellings(Status) { return {"task status", {"pending", "running", "finished", "failed", "cancelled"}}; }
LOOM_API const char* status_name(Status s);  // store::to_string(s)
// The status of a name; ValueError naming the valid ones otherwise (store::parse_state<Status>).
LOOM_API Status parse_status(const std::string& name);
inline bool is_terminal(Status s) { return s == Status::Finished || s == Status::Failed || s == Status::Cancelled; }

// What a task reads and writes (docs/workflow.md, "Lineage"), recorded with it and checked at
// submission: names by the store's rule for model and dataset names (ValueError), a pinned
// version must exist (store::NotFoundError); "" and 0 for none.
struct LOOM_API Lineage {
  std::string input_dataset;
  int64_t input_dataset_version = 0;  // 0: whichever is latest when the task runs
  std::string input_dataset_query;    // how it selects samples (free text, up to 4 KiB)
  std::string input_model;
  int64_t input_model_version = 0;
  std::string output_model;           // the model it saves a version of (store::Provenance)
  std::string output_dataset;
  // With input_dataset_version, the last of a range of versions it reads (a stream controller's
  // batch, loom/flow/controllers.h): it must exist and not be below input_dataset_version.
  int64_t input_dataset_last_version = 0;
  // A named query it reads (store::Queries): it must exist, and be over input_dataset when both
  // are given (ValueError otherwise).
  std::string input_query;

  // Its columns of the tasks table and its keys (loom/store/record.h).
  template <class Visit>
  void fields(Visit&& visit) {
    visit("input_dataset", input_dataset);
    visit("input_dataset_version", input_dataset_version);
    visit("input_dataset_query", input_dataset_query);
    visit("input_model", input_model);
    visit("input_model_version", input_model_version);
    visit("output_model", output_model);
    visit("output_dataset", output_dataset);
    visit("input_dataset_last_version", input_dataset_last_version);
    visit("input_query", input_query);
  }
};

struct LOOM_API TaskOptions {
  int64_t priority = 0;       // higher first; equal priorities in submission order
  int64_t max_attempts = 3;   // claims allowed (1 to 1000); then the task fails with its last error
  int64_t timeout_ms = 0;     // run time allowed to one attempt (0: none)
  int64_t lease_ms = 30000;   // how long a claim lives without a heartbeat (10 ms to 1 day)
  // Tasks of this store that must finish before this one may be claimed (docs/workflow.md,
  // "Plans"): NotFoundError for an unknown id, ConflictError for one that failed or was
  // cancelled (replay it first), ValueError for a repeated id; nothing is written then.
  std::vector<int64_t> depends_on;
  Lineage lineage;
};

// A finished dependency's result, as a dependent task sees it.
struct LOOM_API DependencyResult {
  int64_t task_id = 0;
  std::string name;    // its name in its plan ("" for a task submitted alone)
  std::string kind;
  std::string result;  // JSON
};

struct LOOM_API TaskInfo {
  int64_t id = 0;
  std::string kind;
  std::string hyper_parameters;  // a JSON object (canonical text)
  int64_t priority = 0;
  Status status = Status::Pending;
  int64_t attempts = 0;          // claims so far
  int64_t max_attempts = 0;
  int64_t timeout_ms = 0;
  int64_t lease_ms = 0;
  int64_t token = 0;             // the latest claim's fencing token (0: never claimed)
  std::string agent;             // who holds (or last held) the claim; "" if never claimed
  int64_t lease_expires_ms = 0;  // while running
  std::string result;            // JSON, once finished; "" otherwise
  std::string error;             // the last attempt's error; "" if none
  int64_t created_ms = 0;        // Unix time in milliseconds; 0 for "not yet"
  int64_t started_ms = 0;        // the first claim
  int64_t finished_ms = 0;       // finished, failed or cancelled
  int64_t plan_id = 0;           // the plan it belongs to (0: none)
  std::string name;              // its name in that plan ("" for a task submitted alone)
  std::vector<int64_t> depends_on;  // in id order
  int64_t waiting = 0;           // dependencies not finished yet: claimable when 0 (and pending)
  Lineage lineage;

  // Its columns of the tasks table and its JSON's keys, listed once (loom/store/record.h): the
  // store's reader, `loom tasks --json`, `loom plans show --json` and the dashboard's
  // /api/tasks all come from this list.
  template <class Visit>
  void fields(Visit&& visit) {
    using store::RecordField;
    visit("id", id);
    visit("kind", kind);
    visit("status", status);
    visit("hyper_parameters", hyper_parameters, RecordField::json());
    visit("priority", priority);
    visit("attempts", attempts);
    visit("max_attempts", max_attempts);
    visit("timeout_ms", timeout_ms);
    visit("lease_ms", lease_ms);
    visit("token", token);
    visit("agent", agent);
    visit("lease_expires_ms", lease_expires_ms);
    visit("result", result, RecordField::json());
    visit("error", error);
    visit("created_ms", created_ms);
    visit("started_ms", started_ms);
    visit("finished_ms", finished_ms);
    visit("plan_id", plan_id);
    visit("name", name);
    visit("depends_on", depends_on, RecordField::not_stored());  // task_dependencies
    visit("waiting", waiting);
    visit("lineage", lineage);
  }
};

// What an agent holds while it runs a task.
struct LOOM_API Claim {
  int64_t task_id = 0;
  int64_t token = 0;             // the fencing token: 1 for the first claim of a task, then 2, ...
  int64_t attempt = 0;           // this attempt's number (1 to max_attempts); the token unless replayed
  int64_t max_attempts = 0;
  std::string kind;
  std::string hyper_parameters;
  int64_t lease_ms = 0;
  int64_t timeout_ms = 0;
  int64_t deadline_ms = 0;       // the attempt's timeout as a time (0: none); leases never pass it
  int64_t lease_expires_ms = 0;
  std::vector<DependencyResult> dependencies;  // every dependency's result, in id order
  Lineage lineage;
};

struct LOOM_API TaskFilter {
  std::optional<std::string> kind;
  std::optional<Status> status;
  int64_t limit = 0;  // 0: all; in submission order
  std::optional<int64_t> plan_id;
};

// How an attempt ended, for Tasks::complete: finished with `result` (JSON) when `ok`, else a
// failed attempt with `error`.
struct LOOM_API TaskEnd {
  Claim claim;
  bool ok = true;
  std::string result;
  std::string error;
};

// What Tasks::complete did.
struct LOOM_API Handover {
  std::vector<bool> recorded;  // per end, in order: false when its claim was no longer current (nothing recorded for it)
  std::vector<Claim> claims;   // the tasks it claimed, highest priority first
};

enum class Heartbeat {
  Renewed,    // keep working
  Cancelled,  // the task was cancelled: stop, the result would be refused
  Lost,       // the claim is no longer current (reclaimed after its lease expired): stop
};

// Milliseconds since the Unix epoch; injectable so that tests move time instead of sleeping.
using Clock = std::function<int64_t()>;
LOOM_API int64_t system_clock_ms();

class LOOM_API Tasks {
 public:
  explicit Tasks(store::Store store, Clock clock = {});
  // Whether `store` holds flow's tables at this library's version, found by reading only: when
  // false, constructing Tasks on it would create or migrate them (a write), which a read-only
  // reader (the dashboard, loom ui) must not do; it has no task queue to show yet.
  static bool ready(const store::Store& store);

  // A new pending task; returns its id. ValueError (nothing written) for an invalid kind
  // (1-128 characters of [A-Za-z0-9_.:/-]), hyper-parameters that are not a JSON object or an
  // option out of range; errors of options.depends_on as described there.
  int64_t submit(const std::string& kind, const std::string& hyper_parameters = "{}", const TaskOptions& options = {});

  TaskInfo get(int64_t id) const;  // NotFoundError for an unknown id
  std::vector<TaskInfo> list(const TaskFilter& filter = {}) const;

  // Cancels a pending or running task (the running one's agent sees it at its next heartbeat
  // and its result is refused), and with it every task that depends on it, transitively
  // (error "dependency N was cancelled"). Returns false if the task had already ended;
  // NotFoundError for an unknown id.
  bool cancel(int64_t id);

  // Reopens an ended task (finished, failed or cancelled) and every task that depends on it,
  // transitively, in one transaction: each goes back to pending with no attempts, result or
  // error (its fencing token goes on from where it was), waiting for its unfinished
  // dependencies. Returns the reopened ids in id order. NotFoundError for an unknown id;
  // ConflictError (nothing changed) when the task has not ended or one of the reopened tasks
  // depends on a task outside them that failed or was cancelled (replay that one).
  std::vector<int64_t> replay(int64_t id);

  // The results of the task's dependencies, in id order (those not finished have result "").
  std::vector<DependencyResult> results_of_dependencies(int64_t id) const;

  // In one write transaction: reclaims every expired lease (the task goes back to pending, or
  // to failed after its last attempt), then claims the pending task of one of `kinds` with the
  // highest priority, oldest first. nullopt if there is none. ValueError for no or invalid kinds.
  std::optional<Claim> claim(const std::vector<std::string>& kinds, const std::string& agent);

  // Renews the claim's lease (never past its deadline) if the claim is still current.
  Heartbeat heartbeat(const Claim& claim);

  // Records the result (a JSON value) of the current claim: the task is finished.
  // ClaimLostError (nothing written) when the claim is not current or the task is not running;
  // ValueError for malformed JSON.
  void finish(const Claim& claim, const std::string& result);
  // Records a failed attempt: back to pending, or failed after max_attempts, the error kept.
  // Returns the task's new status; ClaimLostError as for finish.
  Status fail(const Claim& claim, const std::string& error);

  // In ONE write transaction, so one durable commit: records `ends` (each as finish() or fail()
  // would, fenced by its own claim; an end whose claim is no longer current is skipped and
  // reported in Handover::recorded), then claims up to `max_claims` tasks of `kinds` as claim()
  // does (what the recorded ends released included). Beyond the first, a claim takes only tasks
  // without a timeout (a claimed task waits for the ones before it, and its timeout would run
  // meanwhile) and at most half of the claimable tasks it sees, so that other agents find work.
  // Each claimed task has its own lease and fencing token. ValueError (nothing written) for a
  // result that is not JSON, max_claims outside 0 to 1000, or invalid kinds (none are needed
  // when max_claims is 0).
  Handover complete(const std::vector<TaskEnd>& ends, const std::vector<std::string>& kinds, const std::string& agent,
                    int64_t max_claims = 1);

  // Reclaims expired leases now (claim() does it too); returns how many.
  int64_t reclaim_expired();

  // Waits until every task in `ids` has ended or `timeout_ms` passes (real time); returns
  // their states in the order given. Woken by the tasks' end events (store::Notifications); poll_ms
  // bounds the wait between two reads, should a wake be missed.
  std::vector<TaskInfo> wait(const std::vector<int64_t>& ids, int64_t timeout_ms, int64_t poll_ms = 100) const;

  int64_t now_ms() const { return clock_(); }
  const store::Store& store() const { return store_; }

 private:
  // In `session`: returns expired leases to pending (or failed after the last attempt).
  int64_t reclaim_in(store::Session& session, int64_t now);
  // In `session`: reclaims expired leases, then claims up to `max` tasks (complete()'s rules).
  std::vector<Claim> claim_in(store::Session& session, const std::vector<std::string>& kinds, const std::string& agent,
                              int64_t max, bool events_locked);
  store::Store store_;
  Clock clock_;
};

}  // namespace loom::flow
