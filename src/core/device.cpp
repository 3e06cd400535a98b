#include "loom/core/device.h"

namespace loom {

namespace {
thread_local Device tls_default_device = Device::cpu();
}

std::string Device::str() const {
  return (type == DeviceType::CPU ? std::string("cpu") : std::string("cuda")) + ":" + std::to_string(index);
}

Device default_device() { return tls_default_device; }

DeviceScope::DeviceScope(Device device) : previous_(tls_default_device) { tls_default_device = device; }
DeviceScope::~DeviceScope() { tls_default_device = previous_; }

}  // namespace loom
