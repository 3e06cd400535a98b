#pragma once
// A device names where a tensor's storage lives. Every factory takes one; a scope sets the
// default for code that does not pass it.
#include <string>

#include "loom/core/api.h"

namespace loom {

enum class DeviceType : uint8_t { CPU, CUDA };

struct LOOM_API Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  std::string str() const;
  bool operator==(const Device&) const = default;
};

// The device used when a factory is given none: CPU unless a DeviceScope says otherwise.
LOOM_API Device default_device();

// Sets the default device for the current thread while alive.
class LOOM_API DeviceScope {
 public:
  explicit DeviceScope(Device device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  Device previous_;
};

}  // namespace loom
