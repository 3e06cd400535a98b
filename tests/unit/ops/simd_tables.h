#pragma once
// The per-ISA kernel tables (src/ops/cpu/simd) this CPU can run, for the tests that check every
// build: baseline always, AVX2 and AVX-512 where the CPU has them.
#include <cstdint>
#include <random>
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

// n floats drawn uniformly from [lo, hi) by a generator seeded with `seed`.
inline std::vector<float> random_floats(int64_t n, uint32_t seed, float lo = -2, float hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = d(rng);
  return v;
}
