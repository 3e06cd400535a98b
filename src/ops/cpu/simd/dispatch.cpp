// Picks the widest kernel table the CPU supports (LOOM_SIMD=baseline|avx2|avx512 narrows it,
// for testing the other builds on a wide machine).
#include <cstdlib>
#include <cstring>

#include "ops/cpu/simd/simd.h"

namespace loom::cpu::simd {

namespace {

const Table* pick() {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const char* want = std::getenv("LOOM_SIMD");
  const bool cap_avx2 = want && std::strcmp(want, "avx2") == 0;
  const bool cap_base = want && std::strcmp(want, "baseline") == 0;
  if (avx512 && !cap_avx2 && !cap_base) return &avx512::get();
  if (avx2 && !cap_base) return &avx2::get();
  return &baseline::get();
}

}  // namespace

const Table& table() {
  static const Table* t = pick();
  return *t;
}

}  // namespace loom::cpu::simd
