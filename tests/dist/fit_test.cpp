// Model::fit data-parallel (FitOptions::distributed = dist::data_parallel()) and synchronized
// batch norm: N processes with batch B/N give the parameters of one process with batch B
// (docs/distributed.md), identical on every rank; logs averaged; rank-0-only callbacks; bad
// launches named. Run at 1, 2 and 3 processes by ctest.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "dist/dist_test_util.h"
#include "loom/dist/optimizer.h"
#include "loom/loom.h"
#include "loom/nn/replicas.h"

namespace loom {
namespace {

using dist_test::compare_state;
using dist_test::expect_same_everywhere;
using dist_test::mlp_data;
using dist_test::mlp_graph;
using dist_test::sgd_model;
using dist_test::cnn_graph;

// The MLP fitted for 5 epochs of 4 steps (global batch 12) by one process and by size()
// processes with batch 12 / size() each, through fit's one option: the same parameters within
// the documented tolerance, and the same logs on every rank.
TEST(DistFit, MlpNProcessesEqualOneProcess) {
  const int size = dist::size();
  ASSERT_EQ(12 % size, 0) << "run with 1, 2, 3, 4, 6 or 12 processes";
  auto ds = mlp_data();
  manual_seed(7);
  Graph g1 = mlp_graph();
  train::Model one = sgd_model(g1);
  data::DataLoader l1(ds, {.batch_size = 12, .shuffle = true, .seed = 3});
  const train::History h1 = one.fit(l1, {.epochs = 5, .progress = false});

  manual_seed(7 + static_cast<uint64_t>(dist::rank()));  // different weights: fit broadcasts rank 0's
  if (dist::rank() == 0) manual_seed(7);
  Graph gn = mlp_graph();
  train::Model many = sgd_model(gn);
  data::DataLoader ln(ds, {.batch_size = 12 / size, .shuffle = true, .seed = 3});  // fit shards it
  const train::History hn = many.fit(ln, {.epochs = 5, .progress = false, .distributed = dist::data_parallel()});
  EXPECT_EQ(ln.options().shard.index, dist::rank());
  EXPECT_EQ(ln.options().shard.count, size);
  EXPECT_EQ(many.optimizer().steps(), 20);
  const double worst = compare_state(g1, gn, 1e-5, 1e-4);
  for (const char* key : {"loss", "accuracy"}) {
    ASSERT_EQ(hn.series.at(key).size(), 5u) << key;
    expect_same_everywhere(from_vector(hn.series.at(key), {5}, default_device()), key);
  }
  for (size_t e = 0; e < 5; ++e)  // the epoch's mean loss over the whole batch, as one process's
    EXPECT_NEAR(hn.series.at("loss")[e], h1.series.at("loss")[e], 1e-5) << "epoch " << e;
  if (dist::rank() == 0) std::printf("MLP fit, %d processes vs 1 after 20 steps: worst relative difference %.3g\n", size, worst);
}

struct Counter : train::Callback {
  bool root = false;
  int batches = 0;
  bool root_only() const override { return root; }
  void on_batch_end(train::Model&, int64_t, const train::Logs&) override { ++batches; }
};

// Callbacks that write files run on rank 0 only; a stop asked by one rank stops every rank at
// the same step.
TEST(DistFit, RootOnlyCallbacksAndStopping) {
  auto ds = mlp_data();
  Graph g = mlp_graph();
  train::Model model = sgd_model(g);
  data::DataLoader loader(ds, {.batch_size = 4, .shuffle = true, .seed = 1});
  auto root_cb = std::make_shared<Counter>(), all_cb = std::make_shared<Counter>();
  root_cb->root = true;
  auto stopper = std::make_shared<train::LambdaCallback>();
  stopper->batch_end = [](train::Model& m, int64_t step, const train::Logs&) {
    if (dist::rank() == dist::size() - 1 && step == 2) m.stop_training();
  };
  model.fit(loader, {.epochs = 3, .callbacks = {root_cb, all_cb, stopper}, .progress = false, .distributed = dist::data_parallel()});
  EXPECT_EQ(model.optimizer().steps(), 2);
  EXPECT_EQ(model.epochs_done(), 0);
  EXPECT_EQ(all_cb->batches, 2);
  EXPECT_EQ(root_cb->batches, dist::rank() == 0 ? 2 : 0);
  EXPECT_TRUE(train::ModelCheckpoint("").root_only());
  EXPECT_FALSE(train::EarlyStopping().root_only());
}

// Bad launches: every rank throws the same error instead of waiting.
TEST(DistFit, RanksThatDisagreeAreNamed) {
  if (dist::size() < 2) GTEST_SKIP() << "needs 2 processes";
  auto ds = mlp_data();
  auto expect_named = [&](data::LoaderOptions o, const std::string& part) {
    Graph g = mlp_graph();
    train::Model model = sgd_model(g);
    data::DataLoader loader(ds, o);
    try {
      model.fit(loader, {.progress = false, .distributed = dist::data_parallel()});
      ADD_FAILURE() << "no error for " << part;
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
    EXPECT_EQ(model.optimizer().steps(), 0);
  };
  const bool last = dist::rank() == dist::size() - 1;
  expect_named({.batch_size = last ? 3 : 4}, "the ranks disagree on the batches per epoch: rank 0 has");
  expect_named({.batch_size = 4, .shard = {0, dist::size()}}, "rank 1's training loader is shard 0 of");
  EXPECT_THROW(dist::data_parallel({.bucket_bytes = 0}), ValueError);
  EXPECT_THROW(dist::data_parallel({.collective_timeout = -1}), ValueError);
  EXPECT_THROW(dist::data_parallel({.collective_timeout = std::nan("")}), ValueError);
}

// Models that differ between ranks (a layer more, a layer wider) are named by fit and by
// broadcast_graph on every rank, before any step.
TEST(DistFit, ModelsThatDifferAreNamed) {
  if (dist::size() < 2) GTEST_SKIP() << "needs 2 processes";
  const bool last = dist::rank() == dist::size() - 1;
  const std::string who = "rank " + std::to_string(dist::size() - 1);
  auto graph = [&](int64_t width, bool extra) {
    nn::Input x(8, Float32, "x");
    nn::Linear h(x, width, {}, "h");
    nn::Activation a(h, nn::relu, "a");
    if (!extra) return Graph::build({nn::Linear(a, 3, {}, "out")}, {x});
    nn::Linear h2(a, 8, {}, "h2");
    return Graph::build({nn::Linear(h2, 3, {}, "out")}, {x});
  };
  auto ds = mlp_data();
  struct Case {
    Graph g;
    std::string part;
  };
  for (const Case& c : {Case{graph(16, last), who + " has 'h2/bias', which rank 0 has not"},
                        Case{graph(16, !last), who + " has no 'h2/bias', which rank 0 has"},
                        Case{graph(last ? 17 : 16, false), "tensor 'h/bias'"}}) {
    for (bool through_fit : {false, true}) {
      train::Model model = sgd_model(c.g);
      data::DataLoader loader(ds, {.batch_size = 4});
      try {
        if (through_fit)
          model.fit(loader, {.progress = false, .distributed = dist::data_parallel()});
        else
          dist::broadcast_graph(c.g);
        ADD_FAILURE() << "no error for " << c.part;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(c.part), std::string::npos) << e.what();
      }
      EXPECT_EQ(model.optimizer().steps(), 0);
    }
  }
  Tensor t = full({2}, 1.0);
  dist::allreduce(t);  // still in step
  EXPECT_EQ(t.to_vector<float>(), std::vector<float>(2, static_cast<float>(dist::size())));
}

// A rank that throws in a step (here before its forward, while the others are in a
// synchronized batch norm's collective) stops every rank at that step: it gets its own error,
// the others a DistError naming it; the ranks stay in step for what follows.
TEST(DistFit, ARankThatThrowsStopsEveryRank) {
  if (dist::size() < 2) GTEST_SKIP() << "needs 2 processes";
  Generator gen(5);
  auto ds = std::make_shared<data::TensorDataset>(
      std::vector<Tensor>{normal({24, 2, 6, 6}, 0, 1, Float32, default_device(), &gen), randint(0, 3, {24}, Int64, default_device(), &gen)});
  const int failing = dist::size() - 1;
  for (bool sync : {false, true}) {
    Graph g = cnn_graph(sync);
    train::Model model = sgd_model(g);
    data::DataLoader loader(ds, {.batch_size = 4});
    auto thrower = std::make_shared<train::LambdaCallback>();
    thrower->batch_begin = [&](train::Model&, int64_t step) {
      if (dist::rank() == failing && step == 2) throw IOError("a bad record in batch 2");
    };
    try {
      model.fit(loader, {.epochs = 2, .callbacks = {thrower}, .progress = false, .distributed = dist::data_parallel()});
      ADD_FAILURE() << "fit returned";
    } catch (const dist::DistError& e) {
      EXPECT_NE(dist::rank(), failing);
      const std::string what = e.what();
      EXPECT_NE(what.find("rank " + std::to_string(failing) + " failed"), std::string::npos) << what;
      EXPECT_NE(what.find("a bad record in batch 2"), std::string::npos) << what;
    } catch (const IOError& e) {
      EXPECT_EQ(dist::rank(), failing) << e.what();
    }
    EXPECT_EQ(model.optimizer().steps(), 1) << "sync " << sync;
    Tensor t = full({2}, 1.0);
    dist::allreduce(t);  // still in step
    EXPECT_EQ(t.to_vector<float>(), std::vector<float>(2, static_cast<float>(dist::size())));
  }
}

// A callback that throws in one phase of fit on one rank.
struct Thrower : train::Callback {
  std::string phase;
  int rank = 0;
  bool root = false;
  bool root_only() const override { return root; }
  void fail(const std::string& where) const {
    if (where == phase && dist::rank() == rank) throw IOError("disk full in " + where);
  }
  void on_train_begin(train::Model&) override { fail("train_begin"); }
  void on_epoch_begin(train::Model&, int64_t epoch) override { if (epoch == 1) fail("epoch_begin"); }
  void on_batch_end(train::Model&, int64_t step, const train::Logs&) override { if (step == 2) fail("batch_end"); }
  void on_epoch_end(train::Model&, int64_t, const train::Logs&) override { fail("epoch_end"); }
};

// A metric that throws on one rank at its second update (in training or, as a clone, in the
// validation pass).
struct ThrowingMetric : train::Metric {
  int rank = 0, updates = 0;
  bool in_validation = false, is_clone = false;
  std::string name() const override { return "throwing"; }
  void reset() override {}
  void update(const Tensor&, const Tensor&) override {
    if (dist::rank() == rank && is_clone == in_validation && ++updates == 2) throw IOError("disk full in a metric");
  }
  double result() const override { return 0; }
  std::unique_ptr<train::Metric> clone() const override {
    auto m = std::make_unique<ThrowingMetric>(*this);
    m->is_clone = true;
    m->updates = 0;
    return m;
  }
};

// Whatever a rank throws anywhere in fit's loop (a callback on rank 0 only, the metrics, the
// validation pass), every rank throws at the end of that phase: the failed rank its own
// exception, the others a DistError naming it; afterwards the ranks are still in step.
TEST(DistFit, AThrowAnywhereInTheLoopStopsEveryRank) {
  if (dist::size() < 2) GTEST_SKIP() << "needs 2 processes";
  auto ds = mlp_data();
  const int last = dist::size() - 1;
  struct Case {
    std::string phase;
    int rank;
    bool root_only;
    std::string message;
  };
  const std::vector<Case> cases{{"train_begin", 0, true, "disk full in train_begin"},
                                {"epoch_begin", last, false, "disk full in epoch_begin"},
                                {"batch_end", last, false, "disk full in batch_end"},
                                {"epoch_end", 0, true, "disk full in epoch_end"},
                                {"metric", last, false, "disk full in a metric"},
                                {"validation", last, false, "disk full in a metric"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.phase);
    Graph g = mlp_graph();
    auto thrower = std::make_shared<Thrower>();
    thrower->phase = c.phase;
    thrower->rank = c.rank;
    thrower->root = c.root_only;
    auto metric = std::make_shared<ThrowingMetric>();
    metric->rank = c.phase == "metric" || c.phase == "validation" ? c.rank : -1;
    metric->in_validation = c.phase == "validation";
    auto sgd = std::make_shared<train::SGD>(train::parameters(g.outputs()), train::SGDOptions{.lr = 0.1});
    train::Model model(g, [](const Tensor& y, const Tensor& t) { return train::cross_entropy(y, t); }, sgd, {metric});
    data::DataLoader loader(ds, {.batch_size = 4}), validation(ds, {.batch_size = 8});
    try {
      model.fit(loader, {.epochs = 3, .validation = &validation, .callbacks = {thrower}, .progress = false,
                         .distributed = dist::data_parallel({.collective_timeout = 60})});
      ADD_FAILURE() << "fit returned";
    } catch (const dist::DistError& e) {
      EXPECT_NE(dist::rank(), c.rank);
      const std::string what = e.what();
      EXPECT_NE(what.find("rank " + std::to_string(c.rank) + " failed"), std::string::npos) << what;
      EXPECT_NE(what.find(c.message), std::string::npos) << what;
    } catch (const IOError& e) {
      EXPECT_EQ(dist::rank(), c.rank) << e.what();
    }
    Tensor t = full({2}, 1.0);
    dist::allreduce(t);  // still in step
    EXPECT_EQ(t.to_vector<float>(), std::vector<float>(2, static_cast<float>(dist::size())));
  }
}

// The CNN fitted 20 steps (5 epochs of 4 batches of 12) by one process and by size() processes
// with batch 12 / size() and synchronized batch norm: the same parameters and running
// statistics within the documented tolerance; without synchronization they differ.
TEST(DistSyncBatchNorm, CnnNProcessesEqualOneProcess) {
  const int size = dist::size();
  ASSERT_EQ(12 % size, 0) << "run with 1, 2, 3, 4, 6 or 12 processes";
  auto ds = dist_test::cnn_data();
  auto run = [&](int64_t batch, bool distributed, bool sync) {
    manual_seed(11);
    Graph g = cnn_graph(sync);
    if (sync) EXPECT_EQ(nn::sync_batch_norm(g), 2);  // the second layer by the graph-wide switch
    train::Model m = sgd_model(g);
    data::DataLoader loader(ds, {.batch_size = batch, .shuffle = true, .seed = 3});
    train::FitOptions o{.epochs = 5, .progress = false};
    if (distributed) o.distributed = dist::data_parallel();
    m.fit(loader, o);
    return g;
  };
  const Graph one = run(12, false, false);
  const Graph many = run(12 / size, true, true);
  const double worst = compare_state(one, many, 1e-5, 1e-4);
  if (dist::rank() == 0) std::printf("CNN with synchronized batch norm, %d processes vs 1 after 20 steps: worst relative difference %.3g\n", size, worst);
  if (size < 2) return;
  // the test can fail: batch norm over each rank's part alone trains another model
  const Graph unsynced = run(12 / size, true, false);
  double far = 0;
  for (const auto& [name, t] : io::graph_state(one)) {
    const auto a = t.astype(Float64).to_vector<double>(), b = io::graph_state(unsynced).at(name).astype(Float64).to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) far = std::max(far, std::abs(a[i] - b[i]) / (1e-3 + std::abs(a[i])));
  }
  EXPECT_GT(far, 100 * worst + 1e-3);
  if (dist::rank() == 0) std::printf("  without synchronization: worst relative difference %.3g\n", far);
}

// One synchronized layer's output, running statistics and gradients (of x, weight and bias) on
// this rank's part of a batch are those of an ordinary layer on the whole batch.
TEST(DistSyncBatchNorm, ForwardAndBackwardAreTheWholeBatchs) {
  const int size = dist::size(), rank = dist::rank();
  const int64_t per = 3, n = per * size;
  Generator gen(9);
  const Tensor x_all = normal({n, 4, 3, 2}, 0, 1, Float32, default_device(), &gen) * 3.0 + 2.0;
  const Tensor r_all = normal({n, 4, 3, 2}, 0, 1, Float32, default_device(), &gen);  // the loss: sum(y * r)
  auto layer = [](bool sync) {
    nn::Input in(Shape{-1, 4, 3, 2}, Float32, "x");
    nn::BatchNorm bn(in, {.sync = sync}, "bn");
    Graph g = Graph::build({bn}, {in});
    // weight and bias away from 1 and 0
    for (const auto& [name, t] : io::graph_state(g))
      if (name == "bn/weight" || name == "bn/bias") {
        NoGrad off;
        Tensor w = t;
        w.copy_(arange(0, 4, 1, Float32) * 0.5 + 0.25);
      }
    return g;
  };
  // y and x's gradient (this rank's rows), then by name: the running statistics, and the
  // gradients of weight and bias (summed over the ranks: each holds its rows' share)
  auto run = [&](const Graph& g, const Tensor& x, const Tensor& r, bool part) {
    Tensor xg = x.detach().copy().requires_grad_();
    nn::ModeScope mode(nn::Mode::Train);
    Tensor y = g.compile()(xg);
    sum(y * r).backward();
    auto rows = [&](const Tensor& t) { return part ? t : slice(t, 0, rank * per, (rank + 1) * per); };
    std::vector<std::pair<std::string, Tensor>> out{{"y", rows(y.detach())}, {"x grad", rows(xg.grad())}};
    for (const auto& [name, t] : io::graph_state(g)) {
      const bool learned = name == "bn/weight" || name == "bn/bias";
      Tensor v = learned ? t.grad().copy() : t.copy();
      if (learned && part) dist::allreduce(v, dist::ReduceOp::Sum);
      out.emplace_back(name + (learned ? " grad" : ""), v);
    }
    return out;
  };
  const auto one = run(layer(false), x_all, r_all, false);
  const auto mine = run(layer(true), slice(x_all, 0, rank * per, (rank + 1) * per), slice(r_all, 0, rank * per, (rank + 1) * per), true);
  ASSERT_EQ(one.size(), 6u);
  ASSERT_EQ(mine.size(), 6u);
  for (size_t k = 0; k < one.size(); ++k) {
    const auto& [name, want] = one[k];
    const auto a = want.astype(Float64).to_vector<double>(), b = mine[k].second.astype(Float64).to_vector<double>();
    ASSERT_EQ(a.size(), b.size()) << name;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-5 + 1e-4 * std::abs(a[i])) << name << " element " << i;
  }
}

// The sync flag is saved with the graph (and files without it load as unsynchronized), and
// replica_sum is the identity without replicas and a sum with them.
TEST(DistSyncBatchNorm, FlagSavedAndReplicaSum) {
  Graph g = cnn_graph(true);  // bn synchronized, bn2 not
  auto synced = [](const std::string& text) {
    int n = 0;
    for (size_t at = text.find("\"sync\": true"); at != std::string::npos; at = text.find("\"sync\": true", at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(synced(graph_to_json(g)), 1);
  EXPECT_EQ(nn::sync_batch_norm(g), 2);
  const std::string text = graph_to_json(g);
  EXPECT_EQ(synced(text), 2);
  EXPECT_EQ(synced(graph_to_json(graph_from_json(text))), 2);
  std::string old = text;  // a file written before the flag existed
  const std::string field = ",\n        \"sync\": true";
  for (size_t at; (at = old.find(field)) != std::string::npos;) old.erase(at, field.size());
  EXPECT_EQ(synced(old), 0);
  EXPECT_EQ(old.find("sync"), std::string::npos);
  EXPECT_EQ(synced(graph_to_json(graph_from_json(old))), 0);
  Tensor v = full({3}, static_cast<double>(dist::rank() + 1)).requires_grad_();
  Tensor s = nn::replica_sum(v);
  const double total = dist::size() * (dist::size() + 1) / 2.0;
  EXPECT_EQ(s.to_vector<float>(), std::vector<float>(3, static_cast<float>(total)));
  (s * static_cast<double>(dist::rank() + 1)).sum().backward();  // each rank's gradient: the sum of all
  EXPECT_EQ(v.grad().to_vector<float>(), std::vector<float>(3, static_cast<float>(total)));
}

}  // namespace
}  // namespace loom
