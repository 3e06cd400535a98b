// The thread pool across fork() (core/parallel.h): a child forked after the parent's pool has run
// a job has none of the parent's worker threads, and must still run parallel jobs.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdint>

#include "loom/core/parallel.h"

using namespace loom;

namespace {

// The sum of 0..n-1 over the pool, and how many distinct chunks ran (more than one: split).
int64_t pooled_sum(int64_t n, int* chunks) {
  std::atomic<int64_t> sum{0};
  std::atomic<int> count{0};
  parallel_for(0, n, 1024, [&](int64_t b, int64_t e) {
    int64_t s = 0;
    for (int64_t i = b; i < e; ++i) s += i;
    sum += s;
    ++count;
  });
  if (chunks) *chunks = count.load();
  return sum.load();
}

}  // namespace

TEST(ParallelFork, ChildRunsParallelJobsAfterTheParentsPoolRan) {
  set_num_threads(2);
  constexpr int64_t n = 1 << 20;
  constexpr int64_t expected = n * (n - 1) / 2;
  int chunks = 0;
  ASSERT_EQ(pooled_sum(n, &chunks), expected);
  ASSERT_GT(chunks, 1);  // the job was split over the pool, whose workers then exist

  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child: a hang (the bug: a job waiting on the parent's workers) ends by SIGALRM.
    alarm(30);
    int child_chunks = 0;
    bool ok = pooled_sum(n, &child_chunks) == expected && child_chunks > 1 && get_num_threads() == 2;
    ok = ok && pooled_sum(n, nullptr) == expected;  // and again, on the child's new workers
    _exit(ok ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0)
                                 << " (SIGALRM=" << SIGALRM << ": it hung in a parallel job)";
  if (WIFEXITED(status)) EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's parallel sum was wrong";
  // The parent's pool is untouched by the fork.
  EXPECT_EQ(pooled_sum(n, nullptr), expected);
  EXPECT_EQ(get_num_threads(), 2);
}
