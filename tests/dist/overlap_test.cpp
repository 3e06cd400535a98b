// Gradient averaging overlapped with backward (DistributedOptions::overlap): buckets start
// during backward, the averaged gradients are bitwise those of averaging after backward, with
// unused parameters, repeated backwards and Model::fit alike. Run at 1, 2 and 3 processes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "loom/dist/optimizer.h"
#include "loom/loom.h"

namespace loom {
namespace {

// A 3-layer MLP; `skip` leaves its middle layer and output unused, using skip_out instead.
struct Net {
  nn::Input x{6, Float32, "x"};
  nn::Linear a{x, 10, {}, "a"};
  nn::Activation ra{a, nn::tanh, "ra"};
  nn::Linear b{ra, 10, {}, "b"};
  nn::Activation rb{b, nn::tanh, "rb"};
  nn::Linear out{rb, 2, {}, "out"};
  nn::Linear skip_out{ra, 2, {}, "skip_out"};
  Plan full = Graph::build({out}, {x}).compile();
  Plan skip = Graph::build({skip_out}, {x}).compile();
  std::vector<Tensor> params(bool with_skip) const {
    return with_skip ? train::parameters({a, b, out, skip_out}) : train::parameters({a, b, out});
  }
};

// Rank r's batch k: values that are not small integers, so that sums depend on their order.
Tensor batch(int r, int k) {
  Generator g(100 + static_cast<uint64_t>(10 * r + k));
  return normal({5, 6}, 0, 1, Float32, default_device(), &g);
}

struct Result {
  std::vector<Tensor> grads;  // copies; undefined stays undefined
  int64_t buckets = 0, overlapped = 0;
};

// The averaged gradients of `params` after `backwards` backward passes through `plan`.
// With `scale_last`, the last parameter's gradient is doubled in place before averaging.
Result averaged(const std::vector<Tensor>& params, const Plan& plan, dist::DistributedOptions o, int backwards = 1,
                bool scale_last = false) {
  auto sgd = std::make_shared<train::SGD>(params, train::SGDOptions{.lr = 0.1});
  dist::DistributedOptimizer opt(sgd, o);
  opt.zero_grad();
  for (int k = 0; k < backwards; ++k) {
    const Tensor y = plan(batch(dist::rank(), k));
    (y * y).mean().backward();
  }
  if (scale_last) params.back().grad().copy_(params.back().grad() * 2.0);  // as clipping would
  opt.average_gradients();
  Result r{{}, opt.last_bucket_count(), opt.last_overlapped_count()};
  for (const Tensor& p : params) r.grads.push_back(p.grad().defined() ? p.grad().copy() : Tensor());
  return r;
}

void expect_bitwise_equal(const Result& a, const Result& b, const std::string& what) {
  ASSERT_EQ(a.grads.size(), b.grads.size());
  EXPECT_EQ(a.buckets, b.buckets) << what;
  for (size_t k = 0; k < a.grads.size(); ++k) {
    ASSERT_EQ(a.grads[k].defined(), b.grads[k].defined()) << what << ": parameter " << k;
    if (a.grads[k].defined())
      EXPECT_EQ(a.grads[k].to_vector<float>(), b.grads[k].to_vector<float>()) << what << ": parameter " << k;
  }
}

TEST(DistOverlap, BucketsStartDuringBackwardWithTheSameBits) {
  manual_seed(5);  // the same weights on every rank
  Net net;
  const std::vector<Tensor> params = net.params(false);
  // 1 byte: a bucket per parameter (6); 200 bytes: a few; 25 MiB: one
  for (int64_t bytes : {int64_t{1}, int64_t{200}, int64_t{25} << 20}) {
    const std::string what = "bucket_bytes " + std::to_string(bytes);
    const Result on = averaged(params, net.full, {.bucket_bytes = bytes, .overlap = true});
    const Result off = averaged(params, net.full, {.bucket_bytes = bytes, .overlap = false});
    expect_bitwise_equal(on, off, what);
    if (bytes == 1) EXPECT_EQ(on.buckets, 6);
    if (bytes == 200) EXPECT_GT(on.buckets, 2) << what;
    // every gradient comes during backward: every bucket starts there
    EXPECT_EQ(on.overlapped, on.buckets) << what;
    EXPECT_EQ(off.overlapped, 0) << what;
    // and the values are the mean over ranks of each rank's own gradients
    std::vector<Tensor> sum;
    for (int r = 0; r < dist::size(); ++r) {
      for (const Tensor& p : params) p.impl()->grad = nullptr;
      const Tensor y = net.full(batch(r, 0));
      (y * y).mean().backward();
      for (size_t k = 0; k < params.size(); ++k) {
        const Tensor g = params[k].grad().astype(Float64);
        if (r == 0) sum.push_back(g);
        else sum[k] = sum[k] + g;
      }
    }
    for (size_t k = 0; k < params.size(); ++k) {
      const auto want = (sum[k] / static_cast<double>(dist::size())).to_vector<double>();
      const auto got = on.grads[k].astype(Float64).to_vector<double>();
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6 + 1e-5 * std::abs(want[i])) << what;
    }
  }
}

// Odd ranks take the skip path: b's and out's gradients come on even ranks only, skip_out's on
// odd ranks only (zeros elsewhere; without a gradient at all in a job of one). A parameter
// whose gradient never comes holds its bucket, and those after it, until the averaging.
TEST(DistOverlap, UnusedParametersFallBackToAveragingAfterBackward) {
  manual_seed(6);
  Net net;
  const std::vector<Tensor> params = net.params(true);
  const Plan& plan = dist::rank() % 2 ? net.skip : net.full;
  for (int64_t bytes : {int64_t{1}, int64_t{200}}) {
    const std::string what = "bucket_bytes " + std::to_string(bytes);
    const Result on = averaged(params, plan, {.bucket_bytes = bytes, .overlap = true});
    const Result off = averaged(params, plan, {.bucket_bytes = bytes, .overlap = false});
    expect_bitwise_equal(on, off, what);
    for (size_t k = 0; k < params.size(); ++k)
      EXPECT_EQ(on.grads[k].defined(), k < 6 || dist::size() > 1) << what << ": parameter " << k;
    // skip_out's bucket (the first, in reverse order) never completes on even ranks
    if (dist::rank() % 2 == 0) EXPECT_EQ(on.overlapped, 0) << what;
  }
}

// Two backward passes before averaging (gradient accumulation): the buckets started during the
// first hold stale values, so the averaging is redone after backward, on every rank.
TEST(DistOverlap, RepeatedBackwardIsRedoneAfterBackward) {
  manual_seed(7);
  Net net;
  const std::vector<Tensor> params = net.params(false);
  const Result on = averaged(params, net.full, {.bucket_bytes = 200, .overlap = true}, 2);
  const Result off = averaged(params, net.full, {.bucket_bytes = 200, .overlap = false}, 2);
  expect_bitwise_equal(on, off, "two backward passes");
  EXPECT_EQ(on.overlapped, 0);
  // a gradient changed in place after its bucket started (clipped, say): redone as well
  const Result on2 = averaged(params, net.full, {.bucket_bytes = 200, .overlap = true}, 1, true);
  const Result off2 = averaged(params, net.full, {.bucket_bytes = 200, .overlap = false}, 1, true);
  expect_bitwise_equal(on2, off2, "a gradient changed in place");
  EXPECT_EQ(on2.overlapped, 0);
  const Result plain = averaged(params, net.full, {.bucket_bytes = 200, .overlap = false}, 1);
  EXPECT_EQ(on2.grads.back().to_vector<float>(), (plain.grads.back() * 2.0).to_vector<float>());
  // the next step overlaps again
  const Result again = averaged(params, net.full, {.bucket_bytes = 200, .overlap = true}, 1);
  EXPECT_EQ(again.overlapped, again.buckets);
}

// Model::fit with and without overlap: the same parameters, bit for bit.
TEST(DistOverlap, FitGivesTheSameParametersEitherWay) {
  Generator g(42);
  Tensor labels = randint(0, 2, {24}, Int64, default_device(), &g);
  Tensor x = normal({24, 6}, 0, 1, Float32, default_device(), &g);
  auto ds = std::make_shared<data::TensorDataset>(std::vector<Tensor>{x, labels});
  auto fit = [&](bool overlap) {
    manual_seed(8);
    Net net;
    Graph graph = Graph::build({net.out}, {net.x});
    auto sgd = std::make_shared<train::SGD>(net.params(false), train::SGDOptions{.lr = 0.1, .momentum = 0.9});
    train::Model model(graph, [](const Tensor& y, const Tensor& t) { return train::cross_entropy(y, t); }, sgd);
    data::DataLoader loader(ds, {.batch_size = 6 / dist::size(), .shuffle = true, .seed = 3});
    model.fit(loader, {.epochs = 2, .progress = false,
                       .distributed = dist::data_parallel({.bucket_bytes = 100, .overlap = overlap})});
    std::vector<std::vector<float>> out;
    for (const Tensor& p : net.params(false)) out.push_back(p.detach().to_vector<float>());
    return out;
  };
  const auto on = fit(true), off = fit(false);
  EXPECT_EQ(on, off);
}

}  // namespace
}  // namespace loom
