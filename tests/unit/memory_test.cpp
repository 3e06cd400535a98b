// Memory accounting: live bytes, peak, the allocator cache, limits, and that storage is freed
// when the last view of it dies.
#include "core_test_util.h"

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
