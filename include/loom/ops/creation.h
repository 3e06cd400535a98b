#pragma once
// Factories. Each takes the dtype and the device as arguments; the device defaults to
// default_device() (see DeviceScope).
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
// Copies raw elements of `dtype` from host memory.
LOOM_API Tensor from_data(const void* data, const Shape& shape, DType dtype, Device device = default_device());

}  // namespace loom
