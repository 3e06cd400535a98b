#pragma once
// A device names where a tensor's storage lives. Every factory takes one; a scope sets the
// default for code that does not pass it.
#include <cstdint>
#include <string>
#include <string_view>

#include "loom/core/api.h"

namespace loom {

enum class DeviceType : uint8_t { CPU, CUDA };

struct LOOM_API Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  Device() = default;
  explicit Device(DeviceType type_, int index_ = 0) : type(type_), index(index_) {}
  // A device by name, as PyTorch's torch.device: "cpu", "cuda" (index 0), "cpu:0", "cuda:1".
  // DeviceError listing the valid forms for any other text. The name is only parsed: whether
  // this build has the device is checked where it is used (t.to("cuda") says it has not).
  explicit Device(std::string_view name);

  static Device cpu() { return Device(DeviceType::CPU, 0); }
  static Device cuda(int index = 0) { return Device(DeviceType::CUDA, index); }
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
