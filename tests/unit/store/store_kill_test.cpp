// Writers killed at each named crash point and at random moments (SIGKILL while saving,
// deleting and collecting garbage): the database and the blobs stay consistent and every save
// that returned loads (docs/store.md, "Guarantees"); on both backends.
//
// The writer is this test binary itself, re-executed with StoreKill.WriterLoop selected and
// LOOM_STORE_KILL_DB (the store's URL) and LOOM_STORE_KILL_ACKS (its log) set, so that it
// starts clean (no fork of a multi-threaded process).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/graph/serialize.h>
#include <loom/io/model_file.h>
#include <loom/io/safetensors.h>
#include <loom/ops/elementwise.h>
#include <loom/store/model_registry.h>
#include <loom/store/store.h>
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

#include "unit/common/core_test_util.h"
#include "unit/store/store_test_util.h"

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
  const char* acks = std::getenv("LOOM_STORE_KILL_ACKS");
  if (!db || !acks) GTEST_SKIP() << "run by StoreKill.KilledWritersLeaveAConsistentStore";
  const std::string log = acks;
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

namespace {

// Starts the writer (this binary, StoreKill.WriterLoop) on `db`, dying at `crash_at` when given.
// Everything the child needs is built before fork: between fork and exec only
// async-signal-safe calls (another thread may have held the allocator's lock).
pid_t start_writer(const std::string& db, const std::string& acks, const std::string& crash_at) {
  std::vector<std::string> env{"LOOM_STORE_KILL_DB=" + db, "LOOM_STORE_KILL_ACKS=" + acks, "LOOM_NUM_THREADS=1"};
  if (!crash_at.empty()) env.push_back("LOOM_STORE_CRASH_AT=" + crash_at);
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LOOM_STORE_", 11) != 0 && std::strncmp(*e, "LOOM_NUM_THREADS=", 17) != 0) env.push_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  char arg0[] = "loom_store_tests", arg1[] = "--gtest_filter=StoreKill.WriterLoop";
  char* argv[] = {arg0, arg1, nullptr};
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::execve("/proc/self/exe", argv, envp.data());
    ::_exit(127);
  }
  return pid;
}

// Waits up to `ms` for the writer to die by itself (at its crash point), then kills it.
// Returns whether it died by itself; fails the test if it exited instead of being killed.
bool stop_writer(pid_t pid, int ms) {
  int status = 0;
  for (int waited = 0; waited < ms; waited += 10) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the writer exited (status " << status << ")";
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status)) << "the writer exited (status " << status << ")";
  return false;
}

// The store's invariants after any crash: every acknowledged, undeleted save loads with its
// weights; every row loads; versions are distinct; reference counts equal references; every
// referenced blob is stored; after gc exactly the referenced blobs are.
void expect_consistent(const std::string& db, const std::string& acks_path, const std::string& when) {
  SCOPED_TRACE(when);
  std::map<int64_t, uint64_t> live;  // version -> seed, saved and not asked to be removed
  std::ifstream acks(acks_path);
  std::string op;
  while (acks >> op) {
    int64_t v = 0;
    acks >> v;
    if (op == "S") {
      uint64_t seed = 0;
      acks >> seed;
      live[v] = seed;
    } else {
      live.erase(v);  // "R" (maybe removed: the kill may come before or after the commit) or "D"
    }
  }
  store::Store s = store::Store::open(db);
  for (const auto& [v, seed] : live) {
    const Graph g = s.models().load("m", v);
    EXPECT_EQ(graph_to_json(g), graph_to_json(small_mlp(seed)));
    EXPECT_TRUE(array_equal(io::graph_state(g).at("l1/weights"), io::graph_state(small_mlp(seed)).at("l1/weights"))) << v;
  }
  std::set<int64_t> rows;
  for (const store::ModelInfo& info : s.models().versions("m")) {
    EXPECT_TRUE(rows.insert(info.version).second);
    EXPECT_NO_THROW(s.models().load(info)) << "version " << info.version;
  }
  for (const auto& [v, seed] : live) EXPECT_TRUE(rows.count(v)) << "acknowledged version " << v << " is gone";
  EXPECT_EQ(raw_sql(db, "SELECT COUNT(*) FROM blobs b WHERE b.refcount <> (SELECT COUNT(*) FROM models m WHERE m.weights = b.sha256)"),
            std::vector<std::string>{"0"});
  EXPECT_EQ(raw_sql(db, "SELECT COUNT(*) FROM models m WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.sha256 = m.weights)"),
            std::vector<std::string>{"0"});
  for (const std::string& h : raw_sql(db, "SELECT sha256 FROM blobs")) EXPECT_TRUE(loom_test::blob_stored(s, h)) << h;
  s.gc();
  EXPECT_EQ(loom_test::stored_blob_count(s), raw_sql(db, "SELECT sha256 FROM blobs").size());
  if (!loom_test::is_pg_url(db)) EXPECT_EQ(raw_sql(db, "PRAGMA integrity_check"), std::vector<std::string>{"ok"});
}

class StoreKill : public loom_test::StoreBackendTest {};

}  // namespace

INSTANTIATE_STORE_BACKENDS(StoreKill);

TEST_P(StoreKill, KilledWritersLeaveAConsistentStore) {
  const std::string db = url(), acks = tmp / "acks";
  store::Store::open(db);  // created before the writers race to
  // First at each named moment of a save, a removal and gc (src/store/crash_point.h; gc removes
  // files of SQLite stores only)...
  std::vector<std::string> points{"save:blob-written", "save:before-commit", "save:committed", "remove:committed"};
  if (!pg()) points.push_back("gc:removing");
  for (const std::string& point : points) {
    if (point == "gc:removing") {  // something for gc to remove (the checks' gc removed the rest)
      fs::create_directories(db + ".blobs/ff");
      std::ofstream(db + ".blobs/ff/" + std::string(62, 'f')) << "orphan";
    }
    const pid_t pid = start_writer(db, acks, point);
    ASSERT_GE(pid, 0);
    EXPECT_TRUE(stop_writer(pid, 5000)) << "the writer never reached " << point;
    expect_consistent(db, acks, "after a crash at " + point);
  }
  // ...then at random moments, anywhere from start-up (opening the store) to a few dozen
  // operations in, checking the invariants every 50 kills.
  std::mt19937 rng(1234);
  constexpr int kKills = 200;
  const auto log_size = [&] {
    std::error_code ec;
    const auto n = fs::file_size(acks, ec);
    return ec ? 0 : n;
  };
  // Three kills in four wait for the writer's first acknowledgement (start-up takes a varying
  // few hundred ms on a loaded machine), so that they land among its operations; the fourth
  // comes at a random moment from the start.
  int at_work = 0;  // kills of a writer that had done something, so was in its loop of operations
  const auto start = std::chrono::steady_clock::now();
  for (int k = 1; k <= kKills; ++k) {
    const auto size = log_size();
    const pid_t pid = start_writer(db, acks, "");
    ASSERT_GE(pid, 0);
    if (k % 4 != 0)
      for (int waited = 0; log_size() == size && waited < 10000; waited += 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::this_thread::sleep_for(std::chrono::milliseconds(k % 4 != 0 ? rng() % 40 : rng() % 300));
    stop_writer(pid, 0);
    at_work += log_size() > size;
    if (k % 50 == 0) expect_consistent(db, acks, "after " + std::to_string(k) + " random kills");
  }
  const double kill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int64_t saves = 0, removes = 0;
  std::ifstream log(acks);
  for (std::string line; std::getline(log, line);) {
    saves += line.rfind("S ", 0) == 0;
    removes += line.rfind("D ", 0) == 0;
  }
  std::printf("store kill soak (%s): %zu crash points + %d random kills (%d of writers at work) in %.1f s; %lld acknowledged saves, %lld removals\n",
              GetParam().c_str(), points.size(), kKills, at_work, kill_s, static_cast<long long>(saves), static_cast<long long>(removes));
  EXPECT_GT(at_work, kKills / 2) << "most writers were killed before they did anything: the test proves little";
}
