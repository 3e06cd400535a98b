#pragma once
// A C++ number on its way into a tensor op: remembers whether it was bool, integer or floating.
#include <cstdint>
#include <type_traits>

#include "loom/core/api.h"
#include "loom/core/dtype.h"

namespace loom {

namespace detail {
// A floating value truncated toward zero to int64, defined for every input (a plain cast is
// undefined behaviour outside int64's range): NaN, infinities and values beyond int64 give
// int64's minimum, as the x86 conversion instructions (and so NumPy there) do.
inline int64_t float_to_int64(double v) {
  return v >= -0x1p63 && v < 0x1p63 ? static_cast<int64_t>(v) : INT64_MIN;
}
}  // namespace detail

class LOOM_API Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };
  Scalar(bool v) : kind_(Kind::Bool), i_(v), d_(v) {}
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)), d_(static_cast<double>(v)) {}
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float), i_(detail::float_to_int64(static_cast<double>(v))), d_(static_cast<double>(v)) {}

  Kind kind() const { return kind_; }
  double to_double() const { return d_; }
  int64_t to_int() const { return i_; }  // a Float's: detail::float_to_int64
  // The dtype a tensor made from this scalar alone gets (bool, int64, float32).
  DType natural_dtype() const;
  // NumPy 2 "weak scalar" rule: the result dtype of an op between a tensor of `tensor_dtype`
  // and this scalar: the tensor's dtype unless the scalar's kind is higher (float with an
  // integer tensor gives float32; int with a bool tensor gives int64).
  DType result_dtype_with(DType tensor_dtype) const;

 private:
  Kind kind_;
  int64_t i_;
  double d_;
};

}  // namespace loom
