// A data-parallel fit in which rank 1 fails at step 3 in a way fit cannot coordinate: it dies
// (SIGKILL, a non-zero or zero exit without MPI_Finalize), hangs, or ("leave") throws, which fit
// does coordinate, and then returns from main while rank 0 waits for it in a collective. tests/dist_fault/run_fault.cmake runs it under
// mpirun and checks that the job ends within a bound, with a non-zero status and a message
// naming the rank (docs/distributed.md, "Faults").
//
//   loom_dist_fault MODE [COLLECTIVE_TIMEOUT_SECONDS]
//   MODE: kill | exit | exit0 | hang | leave
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "loom/dist/optimizer.h"
#include "loom/loom.h"

using namespace loom;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s kill|exit|exit0|hang|leave [collective_timeout_seconds]\n", argv[0]);
    return 64;
  }
  const std::string mode = argv[1];
  const double timeout = argc > 2 ? std::atof(argv[2]) : 0.0;
  dist::Context ctx;
  Generator gen(1);
  auto ds = std::make_shared<data::TensorDataset>(
      std::vector<Tensor>{normal({64, 8}, 0, 1, Float32, default_device(), &gen), randint(0, 3, {64}, Int64, default_device(), &gen)});
  nn::Input x(8, Float32, "x");
  nn::Linear out(x, 3, {}, "out");
  Graph g = Graph::build({out}, {x});
  train::Model model(g, [](const Tensor& y, const Tensor& t) { return train::cross_entropy(y, t); },
                     std::make_shared<train::SGD>(train::parameters({out}), train::SGDOptions{.lr = 0.1}));
  data::DataLoader loader(ds, {.batch_size = 4});
  auto fault = std::make_shared<train::LambdaCallback>();
  fault->batch_end = [&](train::Model&, int64_t step, const train::Logs&) {
    if (ctx.rank() != 1 || step != 3) return;
    std::fprintf(stderr, "rank 1: failing at step 3 (%s)\n", mode.c_str());
    std::fflush(stderr);
    if (mode == "kill") std::raise(SIGKILL);
    if (mode == "exit") std::_Exit(3);
    if (mode == "exit0") std::_Exit(0);
    if (mode == "hang") std::this_thread::sleep_for(std::chrono::hours(1));
    if (mode == "leave") throw IOError("rank 1 leaves fit after step 3");
  };
  try {
    model.fit(loader, {.epochs = 1000, .callbacks = {fault}, .progress = false,
                       .distributed = dist::data_parallel({.collective_timeout = timeout})});
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: fit threw: %s\n", ctx.rank(), e.what());
    // "leave": fit made every rank throw; then rank 0 waits for the others in a collective
    // (a program that goes on after the failure) while rank 1 returns from main, which
    // finalizes MPI: only the collective timeout ends rank 0's wait.
    if (mode == "leave" && ctx.rank() == 0) dist::barrier();
    return 0;
  }
  std::printf("rank %d: fit returned\n", ctx.rank());
  return 0;
}
