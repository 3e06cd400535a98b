#include "loom/core/device.h"

#include "core/utf8.h"
#include "loom/core/error.h"

namespace loom {

namespace {
thread_local Device tls_default_device = Device::cpu();

[[noreturn]] void throw_bad_device_name(std::string_view name, const char* why) {
  throw DeviceError("Device: " + detail::quote_text(name, 64) + " " + why +
                    " (valid: \"cpu\", \"cuda\", or either with an index: \"cpu:0\", \"cuda:1\")");
}
}  // namespace

Device::Device(std::string_view name) {
  const size_t colon = name.find(':');
  const std::string_view kind = name.substr(0, colon);
  if (kind == "cpu") type = DeviceType::CPU;
  else if (kind == "cuda") type = DeviceType::CUDA;
  else throw_bad_device_name(name, "is not a device name");
  index = 0;
  if (colon == std::string_view::npos) return;
  const std::string_view digits = name.substr(colon + 1);
  // digits only (no sign, no space), at most 9 so that the value fits an int
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string_view::npos)
    throw_bad_device_name(name, "has no valid index after ':'");
  for (char c : digits) index = index * 10 + (c - '0');
}

std::string Device::str() const {
  return (type == DeviceType::CPU ? std::string("cpu") : std::string("cuda")) + ":" + std::to_string(index);
}

Device default_device() { return tls_default_device; }

DeviceScope::DeviceScope(Device device) : previous_(tls_default_device) { tls_default_device = device; }
DeviceScope::~DeviceScope() { tls_default_device = previous_; }

}  // namespace loom
