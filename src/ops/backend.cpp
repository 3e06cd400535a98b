#include "ops/backend.h"

#include <array>
#include <mutex>

namespace loom::detail {

namespace {
std::array<const Backend*, 2> g_tables{};
std::once_flag g_init;
}  // namespace

void register_backend(DeviceType type, const Backend* table) { g_tables[static_cast<size_t>(type)] = table; }

const Backend& backend(Device device) {
  std::call_once(g_init, [] { register_cpu_backend(); });
  const Backend* b = g_tables[static_cast<size_t>(device.type)];
  if (!b)
    throw DeviceError("no kernels are registered for device " + device.str() +
                      " in this build (valid: cpu:0)");
  return *b;
}

}  // namespace loom::detail
