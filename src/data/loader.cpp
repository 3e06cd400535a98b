#include "loom/data/loader.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include "loom/core/grad_mode.h"
#include "loom/ops/random.h"

namespace loom::data {

namespace {

constexpr uint64_t kShuffleDomain = 0x53485546464c4531ull;    // "SHUFFLE1"
constexpr uint64_t kTransformDomain = 0x5452414e53464f52ull;  // "TRANSFOR"

// Batches [begin, end) of one epoch built by worker threads, delivered in order.
class EpochRun {
 public:
  // build(b) makes batch b; it must stay valid while the run lives.
  EpochRun(std::function<Batch(int64_t)> build, int64_t begin, int64_t end, int n_jobs, int64_t window)
      : build_(std::move(build)), next_claim_(begin), next_deliver_(begin), end_(end), window_(window) {
    workers_.reserve(static_cast<size_t>(n_jobs));
    for (int i = 0; i < n_jobs; ++i) workers_.emplace_back([this] { work(); });
  }

  ~EpochRun() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_work_.notify_all();
    for (auto& t : workers_) t.join();
  }

  // Waits for batch next_deliver_; rethrows its exception if building it failed.
  Batch take() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_ready_.wait(lock, [&] { return ready_.count(next_deliver_) != 0; });
    auto it = ready_.find(next_deliver_);
    Slot slot = std::move(it->second);
    ready_.erase(it);
    if (slot.error) std::rethrow_exception(slot.error);
    ++next_deliver_;
    lock.unlock();
    cv_work_.notify_all();
    return std::move(slot.batch);
  }

  int64_t ready_count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(ready_.size());
  }

 private:
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };

  void work() {
    NoGrad no_grad;
    for (;;) {
      int64_t b;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_work_.wait(lock, [&] { return stop_ || next_claim_ >= end_ || next_claim_ < next_deliver_ + window_; });
        if (stop_ || next_claim_ >= end_) return;
        b = next_claim_++;
      }
      Slot slot;
      try {
        slot.batch = build_(b);
      } catch (...) {
        slot.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        ready_.emplace(b, std::move(slot));
      }
      cv_ready_.notify_one();
    }
  }

  const std::function<Batch(int64_t)> build_;
  mutable std::mutex mu_;
  std::condition_variable cv_work_, cv_ready_;
  int64_t next_claim_, next_deliver_;
  const int64_t end_, window_;
  bool stop_ = false;
  std::map<int64_t, Slot> ready_;
  std::vector<std::thread> workers_;
};

// Examples per epoch of one shard of a dataset of n (LoaderOptions::shard).
int64_t shard_size(int64_t n, const Shard& sh) { return sh.drop_tail ? n / sh.count : (n + sh.count - 1) / sh.count; }

}  // namespace

// Everything the workers read lives here, behind a stable address (the loader may move).
struct DataLoader::Impl {
  std::shared_ptr<const Dataset> dataset;
  LoaderOptions options;
  int64_t n_batches = 0;
  LoaderPosition pos;
  std::unique_ptr<EpochRun> run;  // workers of the current epoch, started by next()

  // The order of the last epoch asked for, shared by the workers (a permutation of 60,000
  // indices per batch would cost more than the batch).
  mutable std::mutex order_mu;
  mutable int64_t order_epoch = -1;
  mutable std::shared_ptr<const std::vector<int64_t>> order;

  // The workers read the members above: stop them before any member goes.
  ~Impl() { run.reset(); }

  std::vector<int64_t> epoch_order(int64_t epoch) const;
  std::shared_ptr<const std::vector<int64_t>> cached_order(int64_t epoch) const;
  std::vector<int64_t> batch_indices(int64_t epoch, int64_t batch) const;
  uint64_t batch_seed(int64_t epoch, int64_t batch) const;
  Batch make_batch(int64_t epoch, int64_t batch) const;
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options) : impl_(std::make_unique<Impl>()) {
  if (!dataset) throw ValueError("DataLoader: the dataset is null");
  if (options.batch_size < 1) throw ValueError("DataLoader: batch_size must be >= 1, got " + std::to_string(options.batch_size));
  if (options.n_jobs < 0) throw ValueError("DataLoader: n_jobs must be >= 0, got " + std::to_string(options.n_jobs));
  if (options.prefetch < 0) throw ValueError("DataLoader: prefetch must be >= 0, got " + std::to_string(options.prefetch));
  const Shard& sh = options.shard;
  if (sh.count < 1 || sh.index < 0 || sh.index >= sh.count)
    throw ValueError("DataLoader: shard " + std::to_string(sh.index) + " of " + std::to_string(sh.count) +
                     " is invalid (valid: count >= 1 and index in [0, count))");
  const int64_t n = shard_size(dataset->size(), sh);
  impl_->n_batches = options.drop_last ? n / options.batch_size : (n + options.batch_size - 1) / options.batch_size;
  impl_->dataset = std::move(dataset);
  impl_->options = std::move(options);
}

DataLoader::~DataLoader() = default;  // EpochRun's destructor stops and joins the workers
DataLoader::DataLoader(DataLoader&&) noexcept = default;
DataLoader& DataLoader::operator=(DataLoader&&) noexcept = default;

int64_t DataLoader::size() const { return impl_->n_batches; }
const LoaderOptions& DataLoader::options() const { return impl_->options; }
const std::shared_ptr<const Dataset>& DataLoader::dataset() const { return impl_->dataset; }
LoaderPosition DataLoader::position() const { return impl_->pos; }

void DataLoader::set_position(LoaderPosition pos) {
  if (pos.epoch < 0 || pos.batch < 0 || pos.batch > impl_->n_batches)
    throw ValueError("DataLoader::set_position: (epoch " + std::to_string(pos.epoch) + ", batch " + std::to_string(pos.batch) +
                     ") is invalid (valid: epoch >= 0 and batch in [0, " + std::to_string(impl_->n_batches) + "])");
  impl_->run.reset();
  impl_->pos = pos;
}

std::vector<int64_t> DataLoader::Impl::epoch_order(int64_t epoch) const {
  const int64_t n = dataset->size();
  std::vector<int64_t> v(static_cast<size_t>(n));
  if (!options.shuffle) {
    std::iota(v.begin(), v.end(), 0);
  } else {
    Generator gen(Generator::mix(options.seed ^ kShuffleDomain, static_cast<uint64_t>(epoch)));
    v = permutation(n, Device::cpu(), &gen).to_vector<int64_t>();
  }
  const Shard& sh = options.shard;
  if (sh.count == 1) return v;
  // positions index, index + count, ... of the order padded (cyclically) or cut to a multiple
  // of count
  const int64_t len = shard_size(n, sh);
  std::vector<int64_t> mine(static_cast<size_t>(len));
  for (int64_t j = 0; j < len; ++j) mine[static_cast<size_t>(j)] = v[static_cast<size_t>((sh.index + j * sh.count) % n)];
  return mine;
}

std::vector<int64_t> DataLoader::Impl::batch_indices(int64_t epoch, int64_t batch) const {
  if (batch < 0 || batch >= n_batches)
    throw IndexError("DataLoader: batch " + std::to_string(batch) + " is out of range (an epoch has " +
                     std::to_string(n_batches) + " batches)");
  const std::shared_ptr<const std::vector<int64_t>> o = cached_order(epoch);
  const int64_t bs = options.batch_size;
  const int64_t begin = batch * bs, end = std::min<int64_t>(begin + bs, static_cast<int64_t>(o->size()));
  return std::vector<int64_t>(o->begin() + begin, o->begin() + end);
}

std::shared_ptr<const std::vector<int64_t>> DataLoader::Impl::cached_order(int64_t epoch) const {
  std::lock_guard<std::mutex> lock(order_mu);
  if (!order || order_epoch != epoch) {
    order = std::make_shared<const std::vector<int64_t>>(epoch_order(epoch));
    order_epoch = epoch;
  }
  return order;
}

uint64_t DataLoader::Impl::batch_seed(int64_t epoch, int64_t batch) const {
  const uint64_t seed = Generator::mix(Generator::mix(options.seed ^ kTransformDomain, static_cast<uint64_t>(epoch)),
                                       static_cast<uint64_t>(batch));
  // shards draw different transforms for their batch of the same index
  return options.shard.count == 1 ? seed : Generator::mix(seed, static_cast<uint64_t>(options.shard.index));
}

Batch DataLoader::Impl::make_batch(int64_t epoch, int64_t batch) const {
  NoGrad no_grad;
  Batch b = dataset->get_batch(batch_indices(epoch, batch));
  if (!options.transform.is_identity()) {
    Generator gen(batch_seed(epoch, batch));
    b = options.transform(std::move(b), gen);
  }
  return b;
}

std::vector<int64_t> DataLoader::epoch_order(int64_t epoch) const { return impl_->epoch_order(epoch); }
std::vector<int64_t> DataLoader::batch_indices(int64_t epoch, int64_t batch) const { return impl_->batch_indices(epoch, batch); }
uint64_t DataLoader::batch_seed(int64_t epoch, int64_t batch) const { return impl_->batch_seed(epoch, batch); }
Batch DataLoader::make_batch(int64_t epoch, int64_t batch) const { return impl_->make_batch(epoch, batch); }

int64_t DataLoader::ready_count() const { return impl_->run ? impl_->run->ready_count() : 0; }

std::optional<Batch> DataLoader::next() {
  Impl& s = *impl_;
  if (s.pos.batch >= s.n_batches) {  // end of the epoch: report it once, then move on
    s.run.reset();
    s.pos = {s.pos.epoch + 1, 0};
    return std::nullopt;
  }
  Batch b;
  if (s.options.n_jobs == 0) {
    b = make_batch(s.pos.epoch, s.pos.batch);
  } else {
    if (!s.run) {
      const int64_t window = std::max<int64_t>(s.options.prefetch, s.options.n_jobs);
      const Impl* self = &s;
      const int64_t epoch = s.pos.epoch;
      s.run = std::make_unique<EpochRun>([self, epoch](int64_t b) { return self->make_batch(epoch, b); }, s.pos.batch,
                                         s.n_batches, s.options.n_jobs, window);
    }
    try {
      b = s.run->take();
    } catch (...) {
      s.run.reset();  // the position stays at the failed batch; a retry rebuilds it
      throw;
    }
  }
  ++s.pos.batch;
  if (s.pos.batch == s.n_batches) s.run.reset();  // every batch delivered: join the workers now
  return b;
}

}  // namespace loom::data
