#pragma once
// Private to tests/unit/tools: runs the built `loom` command line (LOOM_CLI_PATH, set on the
// test files by tests/CMakeLists.txt) as a child process, and reads what it printed.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/utf8.h"
#include "unit/store/store_test_util.h"

extern char** environ;

namespace loom_test {

struct CliResult {
  int code = -1;  // the exit status; 128 + N when killed by signal N
  std::string out, err;
};

// Runs the built `loom` (LOOM_CLI_PATH) with `args`, stdout and stderr into files of `dir`;
// $LOOM_STORE is removed from its environment, or set to `store_env`.
class Cli {
 public:
  Cli(std::string dir, std::optional<std::string> store_env = std::nullopt) : dir_(std::move(dir)) {
    for (char** e = environ; *e; ++e)
      if (std::string(*e).rfind("LOOM_STORE=", 0) != 0) env_.emplace_back(*e);
    if (store_env) env_.push_back("LOOM_STORE=" + *store_env);
  }

  pid_t spawn(const std::vector<std::string>& args) {
    ++n_;
    std::vector<std::string> argv = {LOOM_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv, cenv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    for (auto& e : env_) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), cenv.data());
    posix_spawn_file_actions_destroy(&fa);
    EXPECT_EQ(rc, 0) << "cannot run " << LOOM_CLI_PATH;
    return pid;
  }

  // Waits (at most `timeout`) for the process of the latest spawn.
  CliResult wait(pid_t pid, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    CliResult r;
    const auto end = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > end) {
        ADD_FAILURE() << "loom did not end within " << timeout.count() << " s";
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read(out_path());
    r.err = read(err_path());
    return r;
  }

  CliResult operator()(const std::vector<std::string>& args) { return wait(spawn(args)); }
  // What the latest spawn has written on stdout so far.
  std::string output_so_far() const { return read(out_path()); }

 private:
  std::string out_path() const { return dir_ + "/out" + std::to_string(n_); }
  std::string err_path() const { return dir_ + "/err" + std::to_string(n_); }
  static std::string read(const std::string& path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  std::string dir_;
  std::vector<std::string> env_;
  int n_ = 0;
};

inline std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The table's rows whose first cell is `first`.
inline std::vector<std::string> rows_starting(const std::string& table, const std::string& first) {
  std::vector<std::string> out;
  for (const auto& l : lines(table))
    if (l.rfind(first + " ", 0) == 0) out.push_back(l);
  return out;
}

// Every cell of column `column` starts where its header does (the table is aligned).
inline void expect_aligned(const std::string& table, const std::string& column) {
  const auto ls = lines(table);
  ASSERT_FALSE(ls.empty());
  const size_t at = ls[0].find(column);
  ASSERT_NE(at, std::string::npos) << ls[0];
  for (size_t i = 1; i < ls.size(); ++i) {
    if (ls[i].size() <= at) continue;  // an empty last cell
    EXPECT_NE(ls[i][at], ' ') << "column " << column << " not aligned in:\n" << table;
    EXPECT_EQ(ls[i][at - 1], ' ') << "column " << column << " not aligned in:\n" << table;
  }
}

// Nothing in `text` acts on a terminal: every byte is printable ASCII, a newline or a tab, or
// part of a well-formed UTF-8 character from U+00A0 up (no C0, DEL, C1, stray bytes).
inline ::testing::AssertionResult terminal_safe(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const size_t n = loom::detail::utf8_sequence_length(text, i);
    const bool ok = c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f) ||
                    (n >= 2 && !(c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0));
    if (!ok) {
      std::string around;  // printable ASCII as is, other bytes as \xNN
      for (char b : text.substr(i < 40 ? 0 : i - 40, 80))
        around += b >= 0x20 && b < 0x7f ? std::string(1, b) : "\\x" + hex_byte(static_cast<unsigned char>(b));
      return ::testing::AssertionFailure() << "byte 0x" << hex_byte(c) << " at " << i << " of: " << around;
    }
    i += n >= 2 ? n : 1;
  }
  return ::testing::AssertionSuccess();
}

// The keys of a JSON object, sorted (json keeps them sorted): the key set a command prints.
inline std::vector<std::string> keys_of(const nlohmann::json& j) {
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  return keys;
}

inline nlohmann::json parse(const CliResult& r) {
  EXPECT_EQ(r.code, 0) << r.err;
  try {
    return nlohmann::json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON (" << e.what() << "): " << r.out;
    return nullptr;
  }
}

}  // namespace loom_test
