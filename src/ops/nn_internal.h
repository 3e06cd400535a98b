#pragma once
// Helpers shared by the neural-network ops (conv.cpp, pooling.cpp, nn.cpp, losses.cpp).
#include <string>
#include <vector>

#include "loom/core/describe.h"
#include "loom/core/tensor.h"
#include "ops/internal.h"

namespace loom::detail {

inline std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

// Throws unless t is defined and has `rank` axes; `layout` names them, e.g. "(N, C, H, W)".
inline void check_rank(const Tensor& t, int64_t rank, const char* op, const char* what, const char* layout) {
  if (!t.defined()) throw ValueError(std::string(op) + ": " + what + " is an undefined tensor");
  if (t.ndim() != rank)
    throw ShapeError(std::string(op) + ": " + what + " must be " + std::to_string(rank) + "-d " + layout + ", got " +
                     describe(t));
}

// Floating operands only; returns the dtype the kernels compute in (halves compute in float32).
inline DType check_float(const Tensor& t, const char* op, const char* what) {
  if (!is_floating(t.dtype()))
    throw DTypeError(std::string(op) + ": " + what + " has dtype " + dtype_name(t.dtype()) +
                     " (valid: float16, bfloat16, float32, float64)");
  return kernel_dtype(t.dtype());
}

// Operands that must share a dtype (as PyTorch requires for inputs and weights).
inline void check_same_dtype(const Tensor& a, const Tensor& b, const char* op, const char* an, const char* bn) {
  if (a.dtype() != b.dtype())
    throw DTypeError(std::string(op) + ": " + an + " (" + describe(a) + ") and " + bn + " (" + describe(b) +
                     ") must have the same dtype; convert one with astype");
}

// An argument list with one value per spatial axis, or one value for all of them.
inline std::vector<int64_t> per_axis(const std::vector<int64_t>& v, size_t n, const char* op, const char* what,
                                     int64_t min_value) {
  std::vector<int64_t> r;
  if (v.size() == 1)
    r.assign(n, v[0]);
  else if (v.size() == n)
    r = v;
  else
    throw ValueError(std::string(op) + ": " + what + " must have 1 or " + std::to_string(n) + " values, got " +
                     ints_str(v));
  for (int64_t x : r)
    if (x < min_value)
      throw ValueError(std::string(op) + ": " + what + " must be >= " + std::to_string(min_value) + ", got " +
                       ints_str(v));
  return r;
}

}  // namespace loom::detail
