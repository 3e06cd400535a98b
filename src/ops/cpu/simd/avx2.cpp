// The vector kernels built for avx2 (compile flags: root CMakeLists.txt).
#define LOOM_SIMD_ISA avx2
#define LOOM_SIMD_NAME "avx2"
#include "ops/cpu/simd/kernels.inc"
