#include "loom/flow/agent.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "core/utf8.h"
#include "flow/dependencies.h"
#include "flow/kind.h"
#include "loom/store/notifications.h"

namespace loom::flow {

namespace {

std::string default_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return std::string(host[0] ? host : "localhost") + ":" + std::to_string(::getpid());
}

void check_new_kind(const std::map<std::string, TaskFunction>& f, const std::map<std::string, Command>& c, const std::string& kind) {
  detail::check_kind("register", kind);
  if (f.count(kind) || c.count(kind)) throw ValueError("register: task kind '" + kind + "' is already registered in this agent");
}

// Heartbeats claims every lease / 3 (the shortest lease's) until destroyed, telling each
// claim's context when to stop.
class HeartbeatThread {
 public:
  using Held = std::vector<std::pair<const Claim*, TaskContext*>>;
  HeartbeatThread(Tasks& tasks, Held held) : held_(std::move(held)) {
    int64_t lease = held_.front().first->lease_ms;
    for (const auto& h : held_) lease = std::min(lease, h.first->lease_ms);
    const auto period = std::chrono::milliseconds(std::max<int64_t>(2, lease / 3));
    thread_ = std::thread([this, &tasks, period] {
      std::unique_lock<std::mutex> lock(mutex_);
      while (!cv_.wait_for(lock, period, [this] { return done_; })) {
        lock.unlock();
        for (const auto& h : held_) {
          const StopReason r = h.second->stop_reason();
          if (r == StopReason::Cancelled || r == StopReason::Lost) continue;  // nothing to keep
          try {
            const Heartbeat beat = tasks.heartbeat(*h.first);
            if (beat == Heartbeat::Cancelled) h.second->stop(StopReason::Cancelled);
            if (beat == Heartbeat::Lost) h.second->stop(StopReason::Lost);
          } catch (const std::exception&) {
            // a busy or unreachable database: try again next period (the lease covers 3 periods)
          }
        }
        lock.lock();
      }
    });
  }
  ~HeartbeatThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  Held held_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

StopReason TaskContext::stop_reason() const {
  const int r = reason_.load();
  if (r != 0) return static_cast<StopReason>(r);
  if (claim_.deadline_ms > 0 && clock_() >= claim_.deadline_ms) return StopReason::TimedOut;
  return StopReason::None;
}

Decision TaskContext::report(int64_t step, double value) {
  if (!reporter_)
    throw ValueError("report: the context of task " + std::to_string(claim_.task_id) +
                     " has no store to report to (an Agent's contexts have; valid: set_reporter first)");
  return reporter_(step, value);
}

void TaskContext::stop(StopReason r) {
  int expected = 0;  // the first reason stays
  reason_.compare_exchange_strong(expected, static_cast<int>(r));
}

Agent::Agent(Tasks tasks, std::string name) : tasks_(std::move(tasks)), name_(name.empty() ? default_name() : std::move(name)) {}

void Agent::register_kind(const std::string& kind, TaskFunction fn) {
  check_new_kind(functions_, commands_, kind);
  if (!fn) throw ValueError("register_kind: the function of kind '" + kind + "' is empty");
  functions_.emplace(kind, std::move(fn));
}

void Agent::register_command(const std::string& kind, Command command) {
  check_new_kind(functions_, commands_, kind);
  if (command.argv.empty() || command.argv[0].empty())
    throw ValueError("register_command: the command of kind '" + kind + "' has no program (argv[0])");
  if (command.max_output_bytes <= 0)
    throw ValueError("register_command: max_output_bytes of kind '" + kind + "' must be positive");
  if (command.stop_grace_ms < 0)
    throw ValueError("register_command: stop_grace_ms of kind '" + kind + "' must be 0 or more");
  commands_.emplace(kind, std::move(command));
}

std::optional<TaskEnd> Agent::attempt(const Claim& claim, TaskContext& ctx) {
  // Made at the task's first report (which ensures its tables).
  auto reports = std::make_shared<std::optional<Reports>>();
  ctx.set_reporter([this, &claim, reports](int64_t step, double value) {
    if (!*reports) reports->emplace(tasks_.store(), [this] { return tasks_.now_ms(); });
    return (*reports)->report(claim, step, value);
  });
  TaskEnd end;
  end.claim = claim;
  end.ok = false;
  try {
    if (auto f = functions_.find(claim.kind); f != functions_.end()) {
      end.result = f->second(claim.hyper_parameters, ctx);
    } else if (auto c = commands_.find(claim.kind); c != commands_.end()) {
      end.result = run_command(c->second, claim, ctx);
    } else {
      throw TaskFailure("agent '" + name_ + "' has no task kind '" + claim.kind + "'");
    }
    end.ok = true;
  } catch (const std::exception& e) {
    end.error = e.what();
  } catch (...) {
    end.error = "the task threw a non-standard exception";
  }
  const StopReason reason = ctx.stop_reason();
  if (reason == StopReason::Cancelled || reason == StopReason::Lost) return std::nullopt;
  if (reason == StopReason::TimedOut) {
    end.ok = false;
    end.error = "timed out after " + std::to_string(claim.timeout_ms) + " ms";
  }
  if (end.ok) {
    try {
      detail::canonical_json("finish", "result", end.result, false);
    } catch (const ValueError& e) {
      end.ok = false;
      end.error = std::string("the task returned a result that is not JSON: ") + e.what();
    }
  }
  return end;
}

Outcome Agent::execute(const Claim& claim) {
  TaskContext ctx(claim, [this] { return tasks_.now_ms(); });
  std::optional<TaskEnd> end;
  {
    HeartbeatThread heartbeat(tasks_, {{&claim, &ctx}});
    end = attempt(claim, ctx);
  }
  if (!end) return ctx.stop_reason() == StopReason::Cancelled ? Outcome::Cancelled : Outcome::Lost;
  try {
    if (end->ok) {
      tasks_.finish(claim, end->result);
      return Outcome::Finished;
    }
    tasks_.fail(claim, end->error);
    return Outcome::Failed;
  } catch (const ClaimLostError&) {
    // cancelled (or reclaimed) between the last heartbeat and now
    const TaskInfo t = tasks_.get(claim.task_id);
    return t.status == Status::Cancelled && t.token == claim.token ? Outcome::Cancelled : Outcome::Lost;
  }
}

namespace {

// The kinds a run claims: those asked for, or every registered kind (function kinds first);
// each must be registered. ValueError for those and for the run's numbers out of range.
std::vector<std::string> kinds_to_run(const AgentOptions& options, const std::vector<std::string>& registered, const std::string& agent) {
  std::vector<std::string> kinds = options.kinds.empty() ? registered : options.kinds;
  std::string known;
  for (const std::string& k : registered) known += (known.empty() ? "" : ", ") + k;
  if (kinds.empty()) throw ValueError("Agent::run: agent '" + agent + "' has no task kinds (register_kind or register_command first)");
  for (const std::string& k : kinds)
    if (std::find(registered.begin(), registered.end(), k) == registered.end())
      throw ValueError("Agent::run: unknown task kind '" + k + "' (registered: " + (known.empty() ? "none" : known) + ")");
  if (options.poll_ms < 0 || options.max_tasks < 0) throw ValueError("Agent::run: poll_ms and max_tasks must not be negative");
  if (options.batch < 0 || options.batch > 1000)
    throw ValueError("Agent::run: batch " + std::to_string(options.batch) + " is out of range (valid: 1 to 1000, or 0 to adapt)");
  return kinds;
}

// Records the last tasks' ends and claims up to `want` tasks. A store error is printed, not
// thrown: the database was busy or failed, and what was not committed is replayed when the
// lease ends (escaped: the message may quote text from the database, shown on a terminal).
std::vector<Claim> complete_and_claim(Tasks& tasks, const std::vector<TaskEnd>& ends, const std::vector<std::string>& kinds,
                                      const std::string& agent, int64_t want) {
  try {
    return tasks.complete(ends, kinds, agent, want).claims;  // ends whose claim was lost are not recorded
  } catch (const store::StoreError& e) {
    std::fprintf(stderr, "loom agent %s: %s\n", loom::detail::escape_text(agent).c_str(), loom::detail::escape_text(e.what(), true).c_str());
    return {};
  }
}

// How an idle agent waits for a task to become ready. The notifications are made when the
// agent first finds nothing to claim (a run that stops when idle never needs them: on
// PostgreSQL they are a connection), then the agent looks once more, so that no commit after
// they were made goes unnoticed. Without them (the system's inotify instances used up, say) the
// agent still works, waking every poll_ms.
class IdleWait {
 public:
  // True when the notifications were just made: the caller looks for a task once more.
  bool start_listening(Tasks& tasks, const std::string& agent, int64_t poll_ms) {
    if (tried_) return false;
    tried_ = true;
    try {
      ready_.emplace(tasks.store(), detail::kReadyChannel);
      return true;
    } catch (const store::StoreError& e) {
      std::fprintf(stderr, "loom agent %s: polling every %lld ms (%s)\n", loom::detail::escape_text(agent).c_str(),
                   static_cast<long long>(poll_ms), loom::detail::escape_text(e.what(), true).c_str());
      return false;
    }
  }
  // Until a task may be ready, poll_ms or stop(): in slices of 10 ms, so that stop() is seen soon.
  void wait(int64_t poll_ms, const std::atomic<bool>& stop) {
    for (int64_t slept = 0; slept < poll_ms && !stop.load(); slept += 10) {
      const int64_t slice = std::min<int64_t>(10, poll_ms - slept);
      if (ready_ ? ready_->wait(slice) : (std::this_thread::sleep_for(std::chrono::milliseconds(slice)), false)) break;
    }
  }

 private:
  std::optional<store::Notifications> ready_;
  bool tried_ = false;
};

// The next adaptive batch, which should run for about kAdaptiveBatchMs given how long this one's
// tasks took. It shrinks at once and grows by doubling, so that a long task after a run of short
// ones holds few behind it.
int64_t adapted_batch(int64_t batch, std::chrono::steady_clock::time_point started, size_t tasks) {
  const double per_task_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started).count() / static_cast<double>(tasks);
  const double fits = AgentOptions::kAdaptiveBatchMs * 1000.0 / std::max(per_task_us, 1.0);
  return std::clamp<int64_t>(std::min(static_cast<int64_t>(fits), 2 * batch), 1, AgentOptions::kAdaptiveBatchMax);
}

}  // namespace

// Runs a batch of claims one after the other, heartbeating all of them while it runs; a claim
// cancelled or lost while it waited its turn is skipped. Appends their ends.
void Agent::run_claims(const std::vector<Claim>& claims, std::vector<TaskEnd>& ends) {
  std::deque<TaskContext> contexts;
  HeartbeatThread::Held held;
  for (const Claim& c : claims) {
    contexts.emplace_back(c, [this] { return tasks_.now_ms(); });
    held.emplace_back(&c, &contexts.back());
  }
  HeartbeatThread heartbeat(tasks_, std::move(held));
  for (size_t i = 0; i < claims.size(); ++i) {
    const StopReason r = contexts[i].stop_reason();
    if (r == StopReason::Cancelled || r == StopReason::Lost) continue;
    if (std::optional<TaskEnd> end = attempt(claims[i], contexts[i])) ends.push_back(std::move(*end));
  }
}

int64_t Agent::run(const AgentOptions& options) {
  std::vector<std::string> registered;
  for (const auto& [k, f] : functions_) registered.push_back(k);
  for (const auto& [k, c] : commands_) registered.push_back(k);
  const std::vector<std::string> kinds = kinds_to_run(options, registered, name_);
  int64_t batch = options.batch > 0 ? options.batch : 1;  // adapting, it starts at 1
  IdleWait idle;
  int64_t ran = 0;
  std::vector<TaskEnd> ends;  // the last tasks' ends, recorded with the next claims
  for (;;) {
    const bool more = !stop_.load() && (options.max_tasks == 0 || ran < options.max_tasks);
    if (!more && ends.empty()) break;
    const int64_t want = !more ? 0 : options.max_tasks == 0 ? batch : std::min(batch, options.max_tasks - ran);
    const std::vector<Claim> claims = complete_and_claim(tasks_, ends, kinds, name_, want);
    ends.clear();
    if (!more) break;
    if (claims.empty()) {
      if (options.stop_when_idle) break;
      if (idle.start_listening(tasks_, name_, options.poll_ms)) continue;  // a look after it was made
      idle.wait(options.poll_ms, stop_);
      continue;
    }
    const auto started = std::chrono::steady_clock::now();
    run_claims(claims, ends);
    ran += static_cast<int64_t>(claims.size());
    if (options.batch == 0) batch = adapted_batch(batch, started, claims.size());
  }
  stop_.store(false);
  return ran;
}

}  // namespace loom::flow
