// The collective timeout (DistributedOptions::collective_timeout): a thread that ends this
// process when one collective has waited too long for the other ranks, so that the launcher
// ends the job instead of leaving it hung (a rank that hangs, or left the job without dying).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "dist/comm.h"

namespace loom::dist::detail {

namespace {
using Clock = std::chrono::steady_clock;
// All guarded by g_mu.
std::mutex g_mu;
std::condition_variable g_cv;
std::thread g_thread;
bool g_stop = false;
double g_timeout = 0;  // seconds; 0: wait forever
int g_rank = 0;
std::string g_what;  // the collective waiting now; empty: none
Clock::time_point g_since;
// g_timeout > 0, readable without the lock. Set between collectives by the thread that makes
// them (DistributedOptimizer's constructor, fit's begin): no watch starts on one side of a
// change and ends on the other.
std::atomic<bool> g_on{false};

void watch() {
  std::unique_lock lock(g_mu);
  while (!g_stop) {
    g_cv.wait_for(lock, std::chrono::milliseconds(100));
    if (g_stop || g_timeout <= 0 || g_what.empty()) continue;
    const double waited = std::chrono::duration<double>(Clock::now() - g_since).count();
    if (waited < g_timeout) continue;
    std::fprintf(stderr,
                 "rank %d: dist: %s has waited %.1f s for the other ranks (collective_timeout %g s): another rank died, "
                 "hangs or left the job; ending this process with status %d so that the launcher ends the job\n",
                 g_rank, g_what.c_str(), waited, g_timeout, kTimeoutExitStatus);
    std::fflush(stderr);
    std::_Exit(kTimeoutExitStatus);  // not MPI_Abort: MPI is called from one thread at a time
  }
}
}  // namespace

CollectiveWatch::CollectiveWatch(std::string_view what) {
  if (!g_on.load(std::memory_order_relaxed)) return;  // no timeout: nothing to watch (the hot path)
  std::lock_guard lock(g_mu);
  g_what.assign(what);  // into the capacity of the last one: no allocation on the hot path
  g_since = Clock::now();
}

CollectiveWatch::~CollectiveWatch() {
  if (!g_on.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(g_mu);
  g_what.clear();
}

void set_collective_timeout(double seconds, int rank) {
  std::lock_guard lock(g_mu);
  g_timeout = seconds;
  g_on.store(seconds > 0);
  g_what.clear();
  g_rank = rank;
  if (seconds > 0 && !g_thread.joinable()) {
    g_stop = false;
    g_thread = std::thread(watch);
  }
}

void stop_watchdog() {
  {
    std::lock_guard lock(g_mu);
    g_stop = true;
    g_timeout = 0;
    g_on.store(false);
  }
  g_cv.notify_all();
  if (g_thread.joinable()) g_thread.join();
}

}  // namespace loom::dist::detail
