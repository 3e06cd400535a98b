// The vector kernels built for baseline (compile flags: root CMakeLists.txt).
#define LOOM_SIMD_ISA baseline
#define LOOM_SIMD_NAME "baseline"
#include "ops/cpu/simd/kernels.inc"
