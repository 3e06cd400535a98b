#pragma once
// Memory accounting per device: live bytes, the peak since the last reset, and bytes kept in
// the allocator's cache for reuse. A limit, when set, bounds live + requested bytes.
#include <cstddef>
#include <cstdint>

#include "loom/core/device.h"

namespace loom {

struct MemoryStats {
  int64_t current_bytes = 0;   // held by live tensors
  int64_t peak_bytes = 0;      // highest current_bytes since the last reset
  int64_t cached_bytes = 0;    // freed blocks kept for reuse (not counted in current)
  int64_t limit_bytes = -1;    // -1: no limit
  int64_t allocations = 0;     // number of allocate calls served
  int64_t system_allocations = 0;  // of them, served by the system (not from the cache)
};

MemoryStats memory_stats(Device device = default_device());
void reset_peak_memory(Device device = default_device());
// Limits live bytes on the device; -1 removes the limit. Allocations beyond it throw
// OutOfMemoryError naming requested, current and limit bytes.
void set_memory_limit(int64_t bytes, Device device = default_device());
// Returns cached blocks to the system.
void empty_cache(Device device = default_device());

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
};

Allocator& allocator_for(Device device);

}  // namespace loom
