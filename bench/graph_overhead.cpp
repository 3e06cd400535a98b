// Layer-graph overhead: the same MLP (784-512-512-10, batch 128, forward + backward) run as a
// compiled layer graph and as hand-written tensor ops with the same weights. Prints JSON lines
// and the ratio graph_time / ops_time (goal: within 1.02). Then the per-call overhead of a tiny
// graph (forward only, batch 1): the compiled plan, l() (which runs a plan cached in l), and the
// recursive walk l() did before it ran on plans, as a reference.
#include <loom/loom.h>

#include "timing.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <vector>

using namespace loom;

namespace {

// Layer::operator()() before it ran on a cached Plan: a recursive walk with a memo per call.
Tensor walk(const nn::Layer& root) {
  std::unordered_map<const nn::LayerImpl*, Tensor> memo;
  auto eval = [&](auto&& self, const nn::Layer& handle) -> Tensor {
    const nn::Layer l = handle.node();
    if (auto it = memo.find(l.impl().get()); it != memo.end()) return it->second;
    std::vector<Tensor> in;
    for (const nn::Layer& i : l.inputs()) in.push_back(self(self, i));
    return memo[l.impl().get()] = l.impl()->compute(in, nn::current_mode());
  };
  return eval(eval, root);
}

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

  nn::Input tx(16, Float32, "tx");
  nn::Linear t1(tx, 16);
  nn::Activation ta(t1, nn::relu);
  nn::Linear t2(ta, 16);
  nn::Activation tb(t2, nn::tanh);
  const Tensor small = uniform({1, 16});
  tx.set_value(small);
  Plan tiny = Graph::build({tb}, {tx}).compile();
  NoGrad no_grad;
  const double planned = bench::measure([&] { (void)tiny(small); }).median;
  const double called = bench::measure([&] { (void)tb(); }).median;
  const double walked = bench::measure([&] { (void)walk(tb); }).median;
  std::printf("{\"name\":\"tiny_plan_fwd\",\"threads\":%d,\"seconds\":%.9f}\n", threads, planned);
  std::printf("{\"name\":\"tiny_layer_call_fwd\",\"threads\":%d,\"seconds\":%.9f}\n", threads, called);
  std::printf("{\"name\":\"tiny_recursive_walk_fwd\",\"threads\":%d,\"seconds\":%.9f}\n", threads, walked);
  return 0;
}
