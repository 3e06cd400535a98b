#pragma once
// Memory accounting per device: live bytes, the peak since the last reset, and bytes kept in
// the allocator's cache for reuse. A limit, when set, bounds live + requested bytes.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "loom/core/api.h"
#include "loom/core/device.h"

namespace loom {

struct LOOM_API MemoryStats {
  int64_t current_bytes = 0;   // held by live tensors
  int64_t peak_bytes = 0;      // highest current_bytes since the last reset
  int64_t cached_bytes = 0;    // freed blocks kept for reuse (not counted in current)
  int64_t limit_bytes = -1;    // -1: no limit
  int64_t allocations = 0;     // number of allocate calls served
  int64_t system_allocations = 0;  // of them, served by the system (not from the cache)
  int64_t arena_bytes = 0;     // reserved by step arenas (their blocks in use count in current_bytes)
};

LOOM_API MemoryStats memory_stats(Device device = default_device());
LOOM_API void reset_peak_memory(Device device = default_device());
// Limits live bytes on the device; -1 removes the limit. Allocations beyond it throw
// OutOfMemoryError naming requested, current and limit bytes.
LOOM_API void set_memory_limit(int64_t bytes, Device device = default_device());
// Returns cached blocks to the system, and the buffers of memory plans (StepArena: training
// steps, inference plans) that no block uses at the moment; each plan reserves its buffer again
// on its next scope.
LOOM_API void empty_cache(Device device = default_device());

// A memory plan for a computation that repeats with the same allocations, as a training step
// does. The first scopes record the sizes and lifetimes of the blocks that the calling thread
// allocates and frees within them (outside the chunks of a parallel_for it takes); the arena then reserves one buffer in which blocks never
// live at the same time share bytes (placed largest first, each at the lowest offset free
// for its whole lifetime), and later scopes serve the same allocations from it: the k-th
// allocation of a size gets the place of the recording's k-th of that size. Blocks that
// outlived their recorded scope (gradients, results) are not planned and come from the
// allocator as usual; so does an allocation that matches nothing recorded or whose place is
// still held by a block in use, so results never depend on the plan. Scopes that mostly miss
// twice in a row (the shapes changed for good) record again. Not with a memory limit set, whose
// accounting the reservation would escape. CPU only.
class LOOM_API StepArena {
 public:
  StepArena();
  ~StepArena();  // the buffer is freed once the last block served from it dies
  StepArena(const StepArena&) = delete;
  StepArena& operator=(const StepArena&) = delete;

  // While alive, the calling thread's CPU allocations go through the arena. One at a time per
  // arena and per thread: a second throws ValueError, or with `if_free` opens nothing (a plan
  // run on two threads at once, or inside a training step's scope), which owns() tells.
  struct IfFree {};
  static constexpr IfFree if_free{};
  class Scope {
   public:
    explicit Scope(StepArena& arena);
    Scope(StepArena& arena, IfFree);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    bool owns() const { return owns_; }

   private:
    StepArena& arena_;
    bool owns_ = false;
  };

  struct Stats {
    int64_t scopes = 0;            // scopes run
    int64_t recordings = 0;        // of them, recording (the first two, and after a change of shapes)
    int64_t reserved_bytes = 0;    // the buffer (0: nothing planned yet)
    int64_t planned_blocks = 0;    // blocks placed in it
    int64_t recorded_peak_bytes = 0;  // the most bytes of planned blocks live at once when recorded
    int64_t served = 0;            // the last scope's allocations served from the buffer
    int64_t missed = 0;            // the last scope's allocations that went to the allocator
  };
  Stats stats() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

class LOOM_API Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
};

LOOM_API Allocator& allocator_for(Device device);

}  // namespace loom
