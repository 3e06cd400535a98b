// DataLoader: determinism across n_jobs, shuffling per epoch, drop_last, resume, prefetch,
// shutdown mid-epoch, error propagation; datasets, subsets and streams.
#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/data/dataset.h>
#include <loom/data/idx.h>
#include <loom/data/loader.h>
#include <loom/data/transforms.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "unit/common/core_test_util.h"

using namespace loom;
using namespace loom::data;
using loom_test::contains_all;
using loom_test::error_message;

namespace {

// 10 examples: x_i = (i, i + 0.5) float32, y_i = i int64.
std::shared_ptr<TensorDataset> small(int64_t n = 10) {
  Tensor x = arange(0, static_cast<double>(n), 1, Float32).expand_dims(1) + tensor<float>({0.0f, 0.5f});
  return std::make_shared<TensorDataset>(std::vector<Tensor>{x, arange(n)});
}

std::vector<std::vector<double>> drain(DataLoader& loader, size_t field = 1) {
  std::vector<std::vector<double>> out;
  for (const Batch& b : loader) out.push_back(b[field].to_vector<double>());
  return out;
}

// Counts get_batch calls; optionally sleeps or fails in them.
class CountingDataset : public Dataset {
 public:
  explicit CountingDataset(int64_t n, int64_t fail_at = -1) : inner_(small(n)), fail_at_(fail_at) {}
  int64_t size() const override { return inner_->size(); }
  Example get(int64_t i) const override { return inner_->get(i); }
  Batch get_batch(const std::vector<int64_t>& idx) const override {
    ++calls;
    if (fail_at_ >= 0 && std::find(idx.begin(), idx.end(), fail_at_) != idx.end())
      throw ValueError("CountingDataset: example " + std::to_string(fail_at_) + " is broken");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return inner_->get_batch(idx);
  }
  mutable std::atomic<int> calls{0};

 private:
  std::shared_ptr<TensorDataset> inner_;
  int64_t fail_at_;
};

}  // namespace

TEST(DataDataset, TensorDatasetSlicesWithoutCopy) {
  auto ds = small();
  EXPECT_EQ(ds->size(), 10);
  Example ex = ds->get(3);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_TRUE(ex[0].shares_storage_with(ds->tensors()[0]));
  EXPECT_EQ(ex[0].to_vector<float>(), (std::vector<float>{3.0f, 3.5f}));
  EXPECT_EQ(ex[1].item<int64_t>(), 3);
  Batch b = ds->get_batch({4, 1});
  EXPECT_EQ(b[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(b[1].to_vector<int64_t>(), (std::vector<int64_t>{4, 1}));
  // the generic path (get + collate) agrees with the take() fast path
  Batch slow = ds->Dataset::get_batch({4, 1});
  EXPECT_EQ(slow[0].to_vector<float>(), b[0].to_vector<float>());
  EXPECT_EQ(slow[1].to_vector<int64_t>(), b[1].to_vector<int64_t>());
  EXPECT_TRUE(contains_all(error_message<IndexError>([&] { ds->get(10); }), {"10", "10 examples"}));
  EXPECT_THROW(TensorDataset({zeros({3}), zeros({4})}), ShapeError);
}

TEST(DataDataset, CollateNamesTheMismatchingField) {
  std::vector<Example> exs = {{zeros({2}), zeros({})}, {zeros({3}), zeros({})}};
  EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { collate(exs); }), {"field 0", "example 1", "(3,)"}));
}

TEST(DataDataset, SubsetAndRandomSplit) {
  auto ds = small();
  auto parts = random_split(ds, std::vector<int64_t>{7, 3}, 42);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0]->size(), 7);
  EXPECT_EQ(parts[1]->size(), 3);
  std::set<int64_t> seen;
  for (auto& p : parts)
    for (int64_t i = 0; i < p->size(); ++i) seen.insert(p->get(i)[1].item<int64_t>());
  EXPECT_EQ(seen.size(), 10u);  // disjoint and complete
  auto again = random_split(ds, std::vector<int64_t>{7, 3}, 42);
  EXPECT_EQ(again[0]->indices(), parts[0]->indices());
  auto other = random_split(ds, std::vector<int64_t>{7, 3}, 43);
  EXPECT_NE(other[0]->indices(), parts[0]->indices());
  // a subset's batch maps through to the base's take() path
  Batch b = parts[1]->get_batch({0, 2});
  EXPECT_EQ(b[1].to_vector<int64_t>(), (std::vector<int64_t>{parts[1]->indices()[0], parts[1]->indices()[2]}));
  auto frac = random_split_fractions(ds, {0.75, 0.25}, 1);
  EXPECT_EQ(frac[0]->size() + frac[1]->size(), 10);
  EXPECT_EQ(frac[0]->size(), 8);  // floor(7.5) + the remainder
  EXPECT_THROW(random_split(ds, std::vector<int64_t>{5, 4}, 0), ValueError);
}

TEST(DataDataset, StreamsBatch) {
  auto stream = std::make_shared<DatasetStream>(small(5));
  StreamBatcher batcher(stream, 2);
  std::vector<int64_t> sizes;
  while (auto b = batcher.next()) sizes.push_back(b->at(0).dim(0));
  EXPECT_EQ(sizes, (std::vector<int64_t>{2, 2, 1}));
  int k = 0;
  auto fn = std::make_shared<FunctionStream>([&]() -> std::optional<Example> {
    if (k == 5) return std::nullopt;
    return Example{full({3}, k++, Float32)};
  });
  StreamBatcher dropping(fn, 2, /*drop_last=*/true);
  int batches = 0;
  while (auto b = dropping.next()) {
    EXPECT_EQ(b->at(0).shape(), (Shape{2, 3}));
    ++batches;
  }
  EXPECT_EQ(batches, 2);
  EXPECT_THROW(fn->reset(), ValueError);
}

TEST(DataLoader, SequentialBatchesAndLen) {
  DataLoader loader(small(), {.batch_size = 4});
  EXPECT_EQ(loader.len(), 3);
  auto batches = drain(loader);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(batches[2], (std::vector<double>{8, 9}));
  EXPECT_EQ(loader.position(), (LoaderPosition{1, 0}));
}

// PyTorch's DataLoader(dataset, 32): the batch size as the second argument (issue 46).
TEST(DataLoader, BatchSizeAsTheSecondArgument) {
  DataLoader loader(small(), 4);
  EXPECT_EQ(loader.options().batch_size, 4);
  EXPECT_FALSE(loader.options().shuffle);
  EXPECT_EQ(loader.len(), 3);
  auto batches = drain(loader);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(batches[2], (std::vector<double>{8, 9}));
  const int64_t n = 5;
  EXPECT_EQ(DataLoader(small(), n).len(), 2);  // any integer type
  EXPECT_EQ(DataLoader(small(), {}).options().batch_size, 1);  // {} is still the default options
  EXPECT_THROW(DataLoader(small(), 0), ValueError);
}

TEST(DataLoader, DropLast) {
  DataLoader loader(small(), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(loader.len(), 2);
  auto batches = drain(loader);
  ASSERT_EQ(batches.size(), 2u);
  for (auto& b : batches) EXPECT_EQ(b.size(), 4u);
  DataLoader exact(small(8), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(exact.len(), 2);
  DataLoader none(small(3), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(none.len(), 0);
  EXPECT_TRUE(drain(none).empty());
}

TEST(DataLoader, SameSeedSameBatchesWhateverTheJobs) {
  auto ds = small(103);
  std::vector<std::vector<std::vector<double>>> runs;
  for (int jobs : {0, 1, 2, 3}) {
    DataLoader loader(ds, {.batch_size = 8, .shuffle = true, .seed = 5, .n_jobs = jobs, .prefetch = 2,
                           .transform = RandomHorizontalFlip(0.5, 0)});
    std::vector<std::vector<double>> all;
    for (int epoch = 0; epoch < 2; ++epoch)
      for (const Batch& b : loader) {
        all.push_back(b[1].to_vector<double>());
        all.push_back(b[0].to_vector<double>());  // the flip depends on the per-batch generator
      }
    runs.push_back(all);
  }
  for (size_t r = 1; r < runs.size(); ++r) EXPECT_EQ(runs[r], runs[0]) << "n_jobs run " << r;
}

TEST(DataLoader, ShuffleIsAPermutationThatChangesPerEpoch) {
  DataLoader loader(small(50), {.batch_size = 7, .shuffle = true, .seed = 11});
  std::vector<double> e0, e1;
  for (const Batch& b : loader)
    for (double v : b[1].to_vector<double>()) e0.push_back(v);
  for (const Batch& b : loader)
    for (double v : b[1].to_vector<double>()) e1.push_back(v);
  EXPECT_EQ(e0.size(), 50u);
  EXPECT_EQ(std::set<double>(e0.begin(), e0.end()).size(), 50u);
  EXPECT_EQ(std::set<double>(e1.begin(), e1.end()).size(), 50u);
  EXPECT_NE(e0, e1);
  std::vector<double> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(sorted, e0);  // shuffled
  DataLoader other(small(50), {.batch_size = 7, .shuffle = true, .seed = 12});
  EXPECT_NE(other.epoch_order(0), loader.epoch_order(0));
}

TEST(DataLoader, ResumeMidEpochEqualsUninterrupted) {
  auto ds = small(37);
  LoaderOptions o{.batch_size = 5, .shuffle = true, .seed = 3, .n_jobs = 2, .transform = RandomHorizontalFlip(0.5, 0)};
  DataLoader full_run(ds, o);
  std::vector<std::vector<double>> expected;
  for (int e = 0; e < 2; ++e)
    for (const Batch& b : full_run) {
      expected.push_back(b[1].to_vector<double>());
      expected.push_back(b[0].to_vector<double>());
    }

  std::vector<std::vector<double>> got;
  LoaderPosition saved;
  {
    DataLoader first(ds, o);
    for (const Batch& b : first) {  // epoch 0 entirely
      got.push_back(b[1].to_vector<double>());
      got.push_back(b[0].to_vector<double>());
    }
    int k = 0;
    for (const Batch& b : first) {  // 3 batches of epoch 1, then "crash" with workers running
      got.push_back(b[1].to_vector<double>());
      got.push_back(b[0].to_vector<double>());
      if (++k == 3) break;
    }
    saved = first.position();
  }  // destroyed mid-epoch: the workers are joined
  EXPECT_EQ(saved, (LoaderPosition{1, 3}));
  DataLoader resumed(ds, o);
  resumed.set_position(saved);
  for (const Batch& b : resumed) {
    got.push_back(b[1].to_vector<double>());
    got.push_back(b[0].to_vector<double>());
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(resumed.position(), (LoaderPosition{2, 0}));
  EXPECT_THROW(resumed.set_position({0, 9}), ValueError);
}

TEST(DataLoader, PrefetchFillsABoundedQueue) {
  auto ds = std::make_shared<CountingDataset>(100);
  DataLoader loader(ds, {.batch_size = 2, .n_jobs = 2, .prefetch = 6});
  auto first = loader.next();
  ASSERT_TRUE(first.has_value());
  // the workers build ahead of the consumer up to `prefetch` batches, then sleep
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (loader.ready_count() < 6 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(loader.ready_count(), 6);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(ds->calls.load(), 7);  // the delivered batch + 6 ahead, no more
  EXPECT_EQ(loader.ready_count(), 6);
  auto second = loader.next();
  EXPECT_EQ(second->at(1).to_vector<int64_t>(), (std::vector<int64_t>{2, 3}));
}

TEST(DataLoader, WorkerErrorsReachTheConsumerAtTheirBatch) {
  auto ds = std::make_shared<CountingDataset>(20, /*fail_at=*/9);
  DataLoader loader(ds, {.batch_size = 2, .n_jobs = 2});
  int delivered = 0;
  std::string msg = error_message<ValueError>([&] {
    for (const Batch& b : loader) {
      (void)b;
      ++delivered;
    }
  });
  EXPECT_TRUE(contains_all(msg, {"example 9 is broken"}));
  EXPECT_EQ(delivered, 4);
  EXPECT_EQ(loader.position(), (LoaderPosition{0, 4}));
}

TEST(DataLoader, DestroyingMidEpochJoinsWorkers) {
  for (int i = 0; i < 20; ++i) {
    DataLoader loader(std::make_shared<CountingDataset>(200), {.batch_size = 3, .n_jobs = 3, .prefetch = 4});
    loader.next();
  }
  SUCCEED();
}

TEST(DataLoader, TransformsApplyPerBatch) {
  Tensor images = arange(0, 2 * 4 * 4, 1, Float32).reshape({2, 1, 4, 4});
  auto ds = std::make_shared<TensorDataset>(std::vector<Tensor>{images, tensor<int64_t>({1, 2})});
  DataLoader loader(ds, {.batch_size = 2, .transform = Compose({Normalize({1.0}, {2.0}), OneHot(3)})});
  auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_FLOAT_EQ(b->at(0).at({1, 0, 0, 0}), (16.0f - 1.0f) / 2.0f);
  EXPECT_EQ(b->at(1).shape(), (Shape{2, 3}));
  EXPECT_EQ(b->at(1).to_vector<float>(), (std::vector<float>{0, 1, 0, 0, 0, 1}));
}

TEST(DataLoader, FashionMnistThroughTheLoader) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dir + "/t10k-images-idx3-ubyte.gz")) GTEST_SKIP() << "Fashion-MNIST not installed";
  Tensor x = read_idx(dir + "/t10k-images-idx3-ubyte.gz");
  Tensor y = read_idx(dir + "/t10k-labels-idx1-ubyte.gz");
  auto ds = std::make_shared<TensorDataset>(std::vector<Tensor>{x.expand_dims(1), y.astype(Int64)});
  DataLoader loader(ds, {.batch_size = 256, .shuffle = true, .seed = 1, .n_jobs = 2,
                         .transform = Compose({Cast(Float32, 1 / 255.0), Normalize({0.2860}, {0.3530}),
                                               RandomCrop(28, 28, 2), RandomHorizontalFlip()})});
  int64_t n = 0;
  for (const Batch& b : loader) {
    EXPECT_EQ(b[0].shape().size(), 4u);
    EXPECT_EQ(b[0].dim(2), 28);
    EXPECT_EQ(b[0].dtype(), Float32);
    n += b[1].dim(0);
  }
  EXPECT_EQ(n, 10000);
}

// Shards split each epoch's order (the same shuffle on every shard): every example once per
// epoch between them, equally many batches each, padded or cut when the count does not divide.
TEST(DataLoader, ShardsSplitEachEpochBetweenThem) {
  for (bool shuffle : {false, true})
    for (int64_t n : {12, 10}) {
      const auto ds = small(n);
      DataLoader whole(ds, {.batch_size = 4, .shuffle = shuffle, .seed = 5});
      for (int64_t epoch = 0; epoch < 2; ++epoch) {
        const std::vector<int64_t> order = whole.epoch_order(epoch);
        std::multiset<int64_t> seen;
        for (int64_t k = 0; k < 3; ++k) {
          DataLoader part(ds, {.batch_size = 2, .shuffle = shuffle, .seed = 5, .shard = {.index = k, .count = 3}});
          part.set_epoch(epoch);
          const std::vector<int64_t> mine = part.epoch_order(epoch);
          ASSERT_EQ(static_cast<int64_t>(mine.size()), (n + 2) / 3);  // padded to ceil(n / 3)
          EXPECT_EQ(part.size(), ((n + 2) / 3 + 1) / 2);
          for (size_t j = 0; j < mine.size(); ++j) EXPECT_EQ(mine[j], order[(k + 3 * j) % n]);
          for (const auto& b : drain(part)) seen.insert(b.begin(), b.end());
        }
        // every example at least once; the n % 3 padding repeats the order's first examples
        EXPECT_EQ(seen.size(), static_cast<size_t>(3 * ((n + 2) / 3)));
        for (int64_t i = 0; i < n; ++i) EXPECT_GE(seen.count(i), 1u) << "example " << i;
        for (int64_t j = 0; j < 3 * ((n + 2) / 3) - n; ++j) EXPECT_EQ(seen.count(order[j]), 2u);
        // drop_tail: floor(n / 3) each, no example twice
        std::set<int64_t> cut;
        for (int64_t k = 0; k < 3; ++k) {
          DataLoader part(ds, {.shuffle = shuffle, .seed = 5, .shard = {.index = k, .count = 3, .drop_tail = true}});
          const std::vector<int64_t> mine = part.epoch_order(epoch);
          EXPECT_EQ(static_cast<int64_t>(mine.size()), n / 3);
          cut.insert(mine.begin(), mine.end());
        }
        EXPECT_EQ(cut.size(), static_cast<size_t>(3 * (n / 3)));
      }
    }
}

// Shard 0 of 1 is the whole loader (same order, same transform seeds); shards of the same batch
// index draw different transform seeds.
TEST(DataLoader, ShardSeedsAndValidation) {
  const auto ds = small(8);
  DataLoader plain(ds, {.batch_size = 2, .shuffle = true, .seed = 3});
  DataLoader one(ds, {.batch_size = 2, .shuffle = true, .seed = 3, .shard = {.index = 0, .count = 1}});
  DataLoader a(ds, {.batch_size = 2, .shuffle = true, .seed = 3, .shard = {.index = 0, .count = 2}});
  DataLoader b(ds, {.batch_size = 2, .shuffle = true, .seed = 3, .shard = {.index = 1, .count = 2}});
  EXPECT_EQ(one.epoch_order(1), plain.epoch_order(1));
  EXPECT_EQ(one.batch_seed(1, 2), plain.batch_seed(1, 2));
  EXPECT_NE(a.batch_seed(1, 0), b.batch_seed(1, 0));
  for (Shard bad : {Shard{.index = 2, .count = 2}, Shard{.index = -1, .count = 2}, Shard{.index = 0, .count = 0}}) {
    const std::string m = error_message<ValueError>([&] { DataLoader l(ds, {.shard = bad}); });
    EXPECT_TRUE(contains_all(m, {"shard " + std::to_string(bad.index) + " of " + std::to_string(bad.count),
                                 "count >= 1 and index in [0, count)"})) << m;
  }
}
