// Picks the kernel table of the level core/machine.h settles on: the widest the CPU supports,
// narrowed by LOOM_SIMD=baseline|avx2|avx512 (to run the narrower builds on a wide machine).
#include "loom/core/machine.h"

#include "ops/cpu/simd/simd.h"

namespace loom::cpu::simd {

namespace {

const Table* pick() {
  switch (isa_level()) {
    case IsaLevel::AVX512: return &avx512::get();
    case IsaLevel::AVX2: return &avx2::get();
    case IsaLevel::Baseline: break;
  }
  return &baseline::get();
}

}  // namespace

const Table& table() {
  static const Table* t = pick();
  return *t;
}

}  // namespace loom::cpu::simd
