// Memory accounting: live bytes, peak, the allocator cache, limits, and that storage is freed
// when the last view of it dies.
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/index.h>
#include <loom/core/memory.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/reduction.h>

#include "unit/common/core_test_util.h"

#include <atomic>
#include <thread>

#if defined(__SANITIZE_ADDRESS__)
#define LOOM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LOOM_TEST_ASAN 1
#endif
#endif
#ifdef LOOM_TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::values;

namespace {

constexpr int64_t kMiB = 1 << 20;

// Removes any memory limit when a test ends, even on failure.
struct LimitGuard {
  ~LimitGuard() { set_memory_limit(-1); }
};

int64_t current() { return memory_stats().current_bytes; }

}  // namespace

TEST(Memory, CurrentCountsLiveTensors) {
  empty_cache();
  const int64_t base = current();
  {
    Tensor x = empty({kMiB / 4}, Float32);  // exactly 1 MiB
    EXPECT_EQ(current() - base, kMiB);
    Tensor y = empty({kMiB / 8}, Float64);
    EXPECT_EQ(current() - base, 2 * kMiB);
  }
  EXPECT_EQ(current(), base);
}

// Threads allocating and freeing at once (the allocator's lock): every byte is counted once,
// no block is handed to two tensors, and the count returns to where it started.
TEST(Memory, ThreadsAllocatingAtOnceKeepTheCountExact) {
  empty_cache();
  const int64_t base = current();
  std::atomic<bool> clash{false};
  auto work = [&](int seed) {
    std::vector<Tensor> held;
    for (int i = 0; i < 20000; ++i) {
      const int64_t n = 1 + (i * 7919 + seed * 104729) % 300;  // sizes shared by both threads
      Tensor t = full({n}, static_cast<float>(seed));
      held.push_back(t);
      if (held.size() > 8) held.erase(held.begin());
      for (const Tensor& h : held)  // a block given out twice would be overwritten by the other thread
        if (h.data<float>()[0] != static_cast<float>(seed) || h.data<float>()[h.numel() - 1] != static_cast<float>(seed))
          clash = true;
    }
  };
  std::thread a(work, 1), b(work, 2);
  a.join();
  b.join();
  EXPECT_FALSE(clash.load());
  EXPECT_EQ(current(), base);
}

TEST(Memory, FreedBlocksAreCachedAndReused) {
  empty_cache();
  const MemoryStats s0 = memory_stats();
  EXPECT_EQ(s0.cached_bytes, 0);
  { Tensor x = empty({kMiB / 4}); }
  const MemoryStats s1 = memory_stats();
  EXPECT_EQ(s1.current_bytes, s0.current_bytes);
  EXPECT_EQ(s1.cached_bytes, kMiB);  // kept for reuse, not counted as current
  {
    Tensor y = empty({kMiB / 4});
    const MemoryStats s2 = memory_stats();
    EXPECT_EQ(s2.cached_bytes, 0);  // the cached block was reused
    EXPECT_EQ(s2.current_bytes, s0.current_bytes + kMiB);
    EXPECT_EQ(s2.allocations, s1.allocations + 1);
  }
  empty_cache();
  EXPECT_EQ(memory_stats().cached_bytes, 0);
}

TEST(Memory, PeakAndReset) {
  empty_cache();
  reset_peak_memory();
  const int64_t base = current();
  EXPECT_EQ(memory_stats().peak_bytes, base);
  {
    Tensor a = empty({kMiB});  // 4 MiB
    Tensor b = empty({kMiB});  // 4 MiB
  }
  EXPECT_EQ(current(), base);
  EXPECT_EQ(memory_stats().peak_bytes, base + 8 * kMiB);
  reset_peak_memory();
  EXPECT_EQ(memory_stats().peak_bytes, base);
  { Tensor c = empty({kMiB / 4}); }
  EXPECT_EQ(memory_stats().peak_bytes, base + kMiB);
  empty_cache();
}

TEST(Memory, StorageLivesUntilTheLastViewDies) {
  empty_cache();
  const int64_t base = current();
  Tensor x = ones({kMiB / 4});
  Tensor v = slice(x, 0, 10, 20);
  Tensor t = x.reshape({512, 512}).T();
  EXPECT_EQ(current() - base, kMiB);
  x = Tensor();
  EXPECT_EQ(current() - base, kMiB);  // v and t still hold the storage
  EXPECT_EQ(v.at({0}), 1.0);
  v = Tensor();
  EXPECT_EQ(current() - base, kMiB);
  t = Tensor();
  EXPECT_EQ(current(), base);
  empty_cache();
}

TEST(Memory, GraphReleasesSavedTensors) {
  empty_cache();
  const int64_t base = current();
  {
    Tensor w = ones({256, 256});
    w.requires_grad_();
    Tensor y = sum(exp(w) * w);
    y.backward();
    EXPECT_TRUE(w.grad().defined());
  }
  EXPECT_EQ(current(), base);
  empty_cache();
}

TEST(Memory, LimitIsHonoured) {
  LimitGuard guard;
  empty_cache();
  const int64_t base = current();
  const int64_t limit = base + 3 * kMiB;
  set_memory_limit(limit);
  EXPECT_EQ(memory_stats().limit_bytes, limit);
  Tensor a = empty({kMiB / 4});  // 1 MiB: fits
  Tensor b = empty({kMiB / 4});  // 2 MiB: fits
  const std::string msg = error_message<OutOfMemoryError>([] { empty({kMiB / 2}); });  // would be 4 MiB
  EXPECT_TRUE(contains_all(msg, {"requested " + std::to_string(2 * kMiB), std::to_string(base + 2 * kMiB),
                                 std::to_string(limit), "set_memory_limit"}))
      << msg;
  EXPECT_EQ(current(), base + 2 * kMiB);  // the failed allocation left nothing behind
  Tensor c = empty({kMiB / 4});          // exactly at the limit: fine
  EXPECT_EQ(current(), limit);
  EXPECT_THROW(empty({16}), OutOfMemoryError);
  c = Tensor();
  set_memory_limit(-1);
  EXPECT_EQ(memory_stats().limit_bytes, -1);
  Tensor big = empty({kMiB});  // no limit any more
  EXPECT_EQ(big.numel(), kMiB);
}

TEST(Memory, ZeroSizedTensorsNeedNoMemory) {
  LimitGuard guard;
  set_memory_limit(current());
  Tensor e = zeros({0, 100});
  EXPECT_EQ(e.numel(), 0);
}

TEST(Memory, FailedOpLeavesInputsUntouched) {
  LimitGuard guard;
  empty_cache();
  Tensor x = full({kMiB / 4}, 1.5);
  Tensor y = full({kMiB / 4}, 2.0);
  set_memory_limit(current() + 1024);
  EXPECT_THROW(x + y, OutOfMemoryError);
  x += y;  // written into x: needs no memory
  x -= y;
  Tensor tail = x.index({Slice(1, None)});
  EXPECT_THROW(tail += x.index({Slice(None, -1)}), OutOfMemoryError);  // partly overlapping: through a result
  EXPECT_THROW(x.index_put_({Slice(0, 10)}, 7.0), OutOfMemoryError);
  EXPECT_THROW(exp(x), OutOfMemoryError);
  set_memory_limit(-1);
  EXPECT_EQ(x.dtype(), Float32);
  EXPECT_EQ(x.shape(), (Shape{kMiB / 4}));
  EXPECT_TRUE(all(x == 1.5).item<bool>());
  EXPECT_TRUE(all(y == 2.0).item<bool>());
  // and a later op succeeds normally
  EXPECT_EQ((x + y).at({5}), 3.5);
}

TEST(Memory, FailedInPlaceOpsOfOtherKindsLeaveTargetsUntouched) {
  Tensor x = tensor<int32_t>({1, 2, 3});
  EXPECT_THROW(x += 0.5, DTypeError);                                  // float result into int
  EXPECT_THROW(x += zeros({2, 3}, Int32), ShapeError);                 // target cannot grow
  EXPECT_THROW(x.index_put_({Slice(), tensor<int64_t>({0, 5})}, 9), IndexError);
  EXPECT_THROW(x.index_put_({tensor<int64_t>({0, 7})}, 9), IndexError);
  EXPECT_THROW(x.copy_(zeros({2})), ShapeError);
  EXPECT_EQ(values<int>(x), (std::vector<int>{1, 2, 3}));
  Tensor w = tensor<float>({1, 2});
  w.requires_grad_();
  EXPECT_THROW(w += 1.0, AutogradError);
  EXPECT_THROW(w.fill_(0.0), AutogradError);
  EXPECT_EQ(values(w), (std::vector<double>{1, 2}));
  EXPECT_FALSE(w.grad().defined());
}

TEST(Memory, CudaStatsAreADeviceError) {
  EXPECT_THROW(memory_stats(Device::cuda()), DeviceError);
  EXPECT_THROW(set_memory_limit(1, Device::cuda()), DeviceError);
}

// StepArena (the memory plan of a repeated step): the first scope runs as usual, the second
// records, later ones serve the recorded blocks from one buffer laid out by their lifetimes.
namespace {

// One "step": blocks of a few sizes with known lifetimes. `kept`, when given, holds the first
// temporary past the point where the recording freed it. Returns a result that outlives the
// scope (as a loss does) and, in `where`, the addresses of t1 and t2 (same size, disjoint lives).
Tensor arena_step(std::vector<const void*>& where, std::vector<Tensor>* kept = nullptr, int64_t n = 1000) {
  Tensor a = empty({n});  // empty and fill_: one allocation each, nothing else
  Tensor b = empty({5 * n});
  Tensor t1 = empty({20 * n});
  t1.fill_(3.0f);
  where.push_back(t1.data_ptr());
  if (kept) kept->push_back(t1);
  t1 = Tensor();
  Tensor t2 = empty({20 * n});  // t1's place when t1 is gone
  t2.fill_(4.0f);
  where.push_back(t2.data_ptr());
  Tensor result = empty({});
  result.fill_(static_cast<float>(a.numel() + b.numel()));
  return result;
}

// One scope of `arena` around arena_step; the result outlives the scope.
Tensor in_scope(StepArena& arena, std::vector<const void*>& where, std::vector<Tensor>* kept = nullptr,
                int64_t n = 1000) {
  where.clear();
  Tensor result;
  {
    StepArena::Scope scope(arena);
    result = arena_step(where, kept, n);
  }
  return result;
}

}  // namespace

TEST(StepArena, ServesTheRecordedBlocksFromOneBufferLaidOutByLifetime) {
  empty_cache();
  const int64_t arena_before = memory_stats().arena_bytes;
  StepArena arena;
  std::vector<const void*> where;
  for (int s = 0; s < 2; ++s) in_scope(arena, where);
  StepArena::Stats st = arena.stats();
  EXPECT_EQ(st.scopes, 2);
  EXPECT_EQ(st.recordings, 1);  // the second scope
  EXPECT_EQ(st.planned_blocks, 4);  // a, b, t1, t2; not the result, which outlived the scope
  // a (4000 -> 4032 bytes), b (20000 -> 20032) and one of t1 / t2 (80000 -> 81920) live at once
  EXPECT_EQ(st.recorded_peak_bytes, 4032 + 20032 + 81920);
  EXPECT_GE(st.reserved_bytes, st.recorded_peak_bytes);
  EXPECT_LT(st.reserved_bytes, st.recorded_peak_bytes + 81920);  // t1 and t2 share their place
  EXPECT_EQ(memory_stats().arena_bytes - arena_before, st.reserved_bytes);
  // the recorded blocks left the allocator's cache, where nothing would ask for them again;
  // the last result (64 bytes) is cached
  EXPECT_EQ(memory_stats().cached_bytes, 64);
  for (int s = 0; s < 3; ++s) {
    const MemoryStats before = memory_stats();
    const Tensor result = in_scope(arena, where);
    const MemoryStats after = memory_stats();
    st = arena.stats();
    EXPECT_EQ(st.served, 4) << "scope " << s;
    EXPECT_EQ(st.missed, 0) << "scope " << s;
    EXPECT_EQ(after.system_allocations, before.system_allocations) << "scope " << s;  // the result: from the cache
    EXPECT_EQ(after.allocations - before.allocations, 5);
    EXPECT_EQ(where[0], where[1]) << "t1 and t2 never live together: one place";
    EXPECT_EQ(result.item<float>(), 6000.0f);
  }
  EXPECT_EQ(arena.stats().recordings, 1);
}

// empty_cache() returns a plan's buffer when no block is in it, keeping the plan: the next scope
// reserves the buffer again and is served from it at once; a buffer with a block in use stays.
TEST(StepArena, EmptyCacheReleasesIdleBuffersAndTheNextScopeReservesThemAgain) {
  empty_cache();
  const int64_t arena_before = memory_stats().arena_bytes;
  StepArena arena;
  std::vector<const void*> where;
  for (int s = 0; s < 3; ++s) in_scope(arena, where);
  const int64_t reserved = arena.stats().reserved_bytes;
  ASSERT_GT(reserved, 0);
  EXPECT_EQ(memory_stats().arena_bytes - arena_before, reserved);
  empty_cache();
  EXPECT_EQ(memory_stats().arena_bytes, arena_before);
  EXPECT_EQ(memory_stats().cached_bytes, 0);
  const Tensor result = in_scope(arena, where);  // reserves again, served as before
  EXPECT_EQ(arena.stats().served, 4);
  EXPECT_EQ(arena.stats().missed, 0);
  EXPECT_EQ(arena.stats().recordings, 1);
  EXPECT_EQ(where[0], where[1]);
  EXPECT_EQ(result.item<float>(), 6000.0f);
  EXPECT_EQ(memory_stats().arena_bytes - arena_before, reserved);
  // a block still in use keeps its buffer through empty_cache()
  std::vector<Tensor> kept;
  in_scope(arena, where, &kept);
  empty_cache();
  EXPECT_EQ(memory_stats().arena_bytes - arena_before, reserved);
  EXPECT_EQ(kept[0].max().item<float>(), 3.0f);
  kept.clear();
  empty_cache();
  EXPECT_EQ(memory_stats().arena_bytes, arena_before);
}

TEST(StepArena, ABlockHeldLongerIsNeverOverwritten) {
  StepArena arena;
  std::vector<const void*> where;
  for (int s = 0; s < 3; ++s) in_scope(arena, where);
  std::vector<Tensor> kept;
  in_scope(arena, where, &kept);  // t1 held: t2 cannot take its place
  EXPECT_EQ(arena.stats().missed, 1);
  EXPECT_EQ(arena.stats().served, 3);
  EXPECT_NE(where[0], where[1]);
  in_scope(arena, where);  // the kept block still holds t1's (and t2's) place
  EXPECT_EQ(arena.stats().missed, 2);
  EXPECT_EQ(arena.stats().served, 2);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_TRUE(all(kept[0] == 3.0f).item<bool>()) << "a block in use was handed out again";
  kept.clear();
  in_scope(arena, where);
  EXPECT_EQ(arena.stats().served, 4);
  EXPECT_EQ(arena.stats().missed, 0);
}

TEST(StepArena, AnotherShapeMissesAndIsRecordedAfterTwoScopes) {
  StepArena arena;
  std::vector<const void*> where;
  for (int s = 0; s < 3; ++s) in_scope(arena, where);
  // one scope of another shape (an epoch's last, smaller batch): missed, no new recording
  EXPECT_EQ(in_scope(arena, where, nullptr, 300).item<float>(), 1800.0f);
  EXPECT_EQ(arena.stats().missed, 4);
  EXPECT_EQ(arena.stats().served, 0);
  in_scope(arena, where);
  EXPECT_EQ(arena.stats().served, 4);
  // the shape changes for good: two scopes that miss, then one that records, then served again
  for (int s = 0; s < 4; ++s) EXPECT_EQ(in_scope(arena, where, nullptr, 300).item<float>(), 1800.0f);
  const StepArena::Stats st = arena.stats();
  EXPECT_EQ(st.recordings, 2);
  EXPECT_EQ(st.served, 4);
  EXPECT_EQ(st.missed, 0);
  EXPECT_EQ(st.recorded_peak_bytes, 1216 + 6016 + 24000);  // 1200, 6000 and 24000 bytes in 64-byte units
}

TEST(StepArena, ItsBufferLivesAsLongAsABlockServedFromIt) {
  const int64_t arena_before = memory_stats().arena_bytes;
  Tensor survivor;
  {
    StepArena arena;
    std::vector<Tensor> kept;
    std::vector<const void*> where;
    for (int s = 0; s < 2; ++s) in_scope(arena, where);
    in_scope(arena, where, &kept);
    EXPECT_EQ(arena.stats().served, 3);
    survivor = kept.at(0);  // t1, served from the buffer in the third scope
    EXPECT_GT(memory_stats().arena_bytes, arena_before);
  }
  // the arena is gone; its buffer stays while `survivor` lives
  EXPECT_GT(memory_stats().arena_bytes, arena_before);
  EXPECT_TRUE(all(survivor == 3.0f).item<bool>());
  survivor = Tensor();
  EXPECT_EQ(memory_stats().arena_bytes, arena_before);
}

TEST(StepArena, OneScopeAtATimeAndNoneUnderAMemoryLimit) {
  StepArena arena, other;
  {
    StepArena::Scope scope(arena);
    const std::string msg = error_message<ValueError>([&] { StepArena::Scope again(other); });
    EXPECT_TRUE(contains_all(msg, {"StepArena::Scope", "open already", "one at a time"})) << msg;
  }
  LimitGuard guard;
  set_memory_limit(memory_stats().current_bytes + 64 * kMiB);
  std::vector<const void*> where;
  for (int s = 0; s < 4; ++s) EXPECT_EQ(in_scope(other, where).item<float>(), 6000.0f);
  EXPECT_EQ(other.stats().recordings, 1);
  EXPECT_EQ(other.stats().reserved_bytes, 0);  // recorded, but nothing reserved beside the limit
  EXPECT_EQ(other.stats().served, 0);
}

// Under AddressSanitizer the buffer's free parts are poisoned: a block freed in the plan reads
// as freed memory, a block in use does not.
TEST(StepArena, FreePartsArePoisonedUnderAddressSanitizer) {
#ifndef LOOM_TEST_ASAN
  GTEST_SKIP() << "not an AddressSanitizer build";
#else
  StepArena arena;
  std::vector<const void*> where;
  for (int s = 0; s < 3; ++s) in_scope(arena, where);
  ASSERT_EQ(arena.stats().served, 4);
  EXPECT_TRUE(__asan_address_is_poisoned(where[1])) << "t2's place, freed at the end of the step";
  std::vector<Tensor> kept;
  in_scope(arena, where, &kept);
  EXPECT_FALSE(__asan_address_is_poisoned(kept.at(0).data_ptr())) << "t1, still in use";
  EXPECT_TRUE(all(kept[0] == 3.0f).item<bool>());
#endif
}
