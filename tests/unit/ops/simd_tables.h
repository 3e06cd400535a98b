#pragma once
// The per-ISA kernel tables (src/ops/cpu/simd) this CPU can run, for the tests that check every
// build: baseline always, AVX2 and AVX-512 where the CPU has them.
#include <vector>

#include "ops/cpu/simd/simd.h"

inline std::vector<const loom::cpu::simd::Table*> runnable_tables() {
  namespace simd = loom::cpu::simd;
  std::vector<const simd::Table*> ts{&simd::baseline::get()};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) ts.push_back(&simd::avx2::get());
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw"))
    ts.push_back(&simd::avx512::get());
  return ts;
}
