#pragma once
// A C++ number on its way into a tensor op: remembers whether it was bool, integer or floating.
#include <cstdint>
#include <type_traits>

#include "loom/core/dtype.h"

namespace loom {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };
  Scalar(bool v) : kind_(Kind::Bool), i_(v), d_(v) {}
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)), d_(static_cast<double>(v)) {}
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float), i_(static_cast<int64_t>(v)), d_(static_cast<double>(v)) {}

  Kind kind() const { return kind_; }
  double to_double() const { return d_; }
  int64_t to_int() const { return i_; }
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
