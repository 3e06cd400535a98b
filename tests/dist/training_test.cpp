// Data-parallel training pieces: sharded loading, gradient averaging in buckets, rank 0's
// weights and optimizer state on every rank, and the equivalence of N processes with batch B/N
// to one process with batch B (docs/distributed.md). Run at 1, 2 and 3 processes by ctest.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "loom/dist/optimizer.h"
#include "loom/loom.h"

namespace loom {
namespace {

// Gradient element i of parameter k on rank r: small integers, so means compare exactly.
Tensor grad_of(const Tensor& p, int k, int r) {
  std::vector<double> v(static_cast<size_t>(p.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((static_cast<int>(i) * 3 + k * 5 + r * 7) % 11 - 5);
  return from_vector(v, p.shape()).astype(p.dtype());
}

void set_grad(const Tensor& p, const Tensor& g) { p.impl()->grad = g.impl(); }

// Every rank holds the same values as rank 0, bit for bit.
void expect_same_on_every_rank(const Tensor& t, const std::string& what) {
  const Tensor all = dist::allgather(t.expand_dims(0)).astype(Float64);
  for (int r = 1; r < dist::size(); ++r)
    ASSERT_EQ(all[r].to_vector<double>(), all[0].to_vector<double>()) << what << ": rank " << r << " differs from rank 0";
}

TEST(DistShard, IsThisRanksShare) {
  const data::Shard s = dist::shard();
  EXPECT_EQ(s.index, dist::rank());
  EXPECT_EQ(s.count, dist::size());
  EXPECT_FALSE(s.drop_tail);
  EXPECT_TRUE(dist::shard(true).drop_tail);
}

TEST(DistributedOptimizer, RejectsBadOptions) {
  EXPECT_THROW(dist::DistributedOptimizer(nullptr), ValueError);
  auto sgd = std::make_shared<train::SGD>(std::vector<Tensor>{zeros({2}).requires_grad_()});
  EXPECT_THROW(dist::DistributedOptimizer(sgd, {.bucket_bytes = 0}), ValueError);
}

TEST(DistributedOptimizer, AveragesGradientsInBuckets) {
  const int size = dist::size(), rank = dist::rank();
  // float32 (3, 4), float64 (5,), float32 (7,) with a strided gradient, an empty one, one
  // without a gradient anywhere, one with a gradient on rank 0 only
  std::vector<Tensor> params = {zeros({3, 4}), zeros({5}, Float64), zeros({7}), zeros({0}), zeros({2}), zeros({6})};
  for (Tensor& p : params) p.requires_grad_();
  struct Case {
    int64_t bucket_bytes;
    int64_t buckets;
  };
  // 1 byte: one bucket per gradient (5); 1 MiB: runs of one dtype (f32 | f64 | f32 f32 f32)
  for (Case c : {Case{1, 5}, Case{1 << 20, 3}}) {
    auto sgd = std::make_shared<train::SGD>(params, train::SGDOptions{.lr = 1.0});
    dist::DistributedOptimizer opt(sgd, {.bucket_bytes = c.bucket_bytes});
    opt.zero_grad();
    for (int k : {0, 1, 3}) set_grad(params[static_cast<size_t>(k)], grad_of(params[static_cast<size_t>(k)], k, rank));
    Tensor wide = zeros({14});  // a strided gradient: every other element of a wider tensor
    Tensor strided = wide.index({Slice(None, None, 2)});
    strided.copy_(grad_of(params[2], 2, rank));
    ASSERT_FALSE(strided.is_contiguous());
    set_grad(params[2], strided);
    if (rank == 0) set_grad(params[5], grad_of(params[5], 5, 0));
    opt.average_gradients();
    EXPECT_EQ(opt.last_bucket_count(), c.buckets);
    for (int k : {0, 1, 2, 3, 5}) {
      const Tensor& p = params[static_cast<size_t>(k)];
      ASSERT_TRUE(p.grad().defined()) << "parameter " << k;
      std::vector<double> want(static_cast<size_t>(p.numel()), 0.0);
      for (int r = 0; r < size; ++r) {
        if (k == 5 && r > 0) continue;  // no gradient there: zeros
        const auto g = grad_of(p, k, r).astype(Float64).to_vector<double>();
        for (size_t i = 0; i < want.size(); ++i) want[i] += g[i];
      }
      const Tensor expected = from_vector(want, p.shape()).astype(p.dtype()) / static_cast<double>(size);
      EXPECT_EQ(p.grad().astype(Float64).to_vector<double>(), expected.astype(p.dtype()).astype(Float64).to_vector<double>())
          << "parameter " << k << " bucket_bytes " << c.bucket_bytes;
    }
    EXPECT_FALSE(params[4].grad().defined());
  }
}

// An Adam that has taken `steps` steps from weights drawn with `seed`, with rank r's gradients.
std::pair<std::vector<Tensor>, std::shared_ptr<train::Adam>> adam_run(uint64_t seed, int steps, int r) {
  Generator g(seed);
  std::vector<Tensor> params = {normal({4, 3}, 0, 1, Float32, default_device(), &g), normal({5}, 0, 1, Float64, default_device(), &g)};
  for (Tensor& p : params) p.requires_grad_();
  auto adam = std::make_shared<train::Adam>(params, train::AdamOptions{.lr = 0.1, .weight_decay = 0.01});
  for (int s = 0; s < steps; ++s) {
    adam->zero_grad();
    for (size_t k = 0; k < params.size(); ++k) set_grad(params[k], grad_of(params[k], static_cast<int>(k) + s, r));
    adam->step();
  }
  return {params, adam};
}

TEST(DistributedOptimizer, BroadcastStateGivesRank0sParametersAndState) {
  // rank 0 has trained 3 steps; the others start elsewhere (another seed, 1 step or none)
  const int rank = dist::rank();
  auto [params, adam] = rank == 0 ? adam_run(11, 3, 0) : adam_run(100 + rank, rank % 2, rank);
  auto [want_params, want_adam] = adam_run(11, 3, 0);  // what rank 0 holds, computed here
  adam->set_lr(rank == 0 ? 0.1 : 0.5);
  dist::DistributedOptimizer opt(adam);
  opt.broadcast_state();
  for (size_t k = 0; k < params.size(); ++k)
    EXPECT_EQ(params[k].astype(Float64).to_vector<double>(), want_params[k].astype(Float64).to_vector<double>());
  const train::OptimizerState got = adam->state_dict(), want = want_adam->state_dict();
  EXPECT_EQ(got.counters, want.counters);
  EXPECT_EQ(got.scalars, want.scalars);
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (const auto& [key, t] : want.tensors) {
    ASSERT_TRUE(got.tensors.count(key)) << key;
    EXPECT_EQ(got.tensors.at(key).dtype(), t.dtype()) << key;
    EXPECT_EQ(got.tensors.at(key).astype(Float64).to_vector<double>(), t.astype(Float64).to_vector<double>()) << key;
  }
  // and the next step is the same everywhere: training resumes as rank 0 would have
  opt.zero_grad();
  for (size_t k = 0; k < params.size(); ++k) set_grad(params[k], grad_of(params[k], 9, 0));
  opt.step();
  for (const Tensor& p : params) expect_same_on_every_rank(p.detach(), "parameter after the next step");
}

struct Mlp {
  nn::Input x{8, Float32, "x"};
  nn::Linear h{x, 16, {}, "h"};
  nn::Activation a{h, nn::relu, "a"};
  nn::Linear out{a, 3, {}, "out"};
  Graph graph = Graph::build({out}, {x});
  std::vector<Tensor> params() const { return train::parameters({h, out}); }
};

TEST(DistBroadcastGraph, WeightsAndBuffersOfRank0) {
  manual_seed(1000 + dist::rank());  // different initial weights on every rank
  nn::Input x(Shape{-1, 3, 6, 6}, Float32, "x");
  nn::Conv2D c(x, 4, {3, 3}, {}, "c");
  nn::BatchNorm bn(c, {}, "bn");
  Graph g = Graph::build({bn}, {x});
  io::graph_state(g).at("bn/running_mean").fill_(static_cast<double>(dist::rank()));
  manual_seed(1000);  // rank 0's
  nn::Input x0(Shape{-1, 3, 6, 6}, Float32, "x");
  nn::Conv2D c0(x0, 4, {3, 3}, {}, "c");
  nn::BatchNorm bn0(c0, {}, "bn");
  const io::TensorMap want = io::graph_state(Graph::build({bn0}, {x0}));
  dist::broadcast_graph(g);
  for (const auto& [name, t] : io::graph_state(g)) {
    const Tensor expected = name == "bn/running_mean" ? zeros_like(t) : want.at(name);
    EXPECT_EQ(t.astype(Float64).to_vector<double>(), expected.astype(Float64).to_vector<double>()) << name;
  }
  if (dist::size() < 2) return;
  // a rank with another model: named, on every rank
  manual_seed(1);
  Mlp mlp;
  nn::Input y(8, Float32, "x");
  nn::Linear z(y, 2, {}, "z");
  const Graph other = dist::rank() == dist::size() - 1 ? Graph::build({z}, {y}) : mlp.graph;
  EXPECT_THROW(dist::broadcast_graph(other), ValueError);
}

// The MLP trained 20 steps (5 epochs of 4 batches of 12 examples) by one process with batch 12
// and by size() processes with batch 12 / size() each: the same parameters within the
// documented tolerance (docs/distributed.md), bitwise the same on every rank and in a repeated run.
TEST(DistEquivalence, MlpNProcessesEqualOneProcess) {
  const int size = dist::size();
  ASSERT_EQ(12 % size, 0) << "run with 1, 2, 3, 4, 6 or 12 processes";
  Generator g(42);
  Tensor labels = randint(0, 3, {48}, Int64, default_device(), &g);
  Tensor x = normal({48, 8}, 0, 1, Float32, default_device(), &g) + labels.astype(Float32).expand_dims(1) * 0.5;
  auto ds = std::make_shared<data::TensorDataset>(std::vector<Tensor>{x, labels});

  auto train = [&](int64_t batch, data::Shard shard, bool distributed) {
    manual_seed(7);  // the same initial weights (broadcast_graph would make them so anyway)
    Mlp mlp;
    auto sgd = std::make_shared<train::SGD>(mlp.params(), train::SGDOptions{.lr = 0.1, .momentum = 0.9});
    dist::DistributedOptimizer opt(sgd);
    if (distributed) {
      dist::broadcast_graph(mlp.graph);
      opt.broadcast_state();
    }
    data::DataLoader loader(ds, {.batch_size = batch, .shuffle = true, .seed = 3, .shard = shard});
    const Plan net = mlp.graph.compile();
    int steps = 0;
    while (steps < 20) {
      for (const data::Batch& b : loader) {
        opt.zero_grad();
        cross_entropy(net(b[0]), b[1]).backward();
        if (distributed) opt.step();
        else sgd->step();
        ++steps;
      }
    }
    EXPECT_EQ(steps, 20);
    std::vector<Tensor> out;
    for (const Tensor& p : mlp.params()) out.push_back(p.detach());
    return out;
  };
  const std::vector<Tensor> one = train(12, {}, false);
  const std::vector<Tensor> many = train(12 / size, dist::shard(), true);
  const std::vector<Tensor> again = train(12 / size, dist::shard(), true);  // repeats bit for bit
  ASSERT_EQ(one.size(), many.size());
  for (size_t k = 0; k < many.size(); ++k)
    EXPECT_EQ(again[k].to_vector<float>(), many[k].to_vector<float>()) << "parameter " << k << " in a repeated run";
  double worst = 0;
  for (size_t k = 0; k < one.size(); ++k) {
    expect_same_on_every_rank(many[k], "parameter " + std::to_string(k));
    const auto a = one[k].to_vector<float>(), b = many[k].to_vector<float>();
    for (size_t i = 0; i < a.size(); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) / (1e-3 + std::abs(static_cast<double>(a[i]))));
      EXPECT_NEAR(b[i], a[i], 1e-5 + 1e-4 * std::abs(a[i])) << "parameter " << k << " element " << i;
    }
  }
  if (dist::rank() == 0) std::printf("MLP, %d processes vs 1 after 20 steps: worst relative difference %.3g\n", size, worst);
}

}  // namespace
}  // namespace loom
