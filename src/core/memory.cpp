#include "loom/core/memory.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/parallel.h"

// Under AddressSanitizer the parts of a step arena's buffer that no block holds are poisoned,
// so that a read or write there is reported as it would be for a freed block of its own.
#if defined(__SANITIZE_ADDRESS__)
#define LOOM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LOOM_ASAN 1
#endif
#endif
#ifdef LOOM_ASAN
#include <sanitizer/asan_interface.h>
#define LOOM_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define LOOM_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define LOOM_POISON(p, n) ((void)(p), (void)(n))
#define LOOM_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace loom {

// One reserved buffer of a StepArena: the blocks in use in it, by offset. Freed when retired (its
// arena replanned or gone) and empty.
struct ArenaBuffer {
  char* base = nullptr;
  size_t size = 0;
  std::map<size_t, size_t> live;  // offset -> bytes of each block in use
  bool retired = false;
};

// Every field is guarded by the CPU allocator's mutex.
struct StepArena::Impl {
  struct Block {
    size_t size = 0;
    int64_t born = 0, died = -1;  // recording clock; died -1: outlived its scope (not planned)
  };
  bool in_scope = false, recording = false, record_next = false;
  int64_t clock = 0;
  std::vector<Block> blocks;                      // the recording, in allocation order
  std::unordered_map<void*, size_t> open;         // recorded blocks in use: pointer -> index
  std::shared_ptr<ArenaBuffer> buffer;            // the plan's buffer
  std::unordered_map<size_t, std::vector<int64_t>> places;  // per size, in recorded order: offset or -1
  std::unordered_map<size_t, size_t> next;        // per size: allocations of it so far in this scope
  int64_t stale = 0;                              // consecutive scopes that mostly missed
  Stats stats;
};

namespace {

thread_local StepArena::Impl* t_arena = nullptr;

// Places blocks (size, born, died) in one buffer: largest first, each at the lowest offset
// where it overlaps no placed block whose lifetime overlaps its own. Returns the offsets
// (-1 for blocks that are not planned) and the buffer's size.
std::pair<std::vector<int64_t>, size_t> place_blocks(const std::vector<StepArena::Impl::Block>& blocks) {
  std::vector<int64_t> offset(blocks.size(), -1);
  std::vector<size_t> order;
  for (size_t i = 0; i < blocks.size(); ++i)
    if (blocks[i].died >= 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return blocks[a].size > blocks[b].size; });
  std::vector<size_t> placed;
  std::vector<std::pair<size_t, size_t>> taken;  // (offset, end) of the placed blocks live with this one
  size_t total = 0;
  for (size_t i : order) {
    const auto& b = blocks[i];
    taken.clear();
    for (size_t j : placed)
      if (blocks[j].born < b.died && b.born < blocks[j].died)
        taken.emplace_back(static_cast<size_t>(offset[j]), static_cast<size_t>(offset[j]) + blocks[j].size);
    std::sort(taken.begin(), taken.end());
    size_t at = 0;
    for (const auto& [from, to] : taken) {
      if (from >= at + b.size) break;
      at = std::max(at, to);
    }
    offset[i] = static_cast<int64_t>(at);
    total = std::max(total, at + b.size);
    placed.push_back(i);
  }
  return {offset, total};
}

// The most bytes of planned blocks live at once in the recording.
int64_t recorded_peak(const std::vector<StepArena::Impl::Block>& blocks) {
  std::vector<std::pair<int64_t, int64_t>> events;  // (time, +bytes / -bytes)
  for (const auto& b : blocks)
    if (b.died >= 0) {
      events.emplace_back(b.born, static_cast<int64_t>(b.size));
      events.emplace_back(b.died, -static_cast<int64_t>(b.size));
    }
  std::sort(events.begin(), events.end());
  int64_t live = 0, peak = 0;
  for (const auto& e : events) peak = std::max(peak, live += e.second);
  return peak;
}

// The allocator's lock. Its critical sections are a few map and counter updates, and every
// tensor takes it twice (allocate, deallocate): std::mutex's unlock is an atomic
// read-modify-write, this one's a plain store. A waiter spins briefly, then yields, so that a
// holder that was preempted or is inside the system allocator gets its core back.
class SpinLock {
 public:
  void lock() {
    int spins = 0;
    while (held_.exchange(true, std::memory_order_acquire))
      while (held_.load(std::memory_order_relaxed)) {
        if (++spins > 64) std::this_thread::yield();
#if defined(__x86_64__) || defined(__i386__)
        else __builtin_ia32_pause();
#endif
      }
  }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

// CPU allocator with a cache of freed blocks keyed by rounded size: steady-state training
// reallocates the same sizes every step, and reuse avoids page faults on large blocks.
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr int64_t kMaxCachedBytes = int64_t(1) << 30;

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    const size_t size = round_size(nbytes);
    std::lock_guard<SpinLock> lock(mu_);
    if (stats_.limit_bytes >= 0 && stats_.current_bytes + static_cast<int64_t>(size) > stats_.limit_bytes) {
      release_cache_locked();
      throw OutOfMemoryError("allocate on cpu: requested " + std::to_string(size) + " bytes with " +
                             std::to_string(stats_.current_bytes) + " bytes in use and a limit of " +
                             std::to_string(stats_.limit_bytes) +
                             " bytes; free tensors or raise the limit with set_memory_limit");
    }
    // not inside a split parallel_for: which chunks this thread takes, and so what it
    // allocates, varies from run to run
    StepArena::Impl* arena = t_arena && !in_parallel_region() ? t_arena : nullptr;
    void* p = arena ? from_arena_locked(*arena, size) : nullptr;
    if (p) {
      account_locked(size);
      return p;
    }
    std::vector<void*>* cached = cached_blocks(size);
    if (cached && !cached->empty()) {
      p = cached->back();
      cached->pop_back();
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
    if (arena && arena->recording) {
      arena->open[p] = arena->blocks.size();
      arena->blocks.push_back({size, ++arena->clock, -1});
    }
    account_locked(size);
    return p;
  }

  void deallocate(void* ptr, size_t nbytes) override {
    if (!ptr) return;
    const size_t size = round_size(nbytes);
    std::lock_guard<SpinLock> lock(mu_);
    stats_.current_bytes -= static_cast<int64_t>(size);
    for (size_t i = 0; i < buffers_.size(); ++i) {
      ArenaBuffer& b = *buffers_[i];
      if (static_cast<char*>(ptr) >= b.base && static_cast<char*>(ptr) < b.base + b.size) {
        b.live.erase(static_cast<size_t>(static_cast<char*>(ptr) - b.base));
        LOOM_POISON(ptr, size);
        if (b.retired && b.live.empty()) drop_buffer_locked(i);
        return;
      }
    }
    for (StepArena::Impl* a : recording_) {
      auto it = a->open.find(ptr);
      if (it != a->open.end()) {
        a->blocks[it->second].died = ++a->clock;
        a->open.erase(it);
        break;
      }
    }
    const bool over_limit = stats_.limit_bytes >= 0 &&
                            stats_.current_bytes + stats_.cached_bytes + static_cast<int64_t>(size) > stats_.limit_bytes;
    if (stats_.cached_bytes + static_cast<int64_t>(size) > kMaxCachedBytes || over_limit) {
      std::free(ptr);
      return;
    }
    blocks_for(size).push_back(ptr);
    stats_.cached_bytes += static_cast<int64_t>(size);
  }

  MemoryStats stats() {
    std::lock_guard<SpinLock> lock(mu_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<SpinLock> lock(mu_);
    stats_.peak_bytes = stats_.current_bytes;
  }
  void set_limit(int64_t bytes) {
    std::lock_guard<SpinLock> lock(mu_);
    stats_.limit_bytes = bytes < 0 ? -1 : bytes;
    if (stats_.limit_bytes >= 0) release_cache_locked();
  }
  void empty() {
    std::lock_guard<SpinLock> lock(mu_);
    release_cache_locked();
    // the memory plans' buffers that no block uses now: their arenas keep the plan and reserve
    // the buffer again on their next scope (a retired one is never used again)
    for (size_t i = buffers_.size(); i-- > 0;)
      if (buffers_[i]->live.empty()) {
        const std::shared_ptr<ArenaBuffer> b = buffers_[i];
        drop_buffer_locked(i);
        b->base = nullptr;
      }
  }

  // StepArena's scopes: the first runs as usual, the second records (and so does any after two
  // that mostly missed), the others replay the plan.
  // Returns false (and opens nothing) when one is open already and `if_free`.
  bool begin_scope(StepArena::Impl& a, bool if_free) {
    std::lock_guard<SpinLock> lock(mu_);
    if (a.in_scope || t_arena) {
      if (if_free) return false;
      throw ValueError("StepArena::Scope: a scope is open already (on this arena or this thread); one at a time");
    }
    a.in_scope = true;
    if (a.buffer && !a.buffer->base && stats_.limit_bytes < 0) reserve_locked(a.buffer);  // released by empty_cache()
    a.recording = a.stats.scopes == 1 || a.record_next;
    a.record_next = false;
    a.stats.served = a.stats.missed = 0;
    a.next.clear();
    if (a.recording) {
      a.blocks.clear();
      a.open.clear();
      a.clock = 0;
      recording_.push_back(&a);
    }
    return true;
  }

  void end_scope(StepArena::Impl& a) {
    std::vector<StepArena::Impl::Block> blocks;
    {
      std::lock_guard<SpinLock> lock(mu_);
      a.in_scope = false;
      ++a.stats.scopes;
      if (!a.recording) {
        a.stale = a.stats.missed > a.stats.served ? a.stale + 1 : 0;
        if (a.stale >= 2) a.record_next = true, a.stale = 0;
        return;
      }
      a.recording = false;
      ++a.stats.recordings;
      recording_.erase(std::find(recording_.begin(), recording_.end(), &a));
      a.open.clear();  // blocks still in use outlive the scope: not planned
      blocks.swap(a.blocks);
    }
    // planning is quadratic in the blocks: past this many, no plan
    constexpr size_t kMaxBlocks = 20000;
    std::vector<int64_t> offsets;
    size_t total = 0;
    if (blocks.size() <= kMaxBlocks) std::tie(offsets, total) = place_blocks(blocks);
    const int64_t peak = recorded_peak(blocks);
    std::lock_guard<SpinLock> lock(mu_);
    retire_locked(a);
    a.places.clear();
    a.stats.reserved_bytes = a.stats.planned_blocks = 0;
    a.stats.recorded_peak_bytes = peak;
    total = (total + 4095) / 4096 * 4096;
    if (total == 0 || stats_.limit_bytes >= 0) return;
    auto buffer = std::make_shared<ArenaBuffer>();
    buffer->size = total;
    if (!reserve_locked(buffer)) return;  // no plan: every allocation goes to the allocator
    a.buffer = buffer;
    for (size_t i = 0; i < blocks.size(); ++i) {
      a.places[blocks[i].size].push_back(offsets[i]);
      if (offsets[i] < 0) continue;
      ++a.stats.planned_blocks;
      // the recorded block went back to the cache, where nothing will ask for it again
      std::vector<void*>* cached = cached_blocks(blocks[i].size);
      if (cached && !cached->empty()) {
        std::free(cached->back());
        cached->pop_back();
        stats_.cached_bytes -= static_cast<int64_t>(blocks[i].size);
      }
    }
    a.stats.reserved_bytes = static_cast<int64_t>(total);
  }

  void release(StepArena::Impl& a) {
    std::lock_guard<SpinLock> lock(mu_);
    auto it = std::find(recording_.begin(), recording_.end(), &a);
    if (it != recording_.end()) recording_.erase(it);
    retire_locked(a);
  }

  StepArena::Stats arena_stats(const StepArena::Impl& a) {
    std::lock_guard<SpinLock> lock(mu_);
    return a.stats;
  }

 private:
  void account_locked(size_t size) {
    stats_.current_bytes += static_cast<int64_t>(size);
    if (stats_.current_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.current_bytes;
    ++stats_.allocations;
  }

  // The recorded place of this scope's next allocation of `size`, if it is planned and free.
  void* from_arena_locked(StepArena::Impl& a, size_t size) {
    if (!a.buffer || !a.buffer->base || a.recording) return nullptr;
    auto it = a.places.find(size);
    const size_t k = a.next[size]++;
    if (it == a.places.end() || k >= it->second.size()) {
      ++a.stats.missed;  // nothing of this size recorded here: another shape
      return nullptr;
    }
    if (it->second[k] < 0) return nullptr;  // outlived its recorded scope: not planned
    const size_t at = static_cast<size_t>(it->second[k]);
    auto& live = a.buffer->live;
    auto after = live.lower_bound(at);
    const bool held = (after != live.end() && after->first < at + size) ||
                      (after != live.begin() && std::prev(after)->first + std::prev(after)->second > at);
    if (held) {
      ++a.stats.missed;  // a block that lives longer than recorded still holds the place
      return nullptr;
    }
    live.emplace(at, size);
    ++a.stats.served;
    LOOM_UNPOISON(a.buffer->base + at, size);
    return a.buffer->base + at;
  }

  void retire_locked(StepArena::Impl& a) {
    if (!a.buffer) return;
    a.buffer->retired = true;
    if (a.buffer->live.empty())
      for (size_t i = 0; i < buffers_.size(); ++i)
        if (buffers_[i] == a.buffer) drop_buffer_locked(i);
    a.buffer.reset();
  }

  // Allocates b's bytes (poisoned) and lists it; false when the system refuses.
  bool reserve_locked(const std::shared_ptr<ArenaBuffer>& b) {
    b->base = static_cast<char*>(std::aligned_alloc(4096, b->size));
    if (!b->base) return false;
    LOOM_POISON(b->base, b->size);
    buffers_.push_back(b);
    stats_.arena_bytes += static_cast<int64_t>(b->size);
    return true;
  }

  void drop_buffer_locked(size_t i) {
    LOOM_UNPOISON(buffers_[i]->base, buffers_[i]->size);
    std::free(buffers_[i]->base);
    stats_.arena_bytes -= static_cast<int64_t>(buffers_[i]->size);
    buffers_.erase(buffers_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  static size_t round_size(size_t n) {
    const size_t unit = n < 65536 ? kAlignment : 4096;
    return (n + unit - 1) / unit * unit;
  }
  // Small sizes (every multiple of kAlignment below kSmallBytes) have a bin each, found by
  // index instead of a map lookup: most tensors of a tiny model are small.
  static constexpr size_t kSmallBytes = 4096;
  std::vector<void*>* cached_blocks(size_t size) {
    if (size < kSmallBytes) return &small_[size / kAlignment];
    auto it = cache_.find(size);
    return it == cache_.end() ? nullptr : &it->second;
  }
  std::vector<void*>& blocks_for(size_t size) { return size < kSmallBytes ? small_[size / kAlignment] : cache_[size]; }
  void release_cache_locked() {
    for (auto& [size, blocks] : cache_)
      for (void* p : blocks) std::free(p);
    cache_.clear();
    for (auto& blocks : small_) {
      for (void* p : blocks) std::free(p);
      blocks.clear();
    }
    stats_.cached_bytes = 0;
  }

  SpinLock mu_;
  std::map<size_t, std::vector<void*>> cache_;                // sizes from kSmallBytes
  std::array<std::vector<void*>, kSmallBytes / kAlignment> small_;  // sizes below, by size / kAlignment
  std::vector<std::shared_ptr<ArenaBuffer>> buffers_;  // every step arena's buffer not yet freed
  std::vector<StepArena::Impl*> recording_;            // arenas in a recording scope
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

StepArena::StepArena() : impl_(std::make_shared<Impl>()) {}
StepArena::~StepArena() { cpu_allocator().release(*impl_); }
StepArena::Stats StepArena::stats() const { return cpu_allocator().arena_stats(*impl_); }

StepArena::Scope::Scope(StepArena& arena) : arena_(arena), owns_(cpu_allocator().begin_scope(*arena.impl_, false)) {
  t_arena = arena.impl_.get();
}

StepArena::Scope::Scope(StepArena& arena, IfFree) : arena_(arena), owns_(cpu_allocator().begin_scope(*arena.impl_, true)) {
  if (owns_) t_arena = arena.impl_.get();
}

StepArena::Scope::~Scope() {
  if (!owns_) return;
  t_arena = nullptr;
  cpu_allocator().end_scope(*arena_.impl_);
}

}  // namespace loom
