#pragma once
// Factories. Each takes the dtype and the device as arguments; the device defaults to
// default_device() (see DeviceScope).
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

LOOM_API Tensor empty(const Shape& shape, DType dtype = Float32, Device device = default_device());
LOOM_API Tensor zeros(const Shape& shape, DType dtype = Float32, Device device = default_device());
LOOM_API Tensor ones(const Shape& shape, DType dtype = Float32, Device device = default_device());
LOOM_API Tensor full(const Shape& shape, Scalar value, DType dtype = Float32, Device device = default_device());
LOOM_API Tensor zeros_like(const Tensor& t);
LOOM_API Tensor ones_like(const Tensor& t);
LOOM_API Tensor full_like(const Tensor& t, Scalar value);
LOOM_API Tensor empty_like(const Tensor& t);
// A 0-d tensor holding `value` with the scalar's natural dtype unless one is given.
LOOM_API Tensor scalar_tensor(Scalar value, DType dtype, Device device = default_device());
LOOM_API Tensor scalar_tensor(Scalar value);
// [start, stop) in steps of `step` (numpy.arange).
LOOM_API Tensor arange(double start, double stop, double step = 1, DType dtype = Float32, Device device = default_device());
LOOM_API Tensor arange(int64_t stop, DType dtype = Int64, Device device = default_device());
LOOM_API Tensor linspace(double start, double stop, int64_t num, bool endpoint = true, DType dtype = Float32,
                Device device = default_device());
LOOM_API Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, int64_t k = 0, DType dtype = Float32,
           Device device = default_device());

// Copies C++ data into a new tensor of `shape` (numel must match).
template <typename T>
LOOM_API Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = default_device());
template <typename T>
Tensor tensor(std::initializer_list<T> values, Device device = default_device()) {
  return from_vector(std::vector<T>(values), Shape{static_cast<int64_t>(values.size())}, device);
}
// The same values converted to `dtype` (torch.tensor([1, 2], dtype=...)): tensor({1, 2}, Float32).
template <typename T>
Tensor tensor(std::initializer_list<T> values, DType dtype, Device device = default_device()) {
  return tensor(values, device).astype(dtype);
}
// Nested literals of rank 2 to 4, row-major: tensor({{1, 2}, {3, 4}}) is a (2, 2) tensor of the
// elements' dtype; tensor({{1, 2}, {3, 4}}, Float32) converts. Rows of unequal length are a
// ValueError naming the depth and both lengths.
namespace detail {
template <typename L> struct IsInitList : std::false_type {};
template <typename L> struct IsInitList<std::initializer_list<L>> : std::true_type {};
// Records `size` as the extent at `depth`, or checks it against the extent already recorded.
LOOM_API void check_nested_extent(std::vector<int64_t>& extents, size_t depth, size_t size);
template <typename L, typename T>
void append_nested(std::initializer_list<L> list, std::vector<int64_t>& extents, size_t depth, std::vector<T>& out) {
  check_nested_extent(extents, depth, list.size());
  if constexpr (IsInitList<L>::value) {
    for (const L& sub : list) append_nested(sub, extents, depth + 1, out);
  } else {
    out.insert(out.end(), list.begin(), list.end());
  }
}
template <typename T, typename L>
Tensor nested_tensor(std::initializer_list<L> list, Device device) {
  std::vector<int64_t> extents;
  std::vector<T> values;
  append_nested(list, extents, 0, values);
  return from_vector(values, Shape(extents.begin(), extents.end()), device);
}
}  // namespace detail
template <typename T>
Tensor tensor(std::initializer_list<std::initializer_list<T>> rows, Device device = default_device()) {
  return detail::nested_tensor<T>(rows, device);
}
template <typename T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> rows,
              Device device = default_device()) {
  return detail::nested_tensor<T>(rows, device);
}
template <typename T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<std::initializer_list<T>>>> rows,
              Device device = default_device()) {
  return detail::nested_tensor<T>(rows, device);
}
template <typename T>
Tensor tensor(std::initializer_list<std::initializer_list<T>> rows, DType dtype, Device device = default_device()) {
  return detail::nested_tensor<T>(rows, device).astype(dtype);
}
template <typename T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> rows, DType dtype,
              Device device = default_device()) {
  return detail::nested_tensor<T>(rows, device).astype(dtype);
}
template <typename T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<std::initializer_list<T>>>> rows,
              DType dtype, Device device = default_device()) {
  return detail::nested_tensor<T>(rows, device).astype(dtype);
}
// Copies raw elements of `dtype` from host memory.
LOOM_API Tensor from_data(const void* data, const Shape& shape, DType dtype, Device device = default_device());

}  // namespace loom
