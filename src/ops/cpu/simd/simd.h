#pragma once
// Vectorised float32 kernels on contiguous memory, built once per instruction set
// (kernels.inc compiled by avx512.cpp, avx2.cpp and baseline.cpp with their own -m flags)
// and picked at run time from what the CPU supports. The rest of the library is built for
// baseline x86-64 and calls these through table().
#include <cstdint>

namespace loom::cpu::simd {

// Binary ops with a vector form; the index into Table's arrays.
enum Binary : int { kAdd, kSub, kMul, kDiv, kMax, kMin, kNumBinary };
// Unary ops with a vector form.
enum Unary : int { kNeg, kAbs, kSquare, kRelu, kSqrt, kExp, kLog, kTanh, kSigmoid, kNumUnary };

struct Table {
  const char* isa;  // "avx512", "avx2" or "baseline"
  // o[i] = x[i] op y[i]; vs: y is one value; sv: x is one value. o may equal x or y.
  void (*binary_vv[kNumBinary])(float* o, const float* x, const float* y, int64_t n);
  void (*binary_vs[kNumBinary])(float* o, const float* x, float y, int64_t n);
  void (*binary_sv[kNumBinary])(float* o, float x, const float* y, int64_t n);
  void (*unary[kNumUnary])(float* o, const float* x, int64_t n);
  // Sum and NaN-propagating max/min of n contiguous values (n >= 1 for max/min).
  float (*sum)(const float* x, int64_t n);
  float (*max)(const float* x, int64_t n);
  float (*min)(const float* x, int64_t n);
  // acc[j] += sum over r < rows of x[r * ld + j], for j < n.
  void (*sum_rows_into)(float* acc, const float* x, int64_t rows, int64_t ld, int64_t n);
  // Softmax (or log-softmax) of each of `rows` contiguous rows of length n.
  void (*softmax_rows)(float* out, const float* x, int64_t rows, int64_t n, bool log);
};

const Table& table();

// The per-ISA tables (defined in the per-ISA translation units).
namespace avx512 { const Table& get(); }
namespace avx2 { const Table& get(); }
namespace baseline { const Table& get(); }

}  // namespace loom::cpu::simd
