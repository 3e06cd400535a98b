#pragma once
// What the two workflow examples (flow_fashion_mnist, flow_producer_consumer) share: starting
// more processes of the running program, waiting for them, and reading a number from the flat
// JSON objects they pass around as hyper-parameters and results.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace flow_example {

// Starts this program again (/proc/self/exe) with `args` (the role first) as a new process,
// not a thread: an agent, a producer or an evaluator has its own address space and its own
// connection to the store, as it would on another machine. Returns its process id.
inline pid_t spawn_self(const std::vector<std::string>& args) {
  std::vector<std::string> all{"/proc/self/exe"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);  // the child must not inherit (and later repeat) buffered output
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ);
  if (rc != 0) throw std::runtime_error("cannot start " + args.at(0) + " process: " + std::strerror(rc));
  return pid;
}

// Waits for a process started by spawn_self; returns its exit status (128 + the signal if a
// signal ended it).
inline int wait_for(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 127;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 127;
}

// True once a process started by spawn_self has ended (reaping it), with a note on stderr if it
// failed; false while it runs.
inline bool has_exited(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) != pid) return false;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    std::fprintf(stderr, "process %d ended with %s %d\n", static_cast<int>(pid), WIFEXITED(status) ? "status" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  return true;
}

// The number stored under "key" in a flat JSON object such as the store's canonical
// {"hidden":32,"lr":0.001}; `fallback` when the key is absent.
inline double json_number(const std::string& json, const std::string& key, double fallback) {
  const std::string quoted = "\"" + key + "\"";
  size_t at = json.find(quoted);
  if (at == std::string::npos) return fallback;
  at = json.find(':', at + quoted.size());
  if (at == std::string::npos) return fallback;
  return std::strtod(json.c_str() + at + 1, nullptr);
}

// Exits with a message naming the valid options if argv (after the role) holds anything but
// "--name value" pairs of `valid` names.
inline void check_options(int argc, char** argv, const std::vector<std::string>& valid) {
  for (int i = 2; i < argc; i += 2) {
    bool known = false;
    for (const std::string& v : valid) known = known || v == argv[i];
    if (!known || i + 1 >= argc) {
      std::string list;
      for (const std::string& v : valid) list += " " + v;
      std::fprintf(stderr, "%s: %s option '%s' for role '%s' (valid, each with a value:%s)\n", argv[0],
                   known ? "no value for" : "unknown", argv[i], argv[1], list.c_str());
      std::exit(2);
    }
  }
}

// The value of "--name value" in argv, or `fallback`.
inline std::string option(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 2; i + 1 < argc; i += 2)
    if (argv[i] == name) return argv[i + 1];
  return fallback;
}

// The integer value of "--name value", or `fallback`; exits with a message when it is not one.
inline long long int_option(int argc, char** argv, const std::string& name, long long fallback) {
  const std::string text = option(argc, argv, name, std::to_string(fallback));
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0) {
    std::fprintf(stderr, "%s: %s '%s' is not an integer\n", argv[0], name.c_str(), text.c_str());
    std::exit(2);
  }
  return v;
}

}  // namespace flow_example
