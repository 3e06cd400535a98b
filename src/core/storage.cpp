#include "loom/core/storage.h"

#include <string>

#include "loom/core/error.h"
#include "loom/core/memory.h"

namespace loom {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = allocator_for(device).allocate(nbytes);
}

Storage::Storage(void* data, size_t nbytes, Device device, std::shared_ptr<void> owner)
    : data_(data), nbytes_(nbytes), device_(device), owner_(std::move(owner)) {
  if (!owner_)
    throw ValueError("Storage over external memory: the owner is null; pass the handle that keeps the " +
                     std::to_string(nbytes) + " bytes alive (a null owner could not keep them alive)");
  if (!data_ && nbytes_ > 0)
    throw ValueError("Storage over external memory: data is null for " + std::to_string(nbytes) +
                     " bytes; valid: a pointer to nbytes bytes, or null with nbytes 0");
}

// External memory goes back to its owner (released with owner_), never to the allocator.
Storage::~Storage() {
  if (!owner_) allocator_for(device_).deallocate(data_, nbytes_);
}

}  // namespace loom
