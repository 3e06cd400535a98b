#pragma once
// DataLoader: batches of a Dataset, optionally shuffled (a seeded permutation per epoch),
// built by worker threads ahead of the consumer, transformed, and resumable mid-epoch.
//
//   auto train = std::make_shared<data::TensorDataset>(std::vector<Tensor>{images, labels});
//   data::DataLoader loader(train, {.batch_size = 128, .shuffle = true, .seed = 7, .n_jobs = 2});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (const data::Batch& b : loader) step(b[0], b[1]);      // one epoch per range-for
//
// Guarantees:
// - The batches depend only on (dataset, options, epoch, batch index): the same seed gives the
//   same batches for any n_jobs and prefetch, and epoch e shuffles with a permutation drawn from
//   a Generator seeded by (seed, e), so epochs differ and runs repeat.
// - Batches are delivered in order; workers claim batch indices from a shared counter, build
//   them concurrently, and stop when `prefetch` batches are ready or in progress ahead of the
//   consumer. Idle workers sleep on a condition variable (no spinning).
// - position() is (epoch, batches delivered in that epoch); set_position() on a fresh loader
//   with the same options makes it yield exactly the batches an uninterrupted run would have
//   yielded next.
// - Destroying the loader (or set_position) mid-epoch stops and joins its workers.
// - An exception thrown while building batch b (by the dataset or the transform) is rethrown
//   by the next() that would have returned batch b; the position stays at b.
#include <concepts>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <vector>

#include "loom/core/api.h"
#include "loom/data/dataset.h"
#include "loom/data/transforms.h"

namespace loom::data {

// One of `count` loaders that split every epoch between them (data-parallel training: one per
// process, dist::shard()): loader `index` yields positions index, index + count, ... of the
// epoch's order (the same order, shuffled or not, on every loader with the same seed), so
// that the loaders see every example once per epoch between them. When count does not divide
// the dataset's size, the order is padded by repeating its first examples (every loader gets
// ceil(size / count) examples, as torch's DistributedSampler) or, with drop_tail, cut to a
// multiple of count (floor(size / count) each): the loaders always yield equally many batches.
struct LOOM_API Shard {
  int64_t index = 0;
  int64_t count = 1;
  bool drop_tail = false;
};

struct LOOM_API LoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  uint64_t seed = 0;       // shuffling and random transforms
  bool drop_last = false;  // drop the last batch when it is shorter than batch_size
  int n_jobs = 0;          // worker threads; 0 builds each batch in the calling thread
  int64_t prefetch = 4;    // batches ready or in progress ahead of the consumer (>= n_jobs is used)
  Transform transform;     // applied to every collated batch
  Shard shard;             // this loader's share of each epoch (the whole epoch by default)
};

// Where a loader stands: `batch` batches of epoch `epoch` have been delivered.
struct LOOM_API LoaderPosition {
  int64_t epoch = 0;
  int64_t batch = 0;
  bool operator==(const LoaderPosition&) const = default;
};

class LOOM_API DataLoader {
  // (assigned, not designated: a designated initializer would warn with -Wextra in users' code)
  static LoaderOptions options_with_batch_size(int64_t batch_size) {
    LoaderOptions options;
    options.batch_size = batch_size;
    return options;
  }

 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options = {});
  // The batch size as the second argument, as PyTorch's DataLoader(dataset, 32): the default
  // options with that batch size. A template so that DataLoader(d, {}) still means the options.
  template <std::integral I>
    requires(!std::same_as<I, bool>)
  DataLoader(std::shared_ptr<const Dataset> dataset, I batch_size)
      : DataLoader(std::move(dataset), options_with_batch_size(static_cast<int64_t>(batch_size))) {}
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;
  DataLoader(DataLoader&&) noexcept;
  DataLoader& operator=(DataLoader&&) noexcept;

  // Batches per epoch.
  int64_t size() const;
  int64_t len() const { return size(); }
  const LoaderOptions& options() const;
  const std::shared_ptr<const Dataset>& dataset() const;

  // The next batch of the current epoch; at the end of the epoch returns std::nullopt once and
  // moves to the start of the next epoch.
  std::optional<Batch> next();

  LoaderPosition position() const;
  // Stops any workers and continues from `pos` (0 <= pos.batch <= size()).
  void set_position(LoaderPosition pos);
  void set_epoch(int64_t epoch) { set_position({epoch, 0}); }

  // The example order of an epoch (a permutation when shuffling; this loader's shard of it)
  // and the indices of one batch.
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  std::vector<int64_t> batch_indices(int64_t epoch, int64_t batch) const;
  // Builds batch `batch` of epoch `epoch` directly in the calling thread (what next() returns).
  Batch make_batch(int64_t epoch, int64_t batch) const;
  // The seed of the Generator the transform of that batch draws from.
  uint64_t batch_seed(int64_t epoch, int64_t batch) const;
  // Batches built and waiting for the consumer (diagnostics and tests).
  int64_t ready_count() const;

  // Range-for over the rest of the current epoch.
  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    explicit Iterator(DataLoader* loader) : loader_(loader), current_(loader->next()) {}
    const Batch& operator*() const { return *current_; }
    const Batch* operator->() const { return &*current_; }
    Iterator& operator++() {
      current_ = loader_->next();
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return !current_.has_value(); }

   private:
    DataLoader* loader_ = nullptr;
    std::optional<Batch> current_;
  };
  Iterator begin() { return Iterator(this); }
  std::default_sentinel_t end() { return std::default_sentinel; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::data
