#include "loom/flow/agent.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>

#include "core/utf8.h"
#include "flow/kind.h"

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

// Heartbeats a claim every lease / 3 until destroyed, telling the context when to stop.
class HeartbeatThread {
 public:
  HeartbeatThread(Tasks& tasks, const Claim& claim, TaskContext& ctx) {
    const auto period = std::chrono::milliseconds(std::max<int64_t>(2, claim.lease_ms / 3));
    thread_ = std::thread([this, &tasks, &claim, &ctx, period] {
      std::unique_lock<std::mutex> lock(mutex_);
      while (!cv_.wait_for(lock, period, [this] { return done_; })) {
        lock.unlock();
        try {
          const Heartbeat h = tasks.heartbeat(claim);
          if (h == Heartbeat::Cancelled) ctx.stop(StopReason::Cancelled);
          if (h == Heartbeat::Lost) ctx.stop(StopReason::Lost);
        } catch (const std::exception&) {
          // a busy or unreachable database: try again next period (the lease covers 3 periods)
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

Outcome Agent::execute(const Claim& claim) {
  TaskContext ctx(claim, [this] { return tasks_.now_ms(); });
  std::optional<Reports> reports;  // made at the task's first report (which ensures its tables)
  ctx.set_reporter([this, &claim, &reports](int64_t step, double value) {
    if (!reports) reports.emplace(tasks_.store(), [this] { return tasks_.now_ms(); });
    return reports->report(claim, step, value);
  });
  std::string result, error;
  bool ok = false;
  {
    HeartbeatThread heartbeat(tasks_, claim, ctx);
    try {
      if (auto f = functions_.find(claim.kind); f != functions_.end()) {
        result = f->second(claim.hyper_parameters, ctx);
      } else if (auto c = commands_.find(claim.kind); c != commands_.end()) {
        result = run_command(c->second, claim, ctx);
      } else {
        throw TaskFailure("agent '" + name_ + "' has no task kind '" + claim.kind + "'");
      }
      ok = true;
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "the task threw a non-standard exception";
    }
  }
  const StopReason reason = ctx.stop_reason();
  if (reason == StopReason::Cancelled) return Outcome::Cancelled;
  if (reason == StopReason::Lost) return Outcome::Lost;
  if (reason == StopReason::TimedOut) {
    ok = false;
    error = "timed out after " + std::to_string(claim.timeout_ms) + " ms";
  }
  try {
    if (ok) {
      try {
        tasks_.finish(claim, result);
        return Outcome::Finished;
      } catch (const ValueError& e) {
        error = std::string("the task returned a result that is not JSON: ") + e.what();
      }
    }
    tasks_.fail(claim, error);
    return Outcome::Failed;
  } catch (const ClaimLostError&) {
    // cancelled (or reclaimed) between the last heartbeat and now
    const TaskInfo t = tasks_.get(claim.task_id);
    return t.status == Status::Cancelled && t.token == claim.token ? Outcome::Cancelled : Outcome::Lost;
  }
}

int64_t Agent::run(const AgentOptions& options) {
  std::vector<std::string> kinds = options.kinds;
  std::string known;
  for (const auto& [k, f] : functions_) known += (known.empty() ? "" : ", ") + k;
  for (const auto& [k, c] : commands_) known += (known.empty() ? "" : ", ") + k;
  if (kinds.empty()) {
    for (const auto& [k, f] : functions_) kinds.push_back(k);
    for (const auto& [k, c] : commands_) kinds.push_back(k);
  }
  if (kinds.empty()) throw ValueError("Agent::run: agent '" + name_ + "' has no task kinds (register_kind or register_command first)");
  for (const std::string& k : kinds)
    if (!functions_.count(k) && !commands_.count(k))
      throw ValueError("Agent::run: unknown task kind '" + k + "' (registered: " + (known.empty() ? "none" : known) + ")");
  if (options.poll_ms < 0 || options.max_tasks < 0) throw ValueError("Agent::run: poll_ms and max_tasks must not be negative");

  int64_t ran = 0;
  while (!stop_.load() && (options.max_tasks == 0 || ran < options.max_tasks)) {
    std::optional<Claim> claim;
    try {
      claim = tasks_.claim(kinds, name_);
      if (claim) {
        execute(*claim);
        ++ran;
        continue;
      }
    } catch (const store::StoreError& e) {
      // the database was busy or failed: what was not committed is replayed when the lease ends
      // (escaped: the message may quote text from the database, shown on a terminal)
      std::fprintf(stderr, "loom agent %s: %s\n", loom::detail::escape_text(name_).c_str(),
                   loom::detail::escape_text(e.what(), true).c_str());
    }
    if (!claim && options.stop_when_idle) break;
    for (int64_t slept = 0; slept < options.poll_ms && !stop_.load(); slept += 10)
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(10, options.poll_ms - slept)));
  }
  stop_.store(false);
  return ran;
}

}  // namespace loom::flow
