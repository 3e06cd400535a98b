// Command task kinds: a child process per attempt (posix_spawn: safe in a multi-threaded
// agent, unlike fork), in a process group of its own so that a timeout, a cancellation or a lost
// claim kills everything it started. The child reports intermediate metrics as lines
// "STEP VALUE" on file descriptor 3 ($LOOM_TASK_REPORT_FD); a Stop decision ends it with
// SIGTERM (then SIGKILL after Command::stop_grace_ms).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include "core/json_util.h"
#include "loom/flow/agent.h"

extern char** environ;

namespace loom::flow {

namespace {

constexpr size_t kStderrTail = 4096;  // what an error keeps of the child's stderr
constexpr int kPollMs = 20;
constexpr int kDrainMs = 1000;  // after the child exits, how long its descendants may keep the pipes open
constexpr size_t kMaxReportLine = 256;
constexpr int kReportFd = 3;

struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;  // one owner closes it
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// A file the child reads, removed when the attempt ends.
struct TempFile {
  std::string path;
  TempFile() = default;
  TempFile(const TempFile&) = delete;  // one owner removes it
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};

std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string tail(const std::string& s) {
  if (s.empty()) return "";
  std::string t = s.size() > kStderrTail ? "..." + s.substr(s.size() - kStderrTail) : s;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  return "; stderr: " + t;
}

void write_all(int fd, const std::string& data, const std::string& path) {
  for (size_t at = 0; at < data.size();) {
    const ssize_t n = ::write(fd, data.data() + at, data.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw TaskFailure(sys_error("cannot write the hyper-parameters to '" + path + "'"));
    at += static_cast<size_t>(n);
  }
}

// Reads what is available; returns false at end of file.
bool drain(int fd, std::string& into) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      into.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;  // anything else ends the stream
  }
}

// "STEP VALUE" (spaces or tabs around and between; STEP an integer from 1, VALUE a finite
// number), else nullopt.
std::optional<std::pair<int64_t, double>> parse_report(const std::string& line) {
  const char* p = line.c_str();
  char* end = nullptr;
  errno = 0;
  const long long step = std::strtoll(p, &end, 10);
  if (end == p || errno != 0 || step < 1 || (*end != ' ' && *end != '\t')) return std::nullopt;
  p = end;
  const double value = std::strtod(p, &end);
  if (end == p || !std::isfinite(value)) return std::nullopt;
  while (*end == ' ' || *end == '\t' || *end == '\r') ++end;
  if (*end != '\0') return std::nullopt;
  return std::make_pair(static_cast<int64_t>(step), value);
}

// The files an attempt gives its child: the hyper-parameters (its stdin as well) and the
// dependencies' results, each removed when the attempt ends.
struct AttemptFiles {
  TempFile hyper_parameters, dependencies;
};

void write_temp(TempFile& file, const std::string& text, const char* what) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "loom_task_XXXXXX").string();
  Fd f;
  f.fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (f.fd < 0) throw TaskFailure(sys_error(std::string("cannot create a file for the ") + what + " in " + tmpl));
  file.path = tmpl;
  write_all(f.fd, text, tmpl);
}

void write_attempt_files(const Claim& claim, AttemptFiles& files) {
  write_temp(files.hyper_parameters, claim.hyper_parameters, "hyper-parameters");
  // The dependencies' results: [{"id", "name", "kind", "result"}, ...] in id order.
  nlohmann::json deps = nlohmann::json::array();
  for (const DependencyResult& d : claim.dependencies)
    deps.push_back({{"id", d.task_id}, {"name", d.name}, {"kind", d.kind}, {"result", nlohmann::json::parse(d.result.empty() ? "null" : d.result)}});
  write_temp(files.dependencies, deps.dump(), "dependencies' results");
}

// The agent's environment with the task's own LOOM_TASK_* variables in place of any it had, so
// that a child never reads its parent task's.
std::vector<std::string> child_environment(const Claim& claim, const AttemptFiles& files) {
  std::vector<std::string> env{"LOOM_TASK_ID=" + std::to_string(claim.task_id), "LOOM_TASK_TOKEN=" + std::to_string(claim.token),
                               "LOOM_TASK_ATTEMPT=" + std::to_string(claim.attempt),
                               "LOOM_TASK_HYPER_PARAMETERS=" + files.hyper_parameters.path,
                               "LOOM_TASK_DEPENDENCIES=" + files.dependencies.path, "LOOM_TASK_REPORT_FD=" + std::to_string(kReportFd)};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LOOM_TASK_", 10) != 0) env.emplace_back(*e);
  return env;
}

// The child's stdout, stderr and report descriptor: the agent reads one end, the child writes the other.
struct ChildPipes {
  Fd out_r, out_w, err_r, err_w, report_r, report_w;
};

void open_pipe(Fd& read_end, Fd& write_end, const std::string& program) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) throw TaskFailure(sys_error("cannot create a pipe for '" + program + "'"));
  read_end.fd = ends[0];
  write_end.fd = ends[1];
}

void open_pipes(const std::string& program, ChildPipes& pipes) {
  open_pipe(pipes.out_r, pipes.out_w, program);
  open_pipe(pipes.err_r, pipes.err_w, program);
  open_pipe(pipes.report_r, pipes.report_w, program);
  if (pipes.report_w.fd == kReportFd) {  // dup2 onto itself would keep it close-on-exec
    Fd moved{::fcntl(pipes.report_w.fd, F_DUPFD_CLOEXEC, kReportFd + 1)};
    if (moved.fd < 0) throw TaskFailure(sys_error("cannot create a pipe for '" + program + "'"));
    std::swap(moved.fd, pipes.report_w.fd);
  }
}

// Starts the child in a process group of its own (so that killing the group reaches everything
// it started), its signals at their defaults, its stdin the hyper-parameters file; then closes
// the agent's copies of the pipes' write ends (so that end of file means the child and its
// descendants closed theirs) and makes the read ends non-blocking for the poll loop.
pid_t spawn_child(const Command& command, const AttemptFiles& files, std::vector<std::string> env, ChildPipes& pipes) {
  const std::string& program = command.argv[0];
  std::vector<char*> envp, argv;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = command.argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, 0, files.hyper_parameters.path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipes.out_w.fd, 1);
  posix_spawn_file_actions_adddup2(&actions, pipes.err_w.fd, 2);
  posix_spawn_file_actions_adddup2(&actions, pipes.report_w.fd, kReportFd);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, defaults;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&defaults, s);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  pid_t pid = -1;
  const int rc = program.find('/') == std::string::npos ? posix_spawnp(&pid, program.c_str(), &actions, &attr, argv.data(), envp.data())
                                                         : posix_spawn(&pid, program.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw TaskFailure("cannot start command '" + program + "': " + std::strerror(rc));
  pipes.out_w.reset();
  pipes.err_w.reset();
  pipes.report_w.reset();
  ::fcntl(pipes.out_r.fd, F_SETFL, O_NONBLOCK);
  ::fcntl(pipes.err_r.fd, F_SETFL, O_NONBLOCK);
  ::fcntl(pipes.report_r.fd, F_SETFL, O_NONBLOCK);
  return pid;
}

// A running child as the agent watches it: what it printed and reported, whether it exited, and
// why the agent killed its group, if it did.
class ChildWatch {
 public:
  ChildWatch(const Command& command, const Claim& claim, TaskContext& ctx, pid_t pid)
      : command_(command), claim_(claim), ctx_(ctx), pid_(pid) {}

  // Until the child has exited, not only until its pipes close: a program may close its
  // stdout and stderr before it exits (coreutils' cat does), and the kill below would make a
  // child still on its way out "killed by signal 9".
  void watch(ChildPipes& pipes) {
    while (!exited_ || pipes.out_r.fd >= 0 || pipes.err_r.fd >= 0 || pipes.report_r.fd >= 0) {
      read_pipes(pipes);
      take_reports();
      bound_child();
      if (drained_after_exit()) break;
    }
  }

  // Kills what the child left behind and reaps it; its wait status.
  int reap() {
    ::kill(-pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
  }

  // The attempt's result JSON text from the child's wait status and what it printed, or a
  // TaskFailure saying why there is none.
  std::string result(int status) const {
    const std::string who = "command '" + command_.argv[0] + "'";
    std::string parse_error;
    if (stopped_ && killed_for_.empty()) {
      // Stopped by the scheduler: the JSON it printed on its way out if it exited cleanly, else
      // its last report.
      std::optional<nlohmann::json> result;
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) result = loom::detail::parse_json(out_, &parse_error);
      if (!result) result = nlohmann::json{{"step", last_step_}, {"value", last_value_}};
      return result->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    if (!killed_for_.empty()) throw TaskFailure(who + " was killed: " + killed_for_ + tail(err_));
    if (WIFSIGNALED(status))
      throw TaskFailure(who + " was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")" +
                        tail(err_));
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
      throw TaskFailure(who + " exited with status " + std::to_string(WEXITSTATUS(status)) + tail(err_));
    const std::optional<nlohmann::json> result = loom::detail::parse_json(out_, &parse_error);
    if (!result) {
      const std::string shown = out_.size() > 200 ? out_.substr(0, 200) + "..." : out_;
      throw TaskFailure(who + " printed no JSON result on stdout (" + parse_error + "); it printed: '" + shown + "'" + tail(err_));
    }
    return result->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

 private:
  void kill_group(const std::string& why) {
    if (killed_for_.empty()) killed_for_ = why;
    ::kill(-pid_, SIGKILL);
  }

  // Waits up to a poll interval for output, then reads what each open pipe has; a pipe at end
  // of file is closed.
  void read_pipes(ChildPipes& pipes) {
    pollfd fds[3];
    nfds_t n = 0;
    for (Fd* f : {&pipes.out_r, &pipes.err_r, &pipes.report_r})
      if (f->fd >= 0) fds[n++] = {f->fd, POLLIN, 0};
    ::poll(fds, n, kPollMs);
    if (pipes.out_r.fd >= 0 && !drain(pipes.out_r.fd, out_)) pipes.out_r.reset();
    if (pipes.err_r.fd >= 0 && !drain(pipes.err_r.fd, err_)) pipes.err_r.reset();
    if (pipes.report_r.fd >= 0 && !drain(pipes.report_r.fd, reports_)) pipes.report_r.reset();
  }

  // Passes each complete report line to the scheduler; a malformed or overlong one kills the
  // group, a Stop decision sends it SIGTERM.
  void take_reports() {
    for (size_t nl; killed_for_.empty() && !stopped_ && (nl = reports_.find('\n')) != std::string::npos;) {
      const std::string line = reports_.substr(0, nl);
      reports_.erase(0, nl + 1);
      const auto r = parse_report(line);
      if (!r) {
        kill_group("it wrote '" + (line.size() > 80 ? line.substr(0, 80) + "..." : line) + "' on its report descriptor " +
                   std::to_string(kReportFd) + " (valid: one 'STEP VALUE' a line, STEP an integer from 1, VALUE a finite number)");
        break;
      }
      if (report(r->first, r->second) == Decision::Stop) {
        stopped_ = true;
        stop_at_ = std::chrono::steady_clock::now();
        ::kill(-pid_, SIGTERM);
      }
    }
    if (reports_.size() > kMaxReportLine && reports_.find('\n') == std::string::npos && killed_for_.empty() && !stopped_)
      kill_group("it wrote a report line longer than " + std::to_string(kMaxReportLine) + " bytes on its report descriptor " +
                 std::to_string(kReportFd));
  }

  Decision report(int64_t step, double value) {
    Decision d = Decision::Continue;
    try {
      d = ctx_.report(step, value);
    } catch (...) {  // a lost claim, the store: end the child before passing it on
      ::kill(-pid_, SIGKILL);
      int st = 0;
      while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
      }
      throw;
    }
    last_step_ = step;
    last_value_ = value;
    return d;
  }

  // The limits on a child: the grace after a Stop, the output it may print (stderr keeps only
  // its tail), and the task's own end (cancelled, claim lost, timed out).
  void bound_child() {
    if (stopped_ && !exited_ && std::chrono::steady_clock::now() - stop_at_ > std::chrono::milliseconds(command_.stop_grace_ms))
      ::kill(-pid_, SIGKILL);
    if (err_.size() > 2 * kStderrTail) err_.erase(0, err_.size() - kStderrTail);
    if (out_.size() > static_cast<size_t>(command_.max_output_bytes))
      kill_group("printed more than " + std::to_string(command_.max_output_bytes) + " bytes on stdout");
    switch (ctx_.stop_reason()) {
      case StopReason::None: break;
      case StopReason::Cancelled: kill_group("the task was cancelled"); break;
      case StopReason::Lost: kill_group("the claim was lost"); break;
      case StopReason::TimedOut: kill_group("timed out after " + std::to_string(claim_.timeout_ms) + " ms"); break;
    }
  }

  // Notes the child's exit, seen without reaping it, so that its process group id stays
  // reserved until the group is killed (ECHILD: already reaped, where the agent's process
  // ignores SIGCHLD); true once its descendants have had kDrainMs to close the pipes.
  bool drained_after_exit() {
    siginfo_t info{};
    const int waited = exited_ ? 0 : ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
    if (!exited_ && ((waited == 0 && info.si_pid == pid_) || (waited < 0 && errno == ECHILD))) {
      exited_ = true;
      exited_at_ = std::chrono::steady_clock::now();
    }
    return exited_ && std::chrono::steady_clock::now() - exited_at_ > std::chrono::milliseconds(kDrainMs);
  }

  const Command& command_;
  const Claim& claim_;
  TaskContext& ctx_;
  const pid_t pid_;
  std::string out_, err_, reports_;
  std::string killed_for_;  // why the agent killed the group, if it did
  bool exited_ = false;
  std::chrono::steady_clock::time_point exited_at_ = std::chrono::steady_clock::now();
  // The last report, and whether its decision was Stop (the group then got SIGTERM at stop_at_).
  int64_t last_step_ = 0;
  double last_value_ = 0;
  bool stopped_ = false;
  std::chrono::steady_clock::time_point stop_at_ = std::chrono::steady_clock::now();
};

}  // namespace

std::string run_command(const Command& command, const Claim& claim, TaskContext& ctx) {
  if (command.argv.empty() || command.argv[0].empty()) throw ValueError("run_command: the command has no program (argv[0])");
  AttemptFiles files;
  write_attempt_files(claim, files);
  // Everything the child gets is built before it starts.
  std::vector<std::string> env = child_environment(claim, files);
  ChildPipes pipes;
  open_pipes(command.argv[0], pipes);
  ChildWatch child(command, claim, ctx, spawn_child(command, files, std::move(env), pipes));
  child.watch(pipes);
  return child.result(child.reap());
}

}  // namespace loom::flow
