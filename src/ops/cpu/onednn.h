#pragma once
// What every oneDNN call of the CPU backend shares (conv_onednn.cpp, pool_onednn.cpp): one
// engine, a stream per calling thread, oneDNN's OpenMP team sized to Loom's thread count, and
// scratch buffers from Loom's caching allocator. Internal: include only from src/ops/cpu.
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>
#include <oneapi/dnnl/dnnl.hpp>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom::cpu::onednn {

dnnl::engine& engine();
dnnl::stream& thread_stream();

// Sets the calling thread's OpenMP thread count (oneDNN's team) to n, or to
// loom::get_num_threads(). A primitive takes the count of the thread that creates it and runs
// with it wherever it runs, so plan caches key on it and plans are built after setting it.
void use_omp_threads(int n);
void follow_loom_threads();

// A process-wide cache of built plans (primitives and what goes with them) by key; bounded,
// cleared when full (plans are cheap to rebuild). Two threads missing the same key may both
// build it; the first one stored wins.
template <typename Plan>
class PlanCache {
 public:
  std::shared_ptr<const Plan> get(const std::string& key, const std::function<std::shared_ptr<const Plan>()>& build) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = plans_.find(key);
      if (it != plans_.end()) return it->second;
    }
    std::shared_ptr<const Plan> plan = build();
    std::lock_guard<std::mutex> lock(mu_);
    if (plans_.size() >= kMaxPlans) plans_.clear();
    return plans_.emplace(key, plan).first->second;
  }

 private:
  static constexpr size_t kMaxPlans = 256;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const Plan>> plans_;
};

// Tensors prepared from others once and reused while those stay unchanged: weights reordered to
// a primitive's layout (and batch norm folded in, for the fused inference entry). An entry is
// found by a tag (the layout it was made for) and its sources' identity (storage,
// offset) and storage versions; every in-place write bumps the version (detail::begin_write,
// the optimizers), so a changed weight is prepared again, never served stale. Entries whose
// source storage died or moved on are dropped when a new entry comes in; the cache holds at
// most kMaxBytes (a larger entry is used once and not kept). Thread-safe; two threads missing
// the same entry may both build it.
class LOOM_INTERNAL PreparedCache {
 public:
  static constexpr size_t kMaxBytes = size_t{512} << 20;
  using Build = std::function<std::vector<Tensor>()>;
  std::vector<Tensor> get(const std::string& tag, const std::vector<Tensor>& sources, const Build& build);
  size_t entries();
  size_t bytes();
  void clear();

 private:
  struct Source {
    std::weak_ptr<Storage> storage;
    int64_t offset = 0;
    uint64_t version = 0;
  };
  struct Entry {
    std::vector<Source> sources;
    std::vector<Tensor> value;
    size_t bytes = 0;
  };
  static bool current(const Entry& e);
  void drop_stale();  // entries of dead or changed sources; mu_ held
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  size_t bytes_ = 0;
};

// The process-wide cache of prepared convolution weights.
LOOM_INTERNAL PreparedCache& prepared_weights();

// How many slices for_each_batch_slice cuts a batch of n into (1: one call on an OpenMP team).
int batch_slices(int64_t n);

// Runs f(slice, n0, n1, omp_threads) over slices of a batch [0, n): with t = get_num_threads()
// > 1 and n >= t, t near-equal slices (numbered 0 .. t-1) run in Loom's pool, each on a one-thread OpenMP team, so
// that no OpenMP workers spin beside Loom's (measured: libgomp's spinning workers made the
// 2-thread CNN training step slower than the 1-thread one); otherwise one call with an OpenMP
// team of t. omp_threads goes into plan-cache keys. Returns false when any call did.
bool for_each_batch_slice(int64_t n,
                          const std::function<bool(int slice, int64_t n0, int64_t n1, int omp_threads)>& f);

// Primitive attributes with a user-managed scratchpad: Debian's libdnnl keeps its own
// scratchpad in one global buffer, which is not safe for primitives running concurrently on
// several threads (as the batch slices do); every execution passes a staging() scratchpad.
const dnnl::primitive_attr& user_scratchpad();

// A buffer for a memory descriptor from Loom's caching allocator (oneDNN would otherwise
// allocate, and page-fault in, fresh memory on every call); `keep` holds it alive.
dnnl::memory staging(const dnnl::memory::desc& md, std::vector<Tensor>& keep);

}  // namespace loom::cpu::onednn
