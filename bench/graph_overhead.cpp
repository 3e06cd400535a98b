// Layer-graph overhead: the same MLP (784-512-512-10, batch 128, forward + backward) run as a
// compiled layer graph and as hand-written tensor ops with the same weights. Prints JSON lines
// and the ratio graph_time / ops_time (goal: within 1.02).
#include <loom/loom.h>

#include "timing.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace loom;

namespace {


}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  set_num_threads(threads);
  manual_seed(0);
  nn::Input x(784, Float32, "x");
  nn::Linear l1(x, 512);
  nn::Activation a1(l1, nn::relu);
  nn::Linear l2(a1, 512);
  nn::Activation a2(l2, nn::relu);
  nn::Linear l3(a2, 10);
  Plan plan = Graph::build({l3}, {x}).compile();

  Tensor input = uniform({128, 784});
  auto w = [](const nn::Layer& l, const char* p) { return l.state().param(p); };
  const std::vector<Tensor> params{w(l1, "weights"), w(l1, "bias"), w(l2, "weights"), w(l2, "bias"), w(l3, "weights"), w(l3, "bias")};
  auto clear = [&] {
    for (Tensor p : params) p.zero_grad();
  };

  const double graph = bench::measure([&] {
    sum(plan(input)).backward();
    clear();
  }).median;
  const double ops = bench::measure([&] {
    Tensor h = relu(matmul(input, params[0]) + params[1]);
    h = relu(matmul(h, params[2]) + params[3]);
    sum(matmul(h, params[4]) + params[5]).backward();
    clear();
  }).median;
  std::printf("{\"name\":\"mlp_graph_fwd_bwd\",\"threads\":%d,\"seconds\":%.9f}\n", threads, graph);
  std::printf("{\"name\":\"mlp_ops_fwd_bwd\",\"threads\":%d,\"seconds\":%.9f}\n", threads, ops);
  std::printf("# layer graph / hand-written ops = %.4f\n", graph / ops);
  return 0;
}
