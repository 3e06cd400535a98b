// The thread pool: thread count control, results independent of the thread count, and
// exceptions raised inside parallel_for reaching the caller.
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/parallel.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/linalg.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "unit/common/core_test_util.h"

using namespace loom;

namespace {

struct ThreadCountGuard {
  int saved = get_num_threads();
  ~ThreadCountGuard() { set_num_threads(saved); }
};

struct Results {
  std::vector<float> sum_all, sum_rows, sum_cols, mean_cols, max_cols, matmul, batched, elementwise, exp_t, cumsum;
  std::vector<float> rows20, rows20_ta;  // 17 to 31 rows are split in halves (an LSTM step's products)
  std::vector<int64_t> argmax_rows;
  bool operator==(const Results&) const = default;
};

Results compute() {
  Generator g(123);
  Tensor a = uniform({512, 700}, -1, 1, Float32, Device::cpu(), &g);
  Tensor b = uniform({700, 300}, -1, 1, Float32, Device::cpu(), &g);
  Tensor c = uniform({8, 64, 96}, -1, 1, Float32, Device::cpu(), &g);
  Tensor d = uniform({8, 96, 32}, -1, 1, Float32, Device::cpu(), &g);
  Results r;
  r.sum_all = sum(a).to_vector<float>();
  r.sum_rows = sum(a, {1}).to_vector<float>();
  r.sum_cols = sum(a, {0}).to_vector<float>();
  r.mean_cols = mean(a.T(), {1}).to_vector<float>();
  r.max_cols = max(a, {0}).to_vector<float>();
  r.matmul = matmul(a, b).to_vector<float>();
  r.batched = matmul(c, d).to_vector<float>();
  Tensor h = uniform({20, 200}, -1, 1, Float32, Device::cpu(), &g);
  Tensor w = uniform({200, 800}, -1, 1, Float32, Device::cpu(), &g);
  r.rows20 = matmul(h, w).to_vector<float>();
  r.rows20_ta = matmul(h.T().copy().T(), w).to_vector<float>();
  r.elementwise = (a * 2.0f + a.T().T() * a - 0.5f).to_vector<float>();
  r.exp_t = exp(a.T()).to_vector<float>();
  r.cumsum = cumsum(a, 1).to_vector<float>();
  r.argmax_rows = argmax(a, 1).to_vector<int64_t>();
  return r;
}

}  // namespace

TEST(Threads, SetAndGet) {
  ThreadCountGuard guard;
  set_num_threads(1);
  EXPECT_EQ(get_num_threads(), 1);
  set_num_threads(3);
  EXPECT_EQ(get_num_threads(), 3);
  set_num_threads(2);
  EXPECT_EQ(get_num_threads(), 2);
  EXPECT_THROW(set_num_threads(0), ValueError);
  EXPECT_THROW(set_num_threads(-2), ValueError);
  EXPECT_EQ(get_num_threads(), 2);
}

TEST(Threads, ResultsIdenticalForOneAndTwoThreads) {
  ThreadCountGuard guard;
  set_num_threads(1);
  const Results one = compute();
  // 3 threads: GEMMs split their row blocks into one uneven run per thread
  set_num_threads(3);
  EXPECT_TRUE(compute() == one);
  set_num_threads(2);
  const Results two = compute();
  EXPECT_EQ(one.sum_all, two.sum_all);
  EXPECT_EQ(one.sum_rows, two.sum_rows);
  EXPECT_EQ(one.sum_cols, two.sum_cols);
  EXPECT_EQ(one.mean_cols, two.mean_cols);
  EXPECT_EQ(one.max_cols, two.max_cols);
  EXPECT_EQ(one.matmul, two.matmul);
  EXPECT_EQ(one.batched, two.batched);
  EXPECT_EQ(one.rows20, two.rows20);
  EXPECT_EQ(one.rows20_ta, two.rows20_ta);
  EXPECT_EQ(one.elementwise, two.elementwise);
  EXPECT_EQ(one.exp_t, two.exp_t);
  EXPECT_EQ(one.cumsum, two.cumsum);
  EXPECT_EQ(one.argmax_rows, two.argmax_rows);
}

// Every float32 product's bits, over sizes that cross oneDNN's kernel choices (1 row, blocks of
// 8/16, remainders, 17-31 rows, wide and narrow N, K from 1), both operands as stored or
// transposed, a batch, and linear's fused bias: the same for 1, 2 and 3 threads. Run by ctest
// natively and capped to AVX2 (determinism_avx2), where oneDNN's row blocks round differently.
TEST(Threads, MatmulBitsDoNotDependOnTheThreadCount) {
  ThreadCountGuard guard;
  Generator g(7);
  struct Case {
    Tensor a, b, bias;
    std::string what;
  };
  std::vector<Case> cases;
  for (int64_t M : {1, 2, 7, 16, 17, 20, 31, 33, 64, 100, 130})
    for (int64_t N : {1, 10, 64, 129, 300, 800})
      for (int64_t K : {1, 16, 200, 784}) {
        const int which = static_cast<int>((M + N + K) % 4);  // each layout on a quarter of the sizes
        Tensor a = uniform({M, K}, -1, 1, Float32, Device::cpu(), &g);
        Tensor b = uniform({K, N}, -1, 1, Float32, Device::cpu(), &g);
        if (which & 1) a = a.T().copy().T();
        if (which & 2) b = b.T().copy().T();
        cases.push_back({a, b, uniform({N}, -1, 1, Float32, Device::cpu(), &g),
                         std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) + " layout " +
                             std::to_string(which)});
      }
  cases.push_back({uniform({3, 40, 96}, -1, 1, Float32, Device::cpu(), &g),
                   uniform({3, 96, 520}, -1, 1, Float32, Device::cpu(), &g), Tensor(), "batch of 3"});
  // K the longest edge, in parts of K (a weight's gradient): a batch of 2 whose a is stored
  // transposed, and one with a bias whose parts do not divide K evenly
  cases.push_back({swapaxes(uniform({2, 1100, 64}, -1, 1, Float32, Device::cpu(), &g), 1, 2),
                   uniform({2, 1100, 96}, -1, 1, Float32, Device::cpu(), &g), Tensor(), "batch of 2, K parts"});
  cases.push_back({uniform({150, 1100}, -1, 1, Float32, Device::cpu(), &g), uniform({1100, 90}, -1, 1, Float32, Device::cpu(), &g),
                   uniform({90}, -1, 1, Float32, Device::cpu(), &g), "150x90x1100, K parts"});
  const auto run = [&](int threads) {
    set_num_threads(threads);
    std::vector<std::vector<float>> r;
    for (const Case& c : cases) {
      r.push_back(matmul(c.a, c.b).to_vector<float>());
      if (c.bias.defined()) r.push_back(linear(c.a, c.b, c.bias).to_vector<float>());
    }
    return r;
  };
  const auto one = run(1);
  for (int threads : {2, 3}) {
    const auto many = run(threads);
    ASSERT_EQ(one.size(), many.size());
    for (size_t i = 0, c = 0; i < one.size(); ++c) {
      EXPECT_EQ(one[i], many[i]) << cases[c].what << ", matmul, " << threads << " threads";
      ++i;
      if (cases[c].bias.defined()) {
        EXPECT_EQ(one[i], many[i]) << cases[c].what << ", linear, " << threads << " threads";
        ++i;
      }
    }
  }
}

TEST(Threads, ParallelForCoversTheRangeOnce) {
  ThreadCountGuard guard;
  set_num_threads(2);
  std::vector<std::atomic<int>> hits(10007);
  std::mutex mu;
  std::set<std::thread::id> workers;
  parallel_for(0, 10007, 100, [&](int64_t b, int64_t e) {
    EXPECT_LT(b, e);
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    std::lock_guard<std::mutex> lock(mu);
    workers.insert(std::this_thread::get_id());
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  EXPECT_LE(workers.size(), 2u);
  // empty and reversed ranges do nothing
  bool called = false;
  parallel_for(5, 5, 1, [&](int64_t, int64_t) { called = true; });
  parallel_for(5, 2, 1, [&](int64_t, int64_t) { called = true; });
  EXPECT_FALSE(called);
  // small ranges run inline as one chunk
  int chunks = 0;
  parallel_for(0, 10, 100, [&](int64_t b, int64_t e) {
    ++chunks;
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
  });
  EXPECT_EQ(chunks, 1);
}

TEST(Threads, ParallelForPropagatesExceptions) {
  ThreadCountGuard guard;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    EXPECT_THROW(parallel_for(0, 100000, 10,
                              [](int64_t b, int64_t e) {
                                if (b <= 77777 && 77777 < e) throw ValueError("chunk failed");
                              }),
                 ValueError);
    try {
      parallel_for(0, 1000, 1, [](int64_t, int64_t) { throw std::runtime_error("boom"); });
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "boom");
    }
    // the pool still works afterwards
    std::atomic<int64_t> total{0};
    parallel_for(0, 1000, 10, [&](int64_t b, int64_t e) { total += e - b; });
    EXPECT_EQ(total.load(), 1000);
  }
}

TEST(Threads, NestedParallelForRunsInline) {
  ThreadCountGuard guard;
  set_num_threads(2);
  std::atomic<int64_t> total{0};
  parallel_for(0, 4, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      parallel_for(0, 1000, 10, [&](int64_t ib, int64_t ie) { total += ie - ib; });
  });
  EXPECT_EQ(total.load(), 4000);
}

TEST(Threads, ConcurrentCallersGetCorrectResults) {
  ThreadCountGuard guard;
  set_num_threads(2);
  Tensor a = ones({300, 300});
  std::vector<double> sums(4);
  std::vector<std::thread> ts;
  for (size_t k = 0; k < 4; ++k)
    ts.emplace_back([&, k] { sums[k] = sum(matmul(a, a)).item<double>(); });
  for (auto& t : ts) t.join();
  for (double s : sums) EXPECT_EQ(s, 300.0 * 300.0 * 300.0);
}

// Workers created by set_num_threads must start at the pool's current job generation: a worker
// that took the last finished job for a new one decremented the pending count of the next real
// job, so parallel_for could return while that worker still ran one of its chunks (and the
// count could go wrong for later jobs). Each round checks that every chunk ran once and that
// none ran after parallel_for returned.
TEST(Threads, ResizingBetweenJobsNeverLetsAJobReturnEarly) {
  ThreadCountGuard guard;
  std::atomic<int> late{0};
  for (int round = 0; round < 1000; ++round) {
    set_num_threads(1);
    set_num_threads(2);
    // sweep the moment of the first job against the new worker's start-up
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < std::chrono::microseconds(round % 64)) {
    }
    for (int job = 0; job < 4; ++job) {
      std::atomic<bool> returned{false};
      std::atomic<int> done{0};
      parallel_for(0, 64, 1, [&](int64_t b, int64_t e) {
        for (int spin = 0; spin < 200; ++spin) std::atomic_signal_fence(std::memory_order_seq_cst);
        if (returned.load()) late++;
        done += static_cast<int>(e - b);
      });
      returned = true;
      ASSERT_EQ(done.load(), 64) << "round " << round << ", job " << job;
      // a chunk still running after the return would report itself here
      for (int spin = 0; spin < 2000; ++spin) std::atomic_signal_fence(std::memory_order_seq_cst);
      ASSERT_EQ(late.load(), 0) << "round " << round << ", job " << job;
    }
  }
}
