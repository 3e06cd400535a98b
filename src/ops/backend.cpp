#include "ops/backend.h"

#include <array>
#include <mutex>
#include <stdexcept>

namespace loom::detail {

namespace {
std::array<const Backend*, 2> g_tables{};
std::once_flag g_init;
}  // namespace

void register_backend(DeviceType type, const Backend* table) { g_tables[static_cast<size_t>(type)] = table; }

void KernelFills::add(const char* slot, const std::type_info& type, void (*kernel)()) {
  for (const Entry& e : entries_)
    if (e.slot == slot) throw std::logic_error(std::string("the kernel slot '") + slot + "' is filled twice (valid: one kernel per slot)");
  entries_.push_back({slot, &type, kernel});
}

void (*KernelFills::find_if_filled(const char* slot, const std::type_info& type) const)() {
  for (const Entry& e : entries_) {
    if (e.slot != slot) continue;
    if (*e.type != type)
      throw std::logic_error(std::string("the kernel filled into slot '") + slot +
                             "' has another signature than the slot its op declares (KernelSlot): make them agree");
    return e.kernel;
  }
  return nullptr;
}

void (*KernelFills::find(const char* slot, const std::type_info& type) const)() {
  if (const auto kernel = find_if_filled(slot, type)) return kernel;
  throw std::logic_error(std::string("no kernel of this backend fills the slot '") + slot +
                         "' its op declares (KernelSlot): fill it in its kernel file's add_*_kernels");
}

const Backend& backend(Device device) {
  std::call_once(g_init, [] { register_cpu_backend(); });
  const Backend* b = g_tables[static_cast<size_t>(device.type)];
  if (!b)
    throw DeviceError("no kernels are registered for device " + device.str() +
                      " in this build (valid: cpu:0)");
  return *b;
}

}  // namespace loom::detail
