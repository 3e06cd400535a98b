#include "loom/core/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>

#include "loom/core/error.h"

namespace loom {

namespace {

thread_local bool tls_in_parallel = false;

// How long an idle worker (or the caller waiting for its workers) polls before sleeping.
constexpr std::chrono::microseconds kPoll{100};
// How long an idle worker then keeps looking for a job between yields of its core before it
// sleeps. A step's jobs can be milliseconds apart (the caller's serial work between them); a
// worker asleep by then was woken for the next job only once the scheduler gave it a core back,
// which on a machine with other work took longer than the job (docs/benchmarks.md, "The second
// thread"). Yielding keeps it awake without taking the core from anything else that wants it.
constexpr std::chrono::milliseconds kYieldingPoll{10};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int default_thread_count() {
  if (const char* env = std::getenv("LOOM_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// Workers poll for a new job for a short while after finishing one (back-to-back ops then find
// them awake: waking a sleeping thread costs tens of microseconds on a VM, as long as a whole
// 1e6-element add), then poll between yields of the core for longer, then block on a condition
// variable, so an idle pool uses no CPU. The calling thread takes chunks too, and jobs are cut
// into several chunks per thread so that a late worker delays nobody.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) { resize(threads); }
  ~ThreadPool() { stop_workers(); }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void resize(int threads) {
    std::lock_guard<std::mutex> job(job_mu_);
    stop_workers();
    stopping_ = false;
    // New workers start at the current generation: the last job is finished, not theirs to
    // take (job_mu_ keeps generation_ still while they start).
    const uint64_t current = generation_.load();
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, current] { worker_loop(current); });
  }

  // Around fork() (pool() below): no job runs and no worker holds mu_ while the process is copied.
  void lock_for_fork() {
    job_mu_.lock();
    mu_.lock();
  }
  void unlock_after_fork() {
    mu_.unlock();
    job_mu_.unlock();
  }

  // Returns false when another thread owns the pool (the caller then runs inline).
  bool run(int64_t begin, int64_t end, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn) {
    std::unique_lock<std::mutex> job(job_mu_, std::try_to_lock);
    if (!job.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn;
      begin_ = begin;
      end_ = end;
      chunk_ = chunk;
      next_.store(begin);
      error_ = nullptr;
      active_.store(static_cast<int>(workers_.size()));
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_work_.notify_all();
    work();
    const auto deadline = std::chrono::steady_clock::now() + kPoll;
    for (int i = 1; active_.load(std::memory_order_acquire) != 0; ++i) {
      cpu_relax();
      if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) break;
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, [this] { return active_.load() == 0; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  void work() {
    tls_in_parallel = true;
    for (;;) {
      const int64_t b = next_.fetch_add(chunk_);
      if (b >= end_) break;
      try {
        (*fn_)(b, std::min(end_, b + chunk_));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
    tls_in_parallel = false;
  }

  void worker_loop(uint64_t seen) {
    for (;;) {
      const auto deadline = std::chrono::steady_clock::now() + kPoll;
      for (int i = 1; generation_.load(std::memory_order_acquire) == seen && !stopping_.load(); ++i) {
        cpu_relax();
        if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) break;
      }
      const auto yielding = std::chrono::steady_clock::now() + kYieldingPoll;
      while (generation_.load(std::memory_order_acquire) == seen && !stopping_.load() && std::chrono::steady_clock::now() < yielding)
        sched_yield();
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_work_.wait(lock, [&] { return stopping_.load() || generation_.load() != seen; });
        if (stopping_.load()) return;
        seen = generation_.load();
      }
      work();
      if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);
        cv_done_.notify_one();
      }
    }
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_work_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  std::mutex job_mu_;  // one job at a time
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t begin_ = 0, end_ = 0, chunk_ = 1;
  std::atomic<int64_t> next_{0};
  std::exception_ptr error_;
  std::atomic<int> active_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stopping_{false};
};

// The pool, made at first use and leaked (it outlives static tensors). A process forked while it
// exists (os.fork in Python, fork() in C++) inherits the pool's memory but none of its worker
// threads: a job there would wait forever for workers that do not exist. So fork is bracketed
// (pthread_atfork): before it, the forking thread takes the pool's locks, which waits for a job
// running on another thread to end and keeps the workers from holding the pool's mutex at the
// instant of the copy; after it, the parent lets go, and the child drops the copied pool (leaked
// again: its std::thread objects name threads the child lacks, and its condition variables may
// count their waiters) and makes a new one of the same size at its next parallel job.
std::mutex g_pool_mu;                      // making or dropping the pool
std::atomic<ThreadPool*> g_pool{nullptr};  // read without the lock on every parallel_for
int g_child_threads = 0;                   // the forked child's pool size (0: the default)

void before_fork() {
  g_pool_mu.lock();
  if (ThreadPool* p = g_pool.load()) p->lock_for_fork();
}

void after_fork_in_parent() {
  if (ThreadPool* p = g_pool.load()) p->unlock_after_fork();
  g_pool_mu.unlock();
}

void after_fork_in_child() {
  // Only async-signal-safe work here (no allocation, no thread): the new pool is made lazily.
  if (ThreadPool* p = g_pool.load()) g_child_threads = p->size();
  g_pool.store(nullptr);
  g_pool_mu.unlock();  // this thread took it before the fork, and is the child's one thread
}

ThreadPool& pool() {
  if (ThreadPool* p = g_pool.load(std::memory_order_acquire)) return *p;
  std::lock_guard<std::mutex> lock(g_pool_mu);
  ThreadPool* p = g_pool.load();
  if (!p) {
    // once per process (a forked child inherits the handlers); it fails only when out of memory
    static const bool registered = pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child) == 0;
    (void)registered;
    p = new ThreadPool(g_child_threads > 0 ? g_child_threads : default_thread_count());
    g_pool.store(p, std::memory_order_release);
  }
  return *p;
}

}  // namespace

namespace {
std::atomic<bool> g_count_chosen{false};  // set_num_threads was called
}  // namespace

void set_num_threads(int n) {
  if (n < 1) throw ValueError("set_num_threads: got " + std::to_string(n) + " (valid: 1 or more)");
  g_count_chosen.store(true);
  if (n != pool().size()) pool().resize(n);
}

void share_cores(int processes) {
  if (processes < 1) throw ValueError("share_cores: got " + std::to_string(processes) + " processes (valid: 1 or more)");
  if (g_count_chosen.load() || std::getenv("LOOM_NUM_THREADS")) return;
  const int n = std::max(1, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) / processes);
  if (n != pool().size()) pool().resize(n);
}

int get_num_threads() { return pool().size(); }

bool in_parallel_region() { return tls_in_parallel; }

void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int threads = tls_in_parallel ? 1 : pool().size();
  if (threads == 1 || n <= grain) {
    fn(begin, end);
    return;
  }
  const int64_t chunks = std::min<int64_t>(4 * threads, (n + grain - 1) / grain);
  const int64_t chunk = (n + chunks - 1) / chunks;
  if (!pool().run(begin, end, chunk, fn)) fn(begin, end);
}

}  // namespace loom
