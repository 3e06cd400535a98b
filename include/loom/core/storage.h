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
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
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
};

}  // namespace loom
