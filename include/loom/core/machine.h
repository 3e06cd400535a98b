#pragma once
// What this process runs on, so that every reported time can name its machine: the CPU model,
// the vector instruction set Loom's kernels use, and the thread count.
#include <string>

#include "loom/core/api.h"

namespace loom {

// Vector ISA levels of Loom's CPU kernels, narrowest first.
enum class IsaLevel { Baseline, AVX2, AVX512 };

// The widest level this CPU supports (AVX2 means AVX2 and FMA; AVX512 means F, DQ, VL and BW).
LOOM_API IsaLevel isa_supported();
// The level Loom's kernels run at: isa_supported(), capped by the environment variable
// LOOM_SIMD=baseline|avx2|avx512 (read once; any other value is an Error naming the valid ones).
LOOM_API IsaLevel isa_level();
// "baseline", "avx2", "avx512" (the values LOOM_SIMD takes).
LOOM_API const char* isa_name(IsaLevel level);
// /proc/cpuinfo's model name ("AMD EPYC 9B14"), or "unknown CPU".
LOOM_API std::string cpu_model();
// One line for reports: "AMD EPYC 9B14 (AVX2+FMA; Loom kernels: avx2), 2 threads".
LOOM_API std::string machine_summary();

}  // namespace loom
