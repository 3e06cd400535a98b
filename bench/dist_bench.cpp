// Data-parallel benchmarks (docs/benchmarks.md "Data-parallel"; run by bench/dist_bench.sh).
//
//   dist_bench allreduce [--min-kib 1] [--max-mib 64 | --max-kib K] [--budget 0.4] [--op sum|max]
//     float32 sum (or max) allreduce of 1 KiB .. 64 MiB (powers of 4; --max-kib stops below
//     1 MiB), loom::dist::allreduce against raw MPI_Allreduce(MPI_IN_PLACE, MPI_FLOAT, MPI_SUM
//     or MPI_MAX) on the same buffer, alternating blocks of
//     reps of each (4 blocks each of about budget/4 seconds, 2 to 2000 reps); rank 0 prints one
//     JSON object per size with the median microseconds of one call (each rep timed alone; the
//     slower rank's time, through an MPI_MAX of the per-rep times after the timed loop) and the
//     fastest rep (robust where other processes load the machine: a descheduled rank stalls both).
//
//   dist_bench cnn [--steps 30] [--sync-bn] [--threads N]
//     One training step of train_bench's CNN (zoo::fashion_cnn with widths {32, 64}, hidden 128)
//     on a global batch of 128 synthetic 1x28x28 images (128 / ranks per rank), cross-entropy,
//     Adam(2e-3), Train mode: a hand-written loop with dist::DistributedOptimizer (zero_grad,
//     forward, loss, backward, bucketed gradient average, Adam step, loss.item()). With one
//     process (no mpirun) it is plain single-process training of batch 128. Prints the median
//     step seconds over --steps after 5 warm-up steps, and the gradient bytes per step.
//     --sync-bn synchronizes the batch norms as the main job does in several processes.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include "loom/dist/dist.h"
#include "loom/dist/optimizer.h"
#include "loom/loom.h"

using namespace loom;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string arg(int argc, char** argv, const std::string& key, const std::string& fallback) {
  for (int i = 2; i + 1 < argc; ++i)
    if (argv[i] == key) return argv[i + 1];
  return fallback;
}

bool flag(int argc, char** argv, const std::string& key) {
  for (int i = 2; i < argc; ++i)
    if (argv[i] == key) return true;
  return false;
}

// Per-rep times of `fn`, each the slower rank's (MPI_MAX over ranks after the loop): `reps`
// reps, or with `budget_s` > 0 reps until rank 0 has spent that long (at least `reps`, at most
// `max_reps`; the decision goes out untimed after each rep, so the ranks make the same calls).
std::vector<double> time_reps(int reps, const auto& fn, double budget_s = 0, int max_reps = 0) {
  std::vector<double> t;
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int more = 1; more;) {
    const double a = MPI_Wtime();
    fn();
    t.push_back(MPI_Wtime() - a);
    const int done = static_cast<int>(t.size());
    more = done < reps || (budget_s > 0 && done < max_reps && MPI_Wtime() - start < budget_s);
    if (budget_s > 0) MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
  }
  MPI_Allreduce(MPI_IN_PLACE, t.data(), static_cast<int>(t.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}

int run_allreduce(int argc, char** argv, const dist::Context& ctx) {
  const int64_t min_bytes = std::atoll(arg(argc, argv, "--min-kib", "1").c_str()) << 10;
  const std::string max_kib = arg(argc, argv, "--max-kib", "");
  const int64_t max_bytes = max_kib.empty() ? std::atoll(arg(argc, argv, "--max-mib", "64").c_str()) << 20
                                            : std::atoll(max_kib.c_str()) << 10;
  const double budget = std::atof(arg(argc, argv, "--budget", "0.4").c_str());  // seconds per size and peer
  const bool max = arg(argc, argv, "--op", "sum") == "max";  // loom sends small sums in one call, max in two
  const int p = ctx.size();
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const int64_t n = bytes / 4;
    Tensor t = zeros({n}, Float32);  // sums of zeros stay zeros (no overflow over the reps)
    float* data = t.data<float>();
    auto raw = [&] {
      MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, max ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD);
    };
    auto loom = [&] { dist::allreduce(t, max ? dist::ReduceOp::Max : dist::ReduceOp::Sum); };
    for (int i = 0; i < 3; ++i) raw(), loom();  // warm-up
    std::vector<double> raw_t, loom_t;
    for (int round = 0; round < 4; ++round) {  // alternate, so that load changes hit both alike
      auto a = time_reps(2, raw, budget / 4, 2000);
      auto b = time_reps(2, loom, budget / 4, 2000);
      raw_t.insert(raw_t.end(), a.begin(), a.end());
      loom_t.insert(loom_t.end(), b.begin(), b.end());
    }
    const double r = median(raw_t), l = median(loom_t);
    if (ctx.rank() == 0) {
      const double busbw = static_cast<double>(bytes) / l * 2.0 * (p - 1) / p / 1e9;
      std::printf(
          "{\"bench\": \"allreduce\", \"op\": \"%s\", \"ranks\": %d, \"bytes\": %lld, \"reps\": %zu, \"raw_us\": %.2f, "
          "\"loom_us\": %.2f, \"raw_over_loom\": %.3f, \"loom_busbw_GBps\": %.3f, \"raw_busbw_GBps\": %.3f, "
          "\"raw_min_us\": %.2f, \"loom_min_us\": %.2f}\n",
          max ? "max" : "sum", p, static_cast<long long>(bytes), raw_t.size(), r * 1e6, l * 1e6, r / l, busbw,
          static_cast<double>(bytes) / r * 2.0 * (p - 1) / p / 1e9, *std::min_element(raw_t.begin(), raw_t.end()) * 1e6,
          *std::min_element(loom_t.begin(), loom_t.end()) * 1e6);
      std::fflush(stdout);
    }
  }
  return 0;
}

int run_cnn(int argc, char** argv, const dist::Context& ctx) {
  const int steps = std::atoi(arg(argc, argv, "--steps", "30").c_str());
  const int threads = std::atoi(arg(argc, argv, "--threads", "1").c_str());
  const bool sync_bn = flag(argc, argv, "--sync-bn");
  set_num_threads(threads);
  const int p = ctx.size();
  if (128 % p != 0) {
    std::fprintf(stderr, "dist_bench cnn: the batch of 128 must split evenly over %d processes\n", p);
    return 2;
  }
  const int64_t batch = 128 / p;
  Graph g = zoo::fashion_cnn(10, {.widths = {32, 64}, .hidden = 128}).graph;
  if (sync_bn) nn::sync_batch_norm(g);
  dist::broadcast_graph(g);
  Plan plan = g.compile();
  std::vector<Tensor> params = g.parameters();
  int64_t grad_bytes = 0;
  for (const Tensor& w : params) grad_bytes += w.numel() * static_cast<int64_t>(itemsize(w.dtype()));
  dist::DistributedOptimizer opt(std::make_shared<train::Adam>(params, train::AdamOptions{.lr = 2e-3}));
  Generator gen(static_cast<uint64_t>(2 + ctx.rank()));  // each rank its own part of the batch
  Tensor x = randn({batch, 1, 28, 28}, Float32, default_device(), &gen);
  Tensor y = randint(0, 10, {batch}, Int64, default_device(), &gen);
  nn::ModeScope train(nn::Mode::Train);
  float first = 0, last = 0;
  auto step = [&] {
    opt.zero_grad();
    Tensor loss = cross_entropy(plan(x), y);
    loss.backward();
    opt.step();
    return loss.item<float>();
  };
  for (int i = 0; i < 5; ++i) first = step();
  std::vector<double> t = time_reps(steps, [&] { last = step(); });
  if (ctx.rank() == 0) {
    std::fprintf(stderr, "dist_bench cnn: loss %.4f after warm-up, %.4f at the end\n", first, last);
    std::printf(
        "{\"bench\": \"cnn_step\", \"impl\": \"loom\", \"ranks\": %d, \"threads\": %d, \"per_rank_batch\": %lld, "
        "\"sync_bn\": %s, \"grad_bytes\": %lld, \"buckets\": %lld, \"steps\": %d, \"median_s\": %.5f, \"min_s\": %.5f}\n",
        p, threads, static_cast<long long>(batch), sync_bn ? "true" : "false", static_cast<long long>(grad_bytes),
        static_cast<long long>(opt.last_bucket_count()), steps, median(t), *std::min_element(t.begin(), t.end()));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what != "allreduce" && what != "cnn") {
    std::fprintf(stderr, "usage: dist_bench allreduce|cnn [options] (see bench/dist_bench.cpp)\n");
    return 2;
  }
  dist::Context ctx;
  return what == "allreduce" ? run_allreduce(argc, argv, ctx) : run_cnn(argc, argv, ctx);
}
