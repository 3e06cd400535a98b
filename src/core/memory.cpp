#include "loom/core/memory.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "loom/core/error.h"

namespace loom {

namespace {

// CPU allocator with a cache of freed blocks keyed by rounded size: steady-state training
// reallocates the same sizes every step, and reuse avoids page faults on large blocks.
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr int64_t kMaxCachedBytes = int64_t(1) << 30;

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    const size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    if (stats_.limit_bytes >= 0 && stats_.current_bytes + static_cast<int64_t>(size) > stats_.limit_bytes) {
      release_cache_locked();
      throw OutOfMemoryError("allocate on cpu: requested " + std::to_string(size) + " bytes with " +
                             std::to_string(stats_.current_bytes) + " bytes in use and a limit of " +
                             std::to_string(stats_.limit_bytes) +
                             " bytes; free tensors or raise the limit with set_memory_limit");
    }
    void* p = nullptr;
    auto it = cache_.find(size);
    if (it != cache_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= static_cast<int64_t>(size);
    } else {
      p = std::aligned_alloc(kAlignment, size);
      if (!p) {
        release_cache_locked();
        p = std::aligned_alloc(kAlignment, size);
      }
      if (!p)
        throw OutOfMemoryError("allocate on cpu: the system refused " + std::to_string(size) + " bytes (" +
                               std::to_string(stats_.current_bytes) + " bytes in use)");
      ++stats_.system_allocations;
    }
    stats_.current_bytes += static_cast<int64_t>(size);
    if (stats_.current_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.current_bytes;
    ++stats_.allocations;
    return p;
  }

  void deallocate(void* ptr, size_t nbytes) override {
    if (!ptr) return;
    const size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.current_bytes -= static_cast<int64_t>(size);
    const bool over_limit = stats_.limit_bytes >= 0 &&
                            stats_.current_bytes + stats_.cached_bytes + static_cast<int64_t>(size) > stats_.limit_bytes;
    if (stats_.cached_bytes + static_cast<int64_t>(size) > kMaxCachedBytes || over_limit) {
      std::free(ptr);
      return;
    }
    cache_[size].push_back(ptr);
    stats_.cached_bytes += static_cast<int64_t>(size);
  }

  MemoryStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak_bytes = stats_.current_bytes;
  }
  void set_limit(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.limit_bytes = bytes < 0 ? -1 : bytes;
    if (stats_.limit_bytes >= 0) release_cache_locked();
  }
  void empty() {
    std::lock_guard<std::mutex> lock(mu_);
    release_cache_locked();
  }

 private:
  static size_t round_size(size_t n) {
    const size_t unit = n < 65536 ? kAlignment : 4096;
    return (n + unit - 1) / unit * unit;
  }
  void release_cache_locked() {
    for (auto& [size, blocks] : cache_)
      for (void* p : blocks) std::free(p);
    cache_.clear();
    stats_.cached_bytes = 0;
  }

  std::mutex mu_;
  std::map<size_t, std::vector<void*>> cache_;
  MemoryStats stats_;
};

CpuAllocator& cpu_allocator() {
  static CpuAllocator* a = new CpuAllocator();  // never destroyed: tensors may outlive statics
  return *a;
}

CpuAllocator& require_cpu(Device d, const char* what) {
  if (d.type != DeviceType::CPU)
    throw DeviceError(std::string(what) + ": device " + d.str() +
                      " is not available in this build (valid: cpu:0)");
  return cpu_allocator();
}

}  // namespace

Allocator& allocator_for(Device d) { return require_cpu(d, "allocate"); }
MemoryStats memory_stats(Device d) { return require_cpu(d, "memory_stats").stats(); }
void reset_peak_memory(Device d) { require_cpu(d, "reset_peak_memory").reset_peak(); }
void set_memory_limit(int64_t bytes, Device d) { require_cpu(d, "set_memory_limit").set_limit(bytes); }
void empty_cache(Device d) { require_cpu(d, "empty_cache").empty(); }

}  // namespace loom
