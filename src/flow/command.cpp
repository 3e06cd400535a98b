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
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// The hyper-parameters file, removed when the attempt ends.
struct TempFile {
  std::string path;
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

}  // namespace

std::string run_command(const Command& command, const Claim& claim, TaskContext& ctx) {
  if (command.argv.empty() || command.argv[0].empty()) throw ValueError("run_command: the command has no program (argv[0])");
  const std::string program = command.argv[0];

  const auto write_temp = [](TempFile& file, const std::string& text, const char* what) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "loom_task_XXXXXX").string();
    Fd f;
    f.fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
    if (f.fd < 0) throw TaskFailure(sys_error(std::string("cannot create a file for the ") + what + " in " + tmpl));
    file.path = tmpl;
    write_all(f.fd, text, tmpl);
  };
  TempFile hyper, dependencies;
  write_temp(hyper, claim.hyper_parameters, "hyper-parameters");
  // The dependencies' results: [{"id", "name", "kind", "result"}, ...] in id order.
  nlohmann::json deps = nlohmann::json::array();
  for (const DependencyResult& d : claim.dependencies)
    deps.push_back({{"id", d.task_id}, {"name", d.name}, {"kind", d.kind}, {"result", nlohmann::json::parse(d.result.empty() ? "null" : d.result)}});
  write_temp(dependencies, deps.dump(), "dependencies' results");

  // Everything the child gets is built before it starts.
  std::vector<std::string> env{"LOOM_TASK_ID=" + std::to_string(claim.task_id), "LOOM_TASK_TOKEN=" + std::to_string(claim.token),
                               "LOOM_TASK_ATTEMPT=" + std::to_string(claim.attempt), "LOOM_TASK_HYPER_PARAMETERS=" + hyper.path,
                               "LOOM_TASK_DEPENDENCIES=" + dependencies.path, "LOOM_TASK_REPORT_FD=" + std::to_string(kReportFd)};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LOOM_TASK_", 10) != 0) env.emplace_back(*e);
  std::vector<char*> envp, argv;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = command.argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw TaskFailure(sys_error("cannot create a pipe for '" + program + "'"));
  Fd out_r{out_pipe[0]}, out_w{out_pipe[1]};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) throw TaskFailure(sys_error("cannot create a pipe for '" + program + "'"));
  Fd err_r{err_pipe[0]}, err_w{err_pipe[1]};
  int report_pipe[2];
  if (::pipe2(report_pipe, O_CLOEXEC) != 0) throw TaskFailure(sys_error("cannot create a pipe for '" + program + "'"));
  Fd report_r{report_pipe[0]}, report_w{report_pipe[1]};
  if (report_w.fd == kReportFd) {  // dup2 onto itself would keep it close-on-exec
    Fd moved{::fcntl(report_w.fd, F_DUPFD_CLOEXEC, kReportFd + 1)};
    if (moved.fd < 0) throw TaskFailure(sys_error("cannot create a pipe for '" + program + "'"));
    std::swap(moved.fd, report_w.fd);
  }

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, 0, hyper.path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_w.fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_w.fd, 2);
  posix_spawn_file_actions_adddup2(&actions, report_w.fd, kReportFd);
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
  out_w.reset();
  err_w.reset();
  report_w.reset();
  ::fcntl(out_r.fd, F_SETFL, O_NONBLOCK);
  ::fcntl(err_r.fd, F_SETFL, O_NONBLOCK);
  ::fcntl(report_r.fd, F_SETFL, O_NONBLOCK);

  std::string out, err, reports;
  std::string killed_for;  // why the agent killed the group, if it did
  bool exited = false;
  auto exited_at = std::chrono::steady_clock::now();
  auto kill_group = [&](const std::string& why) {
    if (killed_for.empty()) killed_for = why;
    ::kill(-pid, SIGKILL);
  };
  // The last report, and whether its decision was Stop (the group then got SIGTERM at stop_at).
  int64_t last_step = 0;
  double last_value = 0;
  bool stopped = false;
  auto stop_at = std::chrono::steady_clock::now();
  auto take_reports = [&] {
    for (size_t nl; killed_for.empty() && !stopped && (nl = reports.find('\n')) != std::string::npos;) {
      const std::string line = reports.substr(0, nl);
      reports.erase(0, nl + 1);
      const auto r = parse_report(line);
      if (!r) {
        kill_group("it wrote '" + (line.size() > 80 ? line.substr(0, 80) + "..." : line) + "' on its report descriptor " +
                   std::to_string(kReportFd) + " (valid: one 'STEP VALUE' a line, STEP an integer from 1, VALUE a finite number)");
        break;
      }
      Decision d = Decision::Continue;
      try {
        d = ctx.report(r->first, r->second);
      } catch (...) {  // a lost claim, the store: end the child before passing it on
        ::kill(-pid, SIGKILL);
        int st = 0;
        while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        throw;
      }
      last_step = r->first;
      last_value = r->second;
      if (d == Decision::Stop) {
        stopped = true;
        stop_at = std::chrono::steady_clock::now();
        ::kill(-pid, SIGTERM);
      }
    }
    if (reports.size() > kMaxReportLine && reports.find('\n') == std::string::npos && killed_for.empty() && !stopped)
      kill_group("it wrote a report line longer than " + std::to_string(kMaxReportLine) + " bytes on its report descriptor " +
                 std::to_string(kReportFd));
  };
  // Until the child has exited, not only until its pipes close: a program may close its
  // stdout and stderr before it exits (coreutils' cat does), and the kill below would make a
  // child still on its way out "killed by signal 9".
  while (!exited || out_r.fd >= 0 || err_r.fd >= 0 || report_r.fd >= 0) {
    pollfd fds[3];
    nfds_t n = 0;
    for (Fd* f : {&out_r, &err_r, &report_r})
      if (f->fd >= 0) fds[n++] = {f->fd, POLLIN, 0};
    ::poll(fds, n, kPollMs);
    if (out_r.fd >= 0 && !drain(out_r.fd, out)) out_r.reset();
    if (err_r.fd >= 0 && !drain(err_r.fd, err)) err_r.reset();
    if (report_r.fd >= 0 && !drain(report_r.fd, reports)) report_r.reset();
    take_reports();
    if (stopped && !exited && std::chrono::steady_clock::now() - stop_at > std::chrono::milliseconds(command.stop_grace_ms))
      ::kill(-pid, SIGKILL);
    if (err.size() > 2 * kStderrTail) err.erase(0, err.size() - kStderrTail);
    if (out.size() > static_cast<size_t>(command.max_output_bytes))
      kill_group("printed more than " + std::to_string(command.max_output_bytes) + " bytes on stdout");
    switch (ctx.stop_reason()) {
      case StopReason::None: break;
      case StopReason::Cancelled: kill_group("the task was cancelled"); break;
      case StopReason::Lost: kill_group("the claim was lost"); break;
      case StopReason::TimedOut: kill_group("timed out after " + std::to_string(claim.timeout_ms) + " ms"); break;
    }
    // The child's exit, seen without reaping it, so that its process group id stays reserved
    // until the group is killed below.
    // (ECHILD: already reaped, where the agent's process ignores SIGCHLD)
    siginfo_t info{};
    const int waited = exited ? 0 : ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    if (!exited && ((waited == 0 && info.si_pid == pid) || (waited < 0 && errno == ECHILD))) {
      exited = true;
      exited_at = std::chrono::steady_clock::now();
    }
    if (exited && std::chrono::steady_clock::now() - exited_at > std::chrono::milliseconds(kDrainMs)) break;
  }
  ::kill(-pid, SIGKILL);  // descendants left behind
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }

  const std::string who = "command '" + program + "'";
  std::string parse_error;
  if (stopped && killed_for.empty()) {
    // Stopped by the scheduler: the JSON it printed on its way out if it exited cleanly, else
    // its last report.
    std::optional<nlohmann::json> result;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) result = loom::detail::parse_json(out, &parse_error);
    if (!result) result = nlohmann::json{{"step", last_step}, {"value", last_value}};
    return result->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  if (!killed_for.empty()) throw TaskFailure(who + " was killed: " + killed_for + tail(err));
  if (WIFSIGNALED(status))
    throw TaskFailure(who + " was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")" + tail(err));
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    throw TaskFailure(who + " exited with status " + std::to_string(WEXITSTATUS(status)) + tail(err));
  const std::optional<nlohmann::json> result = loom::detail::parse_json(out, &parse_error);
  if (!result) {
    const std::string shown = out.size() > 200 ? out.substr(0, 200) + "..." : out;
    throw TaskFailure(who + " printed no JSON result on stdout (" + parse_error + "); it printed: '" + shown + "'" + tail(err));
  }
  return result->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace loom::flow
