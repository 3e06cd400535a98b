#include "ops/cpu/register.h"

#include <array>
#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "ops/cpu/kernels.h"

namespace loom::detail {

namespace {

// The kernel files' parts of the table (ops/cpu/register.h).
constexpr void (*kParts[])(Backend&) = {
    &cpu::add_copy_fill_kernels,
    &cpu::add_binary_kernels,
    &cpu::add_unary_kernels,
    &cpu::add_reduce_kernels,
    &cpu::add_sum_squares_kernels,
    &cpu::add_matmul_kernels,
    &cpu::add_index_kernels,
    &cpu::add_random_kernels,
    &cpu::add_conv_ref_kernels,
    &cpu::add_conv_onednn_kernels,
    &cpu::add_conv_onednn_blocked_kernels,
    &cpu::add_elementwise_chain_kernels,
    &cpu::add_pool_kernels,
    &cpu::add_batch_norm_kernels,
    &cpu::add_layer_norm_kernels,
    &cpu::add_lstm_kernels,
    &cpu::add_softmax_kernels,
    &cpu::add_gelu_kernels,
    &cpu::add_cross_entropy_kernels,
    &cpu::add_attention_flash_kernels,
    &cpu::add_quantized_kernels,
    &cpu::add_optimizers_kernels,
    &cpu::add_linalg_kernels,
};

// The shared slots (BackendSlots) are function pointers only, so they read as an array of them:
// a shared slot no kernel file filled (one added to backend.h but not to its file's
// add_*_kernels) fails the first op run, in every test, rather than crashing the one op that
// calls it. (Every other slot is declared beside its op, KernelSlot, and checked by its first
// call: no kernel, or one of another signature, fails that op's tests naming the slot.)
void check_every_slot_filled(const BackendSlots& b) {
  using Slots = std::array<std::uintptr_t, sizeof(BackendSlots) / sizeof(std::uintptr_t)>;
  static_assert(sizeof(BackendSlots) % sizeof(std::uintptr_t) == 0 && sizeof(void (*)()) == sizeof(std::uintptr_t));
  const Slots slots = std::bit_cast<Slots>(b);
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i] == 0)
      throw std::logic_error("the CPU backend fills no kernel into slot " + std::to_string(i) +
                             " of its table (in src/ops/backend.h's order): add it to its kernel file's add_*_kernels");
}

}  // namespace

void register_cpu_backend() {
  static const Backend table = [] {
    Backend b{};
    for (const auto add : kParts) add(b);
    check_every_slot_filled(b);
    return b;
  }();
  register_backend(DeviceType::CPU, &table);
  cpu::init_blas_threads();
}

}  // namespace loom::detail
