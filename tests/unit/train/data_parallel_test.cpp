// Model::fit's data-parallel hooks (train::DataParallel) and synchronized batch norm, without
// MPI: fakes stand for the other ranks (loom::dist's MPI implementation: tests/dist/).
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/data/dataset.h>
#include <loom/data/loader.h>
#include <loom/graph/graph.h>
#include <loom/io/model_file.h>
#include <loom/io/safetensors.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/nn/mode.h>
#include <loom/nn/normalization.h>
#include <loom/nn/replicas.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/losses.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/train/callbacks.h>
#include <loom/train/data_parallel.h>
#include <loom/train/history.h>
#include <loom/train/losses.h>
#include <loom/train/model.h>
#include <loom/train/optimizers.h>
#include <loom/train/regularizers.h>
#include <loom/train/train_step.h>

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

// Two replicas as two threads of this process: sum() waits for both and gives each the total.
struct ThreadPair : nn::ReplicaGroup {
  std::mutex m;
  std::condition_variable cv;
  std::vector<double> acc, result;
  int arrived = 0;
  int64_t generation = 0;
  int size() const override { return 2; }
  void sum(Tensor& t) override {
    const std::vector<double> v = t.astype(Float64).to_vector<double>();
    std::vector<double> total;
    {
      std::unique_lock<std::mutex> lock(m);
      const int64_t gen = generation;
      if (arrived == 0) acc = v;
      else
        for (size_t i = 0; i < v.size(); ++i) acc[i] += v[i];
      if (++arrived == 2) {
        result = acc;
        arrived = 0;
        ++generation;
        cv.notify_all();
      } else {
        cv.wait(lock, [&] { return generation != gen; });
      }
      total = result;
    }
    NoGrad off;
    t.copy_(from_vector(total, t.shape()).astype(t.dtype()));
  }
};

// A synchronized BatchNorm in two replicas (threads), each with half of the rows, is an
// ordinary one on the whole batch: each replica's output and x gradient are its rows of the
// whole batch's, the running statistics the same, the weight and bias gradients sum to the
// whole batch's.
TEST(SyncBatchNorm, TwoReplicasEqualOneLayerOnTheWholeBatch) {
  // float32 and float64 run the fused kernels (float64 to rounding: the formulas are exact)
  for (DType dt : {Float32, Float64}) {
    SCOPED_TRACE(dtype_name(dt));
    Generator gen(3);
    const Tensor x = (normal({6, 4, 2, 2}, 0, 1, Float32, default_device(), &gen) * 2.0 + 1.5).astype(dt);
    const Tensor r = normal({6, 4, 2, 2}, 0, 1, Float32, default_device(), &gen).astype(dt);
    // y, x grad, running_mean, running_var, weight grad, bias grad
    auto run = [dt](bool sync, const Tensor& xs, const Tensor& rs) {
      nn::Input in(Shape{-1, 4, 2, 2}, dt, "x");
      nn::BatchNorm bn(in, {.sync = sync}, "bn");
      Graph g = Graph::build({bn}, {in});
      const io::TensorMap s = io::graph_state(g);
      {
        NoGrad off;
        Tensor w = s.at("bn/weight");
        w.copy_(arange(0, 4, 1, Float32) * 0.5 + 0.25);
      }
      Tensor xg = xs.copy().requires_grad_();
      nn::ModeScope mode(nn::Mode::Train);
      Tensor y = g.compile()(xg);
      sum(y * rs).backward();
      std::vector<Tensor> out{y.detach(), xg.grad()};
      for (const char* k : {"bn/running_mean", "bn/running_var"}) out.push_back(s.at(k).copy());
      for (const char* k : {"bn/weight", "bn/bias"}) out.push_back(s.at(k).grad());
      return out;
    };
    const std::vector<Tensor> whole = run(false, x, r);
    ThreadPair pair;
    std::vector<Tensor> part[2];
    {
      InstallGroup installed(&pair);
      std::thread other([&] { part[1] = run(true, slice(x, 0, 3, 6), slice(r, 0, 3, 6)); });
      part[0] = run(true, slice(x, 0, 0, 3), slice(r, 0, 0, 3));
      other.join();
    }
    const char* names[] = {"y", "x grad", "running_mean", "running_var", "weight grad", "bias grad"};
    const double abs_tol = dt == Float64 ? 1e-12 : 1e-5, rel_tol = dt == Float64 ? 1e-12 : 1e-4;
    auto expect_near = [&](const Tensor& got, const Tensor& want, const std::string& what) {
      ASSERT_EQ(got.dtype(), dt) << what;
      const auto a = want.astype(Float64).to_vector<double>(), b = got.astype(Float64).to_vector<double>();
      ASSERT_EQ(a.size(), b.size()) << what;
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_NEAR(b[i], a[i], abs_tol + rel_tol * std::abs(a[i])) << what << " element " << i;
    };
    for (int p = 0; p < 2; ++p) {
      const std::string who = "replica " + std::to_string(p) + ": ";
      ASSERT_EQ(part[p].size(), 6u);
      for (size_t k = 0; k < 2; ++k) expect_near(part[p][k], slice(whole[k], 0, 3 * p, 3 * p + 3), who + names[k]);
      for (size_t k = 2; k < 4; ++k) expect_near(part[p][k], whole[k], who + names[k]);
    }
    for (size_t k = 4; k < 6; ++k) expect_near(part[0][k] + part[1][k], whole[k], names[k]);
    // without a group (or a group of one) the flag changes nothing
    const std::vector<Tensor> plain = run(false, x, r), alone = run(true, x, r);
    for (size_t k = 0; k < plain.size(); ++k) EXPECT_TRUE(array_equal(alone[k], plain[k])) << names[k];
  }
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
  // on_train_begin, then per epoch: on_epoch_begin, 2 per step (after backward, after
  // on_batch_end), the loader's end, on_epoch_end
  EXPECT_EQ(fake->failures, std::vector<bool>(1 + 2 * (1 + 4 * 2 + 1 + 1), false));
  EXPECT_EQ(fake->averaged, 8 * 2 + 2);                      // logs and stop flag per step, stop flag per epoch
  EXPECT_EQ(all_cb->batches, 8);
  EXPECT_EQ(root_cb->batches, 0);
  fake->rank_ = 0;
  model.fit(loader, {.epochs = 1, .callbacks = {root_cb}, .progress = false, .distributed = fake});  // one more
  EXPECT_EQ(root_cb->batches, 4);
}

TEST(FitDataParallel, AFailureStopsTheStep) {
  train::Model model = small_model();
  data::DataLoader loader(small_data(), {.batch_size = 2});
  auto fake = std::make_shared<FakeRank>();
  fake->fail_at = 5;  // another rank failed in the second step's forward (checks: train, epoch, step 1 twice)
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
  EXPECT_EQ(fake2->failures, (std::vector<bool>{false, false, false, false, true}));
  EXPECT_EQ(fake2->averaged_grads, 1);
}

}  // namespace
}  // namespace loom
