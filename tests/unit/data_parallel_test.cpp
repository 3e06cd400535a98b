// Model::fit's data-parallel hooks (train::DataParallel) and synchronized batch norm, without
// MPI: fakes stand for the other ranks (loom::dist's MPI implementation: tests/dist/).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "loom/loom.h"

namespace loom {
namespace {

// Two replicas holding the same tensors: a sum over them doubles.
struct Mirror : nn::ReplicaGroup {
  int size() const override { return 2; }
  void sum(Tensor& t) override {
    NoGrad off;
    t.copy_(t * 2.0);
  }
};

struct InstallGroup {
  explicit InstallGroup(nn::ReplicaGroup* g) { nn::set_replica_group(g); }
  ~InstallGroup() { nn::set_replica_group(nullptr); }
};

// A synchronized BatchNorm on x, where the other replica holds the same x, is an ordinary one
// on the batch [x; x]: output, running statistics and gradients (x's; weight's and bias's per
// replica, half of the whole batch's).
TEST(SyncBatchNorm, EqualsBatchNormOverAllReplicasRows) {
  Generator gen(3);
  const Tensor x = normal({3, 4, 2, 2}, 0, 1, Float32, default_device(), &gen) * 2.0 + 1.5;
  const Tensor r = normal({3, 4, 2, 2}, 0, 1, Float32, default_device(), &gen);
  auto run = [](bool sync, const Tensor& xs, const Tensor& rs) {
    nn::Input in(Shape{-1, 4, 2, 2}, Float32, "x");
    nn::BatchNorm bn(in, {.sync = sync}, "bn");
    Graph g = Graph::build({bn}, {in});
    Tensor xg = xs.copy().requires_grad_();
    nn::ModeScope mode(nn::Mode::Train);
    Tensor y = g.compile()(xg);
    sum(y * rs).backward();
    std::vector<Tensor> out{y.detach(), xg.grad()};
    const io::TensorMap s = io::graph_state(g);
    for (const char* k : {"bn/running_mean", "bn/running_var"}) out.push_back(s.at(k).copy());
    for (const char* k : {"bn/weight", "bn/bias"}) out.push_back(s.at(k).grad());
    return out;
  };
  const std::vector<Tensor> whole = run(false, concatenate({x, x}, 0), concatenate({r, r}, 0));
  Mirror mirror;
  std::vector<Tensor> mine;
  {
    InstallGroup installed(&mirror);
    mine = run(true, x, r);
  }
  const std::vector<Tensor> want = {slice(whole[0], 0, 0, 3), slice(whole[1], 0, 0, 3), whole[2], whole[3], whole[4] / 2.0,
                                    whole[5] / 2.0};
  const char* names[] = {"y", "x grad", "running_mean", "running_var", "weight grad", "bias grad"};
  for (size_t k = 0; k < want.size(); ++k) {
    const auto a = want[k].to_vector<float>(), b = mine[k].to_vector<float>();
    ASSERT_EQ(a.size(), b.size()) << names[k];
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-5 + 1e-4 * std::abs(a[i])) << names[k] << " element " << i;
  }
  // without a group (or a group of one) the flag changes nothing
  const std::vector<Tensor> plain = run(false, x, r), alone = run(true, x, r);
  for (size_t k = 0; k < plain.size(); ++k) EXPECT_EQ(alone[k].to_vector<float>(), plain[k].to_vector<float>()) << names[k];
}

TEST(SyncBatchNorm, ReplicaSumIsTheIdentityAlone) {
  Tensor v = full({2}, 3.0).requires_grad_();
  Tensor s = nn::replica_sum(v);
  EXPECT_EQ(s.to_vector<float>(), std::vector<float>(2, 3.0f));
  Mirror mirror;
  InstallGroup installed(&mirror);
  Tensor d = nn::replica_sum(v);
  EXPECT_EQ(d.to_vector<float>(), std::vector<float>(2, 6.0f));
  EXPECT_EQ(v.to_vector<float>(), std::vector<float>(2, 3.0f));  // the input is not changed
  sum(d).backward();
  EXPECT_EQ(v.grad().to_vector<float>(), std::vector<float>(2, 2.0f));
}

// A fake rank `rank` of 2: records fit's calls; averages nothing; `fail_at` makes
// check_failures report another rank's failure at that call.
struct FakeRank : train::DataParallel {
  int rank_ = 1, begun = 0, averaged_grads = 0, averaged = 0, checks = 0, fail_at = -1;
  std::vector<bool> failures;
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  void begin(train::Model&, data::DataLoader&) override { ++begun; }
  void average_gradients(train::Optimizer&) override { ++averaged_grads; }
  void average(std::vector<double>&) override { ++averaged; }
  void check_failures(std::exception_ptr failure) override {
    failures.push_back(failure != nullptr);
    if (failure) std::rethrow_exception(failure);
    if (++checks == fail_at) throw std::runtime_error("rank 0 failed");
  }
};

struct Counter : train::Callback {
  bool root = false;
  int batches = 0;
  bool root_only() const override { return root; }
  void on_batch_end(train::Model&, int64_t, const train::Logs&) override { ++batches; }
};

train::Model small_model() {
  nn::Input x(2, Float32, "x");
  nn::Linear out(x, 2, {}, "out");
  Graph g = Graph::build({out}, {x});
  return train::Model(g, [](const Tensor& y, const Tensor& t) { return train::cross_entropy(y, t); },
                      std::make_shared<train::SGD>(train::parameters({out}), train::SGDOptions{.lr = 0.1}));
}

std::shared_ptr<data::TensorDataset> small_data() {
  return std::make_shared<data::TensorDataset>(std::vector<Tensor>{zeros({8, 2}), zeros({8}, Int64)});
}

TEST(FitDataParallel, CallsTheHooksAndSkipsRootOnlyCallbacksOffRank0) {
  train::Model model = small_model();
  data::DataLoader loader(small_data(), {.batch_size = 2});
  auto fake = std::make_shared<FakeRank>();
  auto root_cb = std::make_shared<Counter>(), all_cb = std::make_shared<Counter>();
  root_cb->root = true;
  testing::internal::CaptureStdout();
  model.fit(loader, {.epochs = 2, .callbacks = {root_cb, all_cb}, .distributed = fake});
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");  // no progress bar off rank 0
  EXPECT_EQ(fake->begun, 1);
  EXPECT_EQ(fake->averaged_grads, 8);
  EXPECT_EQ(fake->failures, std::vector<bool>(10, false));  // 4 steps and the end, per epoch
  EXPECT_EQ(fake->averaged, 8 * 2 + 2);                      // logs and stop flag per step, stop flag per epoch
  EXPECT_EQ(all_cb->batches, 8);
  EXPECT_EQ(root_cb->batches, 0);
  fake->rank_ = 0;
  model.fit(loader, {.epochs = 3, .callbacks = {root_cb}, .progress = false, .distributed = fake});
  EXPECT_EQ(root_cb->batches, 4);
}

TEST(FitDataParallel, AFailureStopsTheStep) {
  train::Model model = small_model();
  data::DataLoader loader(small_data(), {.batch_size = 2});
  auto fake = std::make_shared<FakeRank>();
  fake->fail_at = 2;  // another rank failed in the second step
  EXPECT_THROW(model.fit(loader, {.progress = false, .distributed = fake}), std::runtime_error);
  EXPECT_EQ(model.optimizer().steps(), 1);
  // this rank fails: check_failures sees it before the gradients are averaged
  train::Model model2 = small_model();
  data::DataLoader loader2(small_data(), {.batch_size = 2});
  auto fake2 = std::make_shared<FakeRank>();
  auto thrower = std::make_shared<train::LambdaCallback>();
  thrower->batch_begin = [](train::Model&, int64_t step) {
    if (step == 2) throw IOError("bad batch");
  };
  EXPECT_THROW(model2.fit(loader2, {.epochs = 2, .callbacks = {thrower}, .progress = false, .distributed = fake2}), IOError);
  EXPECT_EQ(fake2->failures, (std::vector<bool>{false, true}));
  EXPECT_EQ(fake2->averaged_grads, 1);
}

}  // namespace
}  // namespace loom
