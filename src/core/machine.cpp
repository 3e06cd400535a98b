#include "loom/core/machine.h"

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "loom/core/error.h"
#include "loom/core/parallel.h"

namespace loom {

namespace {

IsaLevel detect() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw"))
    return IsaLevel::AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return IsaLevel::AVX2;
  return IsaLevel::Baseline;
}

IsaLevel capped() {
  const IsaLevel supported = isa_supported();
  const char* want = std::getenv("LOOM_SIMD");
  if (want == nullptr || *want == '\0') return supported;
  for (IsaLevel cap : {IsaLevel::Baseline, IsaLevel::AVX2, IsaLevel::AVX512})
    if (std::strcmp(want, isa_name(cap)) == 0) return cap < supported ? cap : supported;
  throw Error(std::string("LOOM_SIMD='") + want +
              "' is not a kernel level; valid: baseline, avx2, avx512 (or unset for the widest this CPU supports)");
}

}  // namespace

IsaLevel isa_supported() {
  static const IsaLevel level = detect();
  return level;
}

IsaLevel isa_level() {
  static const IsaLevel level = capped();
  return level;
}

const char* isa_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::AVX512: return "avx512";
    case IsaLevel::AVX2: return "avx2";
    case IsaLevel::Baseline: break;
  }
  return "baseline";
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    const auto start = line.find_first_not_of(" \t", colon + 1);
    if (start != std::string::npos) return line.substr(start);
  }
  return "unknown CPU";
}

std::string machine_summary() {
  static const char* const cpu_isa[] = {"SSE2 only", "AVX2+FMA", "AVX-512"};
  return cpu_model() + " (" + cpu_isa[static_cast<int>(isa_supported())] +
         "; Loom kernels: " + isa_name(isa_level()) + "), " + std::to_string(get_num_threads()) +
         (get_num_threads() == 1 ? " thread" : " threads");
}

}  // namespace loom
