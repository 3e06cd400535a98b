// The vector kernels built for avx512 (compile flags: root CMakeLists.txt).
#define LOOM_SIMD_ISA avx512
#define LOOM_SIMD_NAME "avx512"
#include "ops/cpu/simd/kernels.inc"
