// Writers killed at random moments (SIGKILL while saving, deleting and collecting garbage): the
// database and the blobs stay consistent and every save that returned loads (docs/store.md,
// "Guarantees").
//
// The writer is this test binary itself, re-executed with StoreKill.WriterLoop selected and
// LOOM_STORE_KILL_DB set, so that it starts clean (no fork of a multi-threaded process).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <loom/loom.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "unit/core_test_util.h"
#include "unit/store_test_util.h"

using namespace loom;
using loom_test::raw_sql;
using loom_test::small_mlp;
using loom_test::TempDir;
namespace fs = std::filesystem;

namespace {

// Appends one line to the acknowledgement log (O_APPEND: whole lines, kept by the kernel
// when the process is killed).
void ack(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  const std::string l = line + "\n";
  ASSERT_EQ(::write(fd, l.data(), l.size()), static_cast<ssize_t>(l.size()));
  ::close(fd);
}

}  // namespace

// The writer: saves versions of one name (five weight sets, so blobs are shared), deletes some,
// collects garbage now and then, and logs each operation once it has returned.
TEST(StoreKill, WriterLoop) {
  const char* db = std::getenv("LOOM_STORE_KILL_DB");
  if (!db) GTEST_SKIP() << "run by StoreKill.KilledWritersLeaveAConsistentStore";
  const std::string log = std::string(db) + ".acks";
  store::Store s = store::Store::open(db);
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  for (int i = 0;; ++i) {
    const uint64_t seed = rng() % 5;
    const store::ModelInfo info = s.models().save("m", small_mlp(seed), {{"seed", double(seed)}});
    ack(log, "S " + std::to_string(info.version) + " " + std::to_string(seed));
    if (rng() % 3 == 0) {
      const auto versions = s.models().versions("m");
      const int64_t v = versions[rng() % versions.size()].version;
      ack(log, "R " + std::to_string(v));  // a kill may cut the remove before or after its commit
      s.models().remove("m", v);
      ack(log, "D " + std::to_string(v));
    }
    if (rng() % 7 == 0) s.gc();
  }
}

TEST(StoreKill, KilledWritersLeaveAConsistentStore) {
  TempDir tmp;
  const std::string db = tmp / "s.db";
  std::mt19937 rng(1234);
  constexpr int kKills = 30;
  // The child's environment and arguments are built before fork: between fork and exec only
  // async-signal-safe calls (other threads may have held the allocator's lock).
  std::vector<std::string> env_strings{"LOOM_STORE_KILL_DB=" + db, "LOOM_NUM_THREADS=1"};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LOOM_STORE_KILL_DB=", 19) != 0 && std::strncmp(*e, "LOOM_NUM_THREADS=", 17) != 0) env_strings.push_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  char arg0[] = "loom_unit_tests", arg1[] = "--gtest_filter=StoreKill.WriterLoop";
  char* argv[] = {arg0, arg1, nullptr};
  for (int k = 0; k < kKills; ++k) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::execve("/proc/self/exe", argv, envp.data());
      ::_exit(127);
    }
    // Killed anywhere from start-up to a few dozen operations in.
    std::this_thread::sleep_for(std::chrono::milliseconds(60 + rng() % 240));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer exited by itself (status " << status << ")";
  }
  // What the writers acknowledged.
  std::map<int64_t, uint64_t> live;  // version -> seed, saved and not asked to be removed
  std::ifstream acks(db + ".acks");
  std::string op;
  int64_t saves = 0;
  while (acks >> op) {
    int64_t v = 0;
    acks >> v;
    if (op == "S") {
      uint64_t seed = 0;
      acks >> seed;
      live[v] = seed;
      ++saves;
    } else {
      live.erase(v);  // "R" (maybe removed) or "D" (removed)
    }
  }
  EXPECT_GT(saves, kKills) << "the writers hardly ran: the test proves little";
  store::Store s = store::Store::open(db);
  // Every acknowledged, undeleted save is there and loads with its weights.
  for (const auto& [v, seed] : live) {
    const Graph g = s.models().load("m", v);
    EXPECT_EQ(graph_to_json(g), graph_to_json(small_mlp(seed)));
    EXPECT_TRUE(array_equal(io::graph_state(g).at("l1/weights"), io::graph_state(small_mlp(seed)).at("l1/weights"))) << v;
  }
  // Every row loads (also saves whose acknowledgement the kill cut off), versions are distinct.
  std::set<int64_t> rows;
  for (const store::ModelInfo& info : s.models().versions("m")) {
    EXPECT_TRUE(rows.insert(info.version).second);
    EXPECT_NO_THROW(s.models().load(info)) << "version " << info.version;
  }
  for (const auto& [v, seed] : live) EXPECT_TRUE(rows.count(v)) << "acknowledged version " << v << " is gone";
  // Reference counts equal the references; no referenced blob is missing.
  EXPECT_EQ(raw_sql(db, "SELECT COUNT(*) FROM blobs b WHERE b.refcount <> (SELECT COUNT(*) FROM models m WHERE m.weights = b.sha256)"),
            std::vector<std::string>{"0"});
  EXPECT_EQ(raw_sql(db, "SELECT COUNT(*) FROM models m WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.sha256 = m.weights)"),
            std::vector<std::string>{"0"});
  for (const std::string& h : raw_sql(db, "SELECT sha256 FROM blobs"))
    EXPECT_TRUE(fs::exists(s.blob_dir() + "/" + h.substr(0, 2) + "/" + h.substr(2))) << h;
  // gc leaves exactly the referenced files.
  s.gc();
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(s.blob_dir())) files += e.is_regular_file();
  EXPECT_EQ(files, raw_sql(db, "SELECT sha256 FROM blobs").size());
  EXPECT_EQ(raw_sql(db, "PRAGMA integrity_check"), std::vector<std::string>{"ok"});
}
