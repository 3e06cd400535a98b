#pragma once
// A block of device memory shared by every view of it; freed when the last view dies.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "loom/core/api.h"
#include "loom/core/device.h"

namespace loom {

class LOOM_API Storage {
 public:
  Storage(size_t nbytes, Device device);
  // Memory that Loom does not own (a NumPy array's buffer, a DLPack capsule's data): `owner`
  // keeps it alive and is released when the last view of this storage dies; the allocator
  // neither accounts nor frees it. `data` must hold `nbytes` bytes on `device` for as long as
  // `owner` lives. A null `owner` is a ValueError (nothing would keep the memory alive).
  Storage(void* data, size_t nbytes, Device device, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  // True when the memory belongs to an owner outside Loom (the constructor above).
  bool external() const { return owner_ != nullptr; }
  Device device() const { return device_; }
  // Counts in-place writes through any view of this storage. Autograd records it when an op
  // saves a tensor for its backward and refuses the backward if it has moved since.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> version_{0};
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  std::shared_ptr<void> owner_;  // set for external memory, which the allocator never frees
};

}  // namespace loom
