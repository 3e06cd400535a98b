#pragma once
// An agent: claims tasks of the kinds it knows from a Tasks queue and runs them, heartbeating
// each claim from a thread of its own (docs/workflow.md).
//
//   flow::Agent agent(flow::Tasks(store));
//   agent.register_kind("train", [](const std::string& hyper, flow::TaskContext& ctx) {
//     ... ctx.should_stop() between epochs ...
//     return std::string(R"({"accuracy": 0.91})");
//   });
//   agent.register_command("eval", {.argv = {"/usr/bin/python3", "eval.py"}});
//   agent.run({.stop_when_idle = true});
//
// A function kind runs in the agent's process: an exception is a failed attempt, but a crash
// (a segmentation fault) ends the agent, whose lease then expires and the task is replayed.
// A command kind runs as a child process: whatever it does, the agent survives it.
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/flow/reports.h"
#include "loom/flow/tasks.h"
#include "loom/store/provenance.h"

namespace loom::flow {

enum class StopReason { None, Cancelled, Lost, TimedOut };
// What became of a claimed task in an agent's hands.
enum class Outcome { Finished, Failed, Cancelled, Lost };

// What a running task may ask of its agent. Thread-safe.
class LOOM_API TaskContext {
 public:
  TaskContext(Claim claim, Clock clock) : claim_(std::move(claim)), clock_(std::move(clock)) {}
  const Claim& claim() const { return claim_; }
  // This task as the producer of a model or dataset version it saves (with the run that
  // trained it, if any): Models::save(..., ctx.produced_by(run.id)).
  store::Provenance produced_by(int64_t run_id = 0) const { return {claim_.task_id, run_id}; }
  // True once the task was cancelled, its claim lost or its timeout passed: the task should
  // return soon (its result would be refused).
  bool should_stop() const { return stop_reason() != StopReason::None; }
  StopReason stop_reason() const;
  void stop(StopReason r);  // the agent's heartbeat thread calls this

  // Reports an intermediate metric (flow::Reports::report for this claim, reports.h) and
  // returns the scheduler's decision: on Stop the task should return its partial result now.
  // ValueError in a context that has no store (one made by hand, without set_reporter).
  Decision report(int64_t step, double value);
  using Reporter = std::function<Decision(int64_t step, double value)>;
  void set_reporter(Reporter r) { reporter_ = std::move(r); }  // the agent calls this

 private:
  Claim claim_;
  Clock clock_;
  std::atomic<int> reason_{0};
  Reporter reporter_;
};

// Takes the hyper-parameters (a JSON object) and returns the result (JSON text).
using TaskFunction = std::function<std::string(const std::string& hyper_parameters, TaskContext& ctx)>;

// A task run as a child process (posix_spawn, in a process group of its own): the
// hyper-parameters are its stdin (and the file named by $LOOM_TASK_HYPER_PARAMETERS), the
// result is the JSON it prints on stdout; LOOM_TASK_ID, LOOM_TASK_TOKEN and LOOM_TASK_ATTEMPT
// are set. A non-zero exit, a signal, output that is not JSON or longer than max_output_bytes
// fail the attempt with the tail of its stderr; a timeout, a cancellation or a lost claim kill
// the whole group. It reports intermediate metrics (TaskContext::report) as lines "STEP VALUE"
// written on file descriptor 3 ($LOOM_TASK_REPORT_FD); a malformed line fails the attempt. On a
// Stop decision its group gets SIGTERM, and SIGKILL stop_grace_ms later; its result is then the
// JSON it printed if it exited with status 0, else {"step": S, "value": V}, its last report.
struct LOOM_API Command {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  int64_t max_output_bytes = 64 << 20;
  int64_t stop_grace_ms = 5000;
};

struct LOOM_API AgentOptions {
  std::vector<std::string> kinds;  // empty: every registered kind
  // The longest wait when no task is claimable: a commit that makes one claimable (a
  // submission, a finished dependency, a retry, a replay) wakes the agent at once, through a
  // store::Notifications; a lease running out is caught at this interval.
  int64_t poll_ms = 500;
  bool stop_when_idle = false;     // return when no task is pending
  int64_t max_tasks = 0;           // return after this many tasks (0: no limit)
  // Tasks claimed at a time (1 to 1000; 0: adapt). With more than 1, the agent claims up to
  // `batch` tasks in one transaction (never more than half of those it sees claimable, and
  // beyond the first only tasks without a timeout), runs them in turn, and records their results
  // together with its next claims in one transaction: one durable commit for many short tasks.
  // A result is recorded (and its dependents released) only at that commit, after the whole
  // batch ran; the batch's tasks are held by this agent meanwhile. 1: one task per commit, for
  // long tasks. 0 (the default): sized from the last batch's run time per task, so that a batch
  // runs for about kAdaptiveBatchMs (1 for tasks that long or longer, at most kAdaptiveBatchMax
  // for tasks far shorter; growing by doubling, shrinking at once): short tasks share commits,
  // long ones are not held behind each other. Kinds of very different lengths in one queue are
  // best given agents of their own (AgentOptions::kinds), or batch 1 for the long ones.
  int64_t batch = 0;
  static constexpr int64_t kAdaptiveBatchMs = 10;
  static constexpr int64_t kAdaptiveBatchMax = 64;
};

class LOOM_API Agent {
 public:
  // `name` identifies the agent in the tasks it holds (default "<host>:<pid>").
  explicit Agent(Tasks tasks, std::string name = "");

  // ValueError for an invalid kind, an empty function or argv, or a kind already registered.
  void register_kind(const std::string& kind, TaskFunction fn);
  void register_command(const std::string& kind, Command command);

  // Claims and runs tasks until stop(), idle (stop_when_idle) or max_tasks; returns how many
  // tasks it ran. ValueError for a kind in options.kinds that is not registered, or no kinds.
  int64_t run(const AgentOptions& options = {});
  // Makes run() return after the current task, or batch (from another thread or a signal handler).
  void stop() { stop_.store(true); }

  // Runs one claimed task to its end: finish, fail, or nothing when the claim was lost or
  // the task cancelled.
  Outcome execute(const Claim& claim);

  const std::string& name() const { return name_; }
  Tasks& tasks() { return tasks_; }

 private:
  // Runs a claimed task (heartbeated by the caller): its end, or nullopt when the task was
  // cancelled or its claim lost (nothing to record).
  std::optional<TaskEnd> attempt(const Claim& claim, TaskContext& ctx);
  // Runs a batch of claims, heartbeated together, appending their ends (run's step).
  void run_claims(const std::vector<Claim>& claims, std::vector<TaskEnd>& ends);
  Tasks tasks_;
  std::string name_;
  std::map<std::string, TaskFunction> functions_;
  std::map<std::string, Command> commands_;
  std::atomic<bool> stop_{false};
};

// Runs `command` for `claim` (what Agent does for a command kind); returns the result JSON
// text or throws TaskFailure with the reason. Exposed for tests and tools.
class LOOM_API TaskFailure : public Error { using Error::Error; };
LOOM_API std::string run_command(const Command& command, const Claim& claim, TaskContext& ctx);

}  // namespace loom::flow
