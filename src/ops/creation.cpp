#include "loom/ops/creation.h"

#include <cmath>
#include <cstring>

#include "ops/internal.h"

namespace loom {

namespace {
Tensor filled(const Shape& shape, Scalar value, DType dtype, Device device, const char* op) {
  detail::check_device(device, op);
  Tensor t = detail::alloc(shape, dtype, device, op);
  detail::backend(device).fill(t, value);
  return t;
}
}  // namespace

Tensor empty(const Shape& shape, DType dtype, Device device) {
  detail::check_device(device, "empty");
  return detail::alloc(shape, dtype, device, "empty");
}

Tensor full(const Shape& shape, Scalar value, DType dtype, Device device) {
  return filled(shape, value, dtype, device, "full");
}

Tensor zeros(const Shape& shape, DType dtype, Device device) { return filled(shape, 0, dtype, device, "zeros"); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return filled(shape, 1, dtype, device, "ones"); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, Scalar value) { return full(t.shape(), value, t.dtype(), t.device()); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), t.dtype(), t.device()); }

Tensor scalar_tensor(Scalar value, DType dtype, Device device) {
  return filled({}, value, dtype, device, "scalar_tensor");
}
Tensor scalar_tensor(Scalar value) { return scalar_tensor(value, value.natural_dtype(), default_device()); }

namespace {
// A float64 tensor of `n` values start + i * step (arange, linspace), then cast to `dtype`.
Tensor ramp(int64_t n, double start, double step, DType dtype, Device device, const char* op) {
  Tensor t = detail::alloc({n}, DType::Float64, device, op);
  double* v = t.data<double>();
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i) * step;
  return t.astype(dtype);
}
}  // namespace

Tensor arange(double start, double stop, double step, DType dtype, Device device) {
  detail::check_device(device, "arange");
  if (step == 0) throw ValueError("arange: step must not be zero");
  const double span = std::ceil((stop - start) / step);
  if (std::isnan(span))
    throw ValueError("arange: cannot compute a length from start " + std::to_string(start) + ", stop " +
                     std::to_string(stop) + " and step " + std::to_string(step) + " (they must be finite)");
  if (span >= 9.2233720368547758e18)
    throw ShapeError("arange: the length " + std::to_string(span) + " exceeds the limit of 2^63 - 1 elements");
  return ramp(span > 0 ? static_cast<int64_t>(span) : 0, start, step, dtype, device, "arange");
}

Tensor arange(int64_t stop, DType dtype, Device device) {
  detail::check_device(device, "arange");
  Tensor t = detail::alloc({std::max<int64_t>(stop, 0)}, DType::Int64, device, "arange");
  int64_t* v = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = i;
  return t.astype(dtype);
}

Tensor linspace(double start, double stop, int64_t num, bool endpoint, DType dtype, Device device) {
  detail::check_device(device, "linspace");
  if (num < 0) throw ValueError("linspace: num must be >= 0, got " + std::to_string(num));
  const double div = endpoint ? static_cast<double>(num - 1) : static_cast<double>(num);
  const double step = div > 0 ? (stop - start) / div : 0;
  Tensor t = ramp(num, start, step, DType::Float64, device, "linspace");
  if (endpoint && num > 1) t.data<double>()[num - 1] = stop;
  return t.astype(dtype);
}

Tensor eye(int64_t n, std::optional<int64_t> m_opt, int64_t k, DType dtype, Device device) {
  detail::check_device(device, "eye");
  const int64_t m = m_opt.value_or(n);
  if (n < 0 || m < 0) throw ValueError("eye: sizes must be >= 0, got " + std::to_string(n) + "x" + std::to_string(m));
  Tensor t = detail::alloc({n, m}, dtype, device, "eye");
  detail::backend(device).fill(t, 0);
  // the diagonal k as a strided view: starts at (0, k) or (-k, 0), steps by m + 1
  const int64_t len = k >= 0 ? (k < m ? std::min(n, m - k) : 0) : (k > -n ? std::min(n + k, m) : 0);
  if (len > 0)
    detail::backend(device).fill(Tensor(t.storage(), {len}, {m + 1}, k >= 0 ? k : -k * m, dtype), 1);
  return t;
}

Tensor from_data(const void* data, const Shape& shape, DType dtype, Device device) {
  detail::check_device(device, "from_data");
  Tensor t = detail::alloc(shape, dtype, device, "from_data");
  if (t.nbytes()) std::memcpy(t.data_ptr(), data, t.nbytes());
  return t;
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  detail::check_device(device, "from_vector");
  if (static_cast<int64_t>(values.size()) != shape_numel(shape))
    throw ShapeError("from_vector: " + std::to_string(values.size()) + " values cannot fill shape " + shape_str(shape) +
                     " (" + std::to_string(shape_numel(shape)) + " elements)");
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    return from_data(bytes.data(), shape, DType::Bool, device);
  } else if constexpr (std::is_same_v<T, int>) {
    return from_data(values.data(), shape, DType::Int32, device);
  } else if constexpr (std::is_same_v<T, long long>) {
    return from_data(values.data(), shape, DType::Int64, device);
  } else {
    return from_data(values.data(), shape, dtype_of<T>(), device);
  }
}

namespace detail {
void check_nested_extent(std::vector<int64_t>& extents, size_t depth, size_t size) {
  if (depth == extents.size()) {
    extents.push_back(static_cast<int64_t>(size));
  } else if (extents[depth] != static_cast<int64_t>(size)) {
    throw ValueError("tensor: the nested list is ragged: a list at depth " + std::to_string(depth) + " has " +
                     std::to_string(size) + " elements where an earlier one has " + std::to_string(extents[depth]) +
                     "; every list at one depth must have the same length (a tensor is rectangular)");
  }
}
}  // namespace detail

template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&, Device);
template Tensor from_vector<uint8_t>(const std::vector<uint8_t>&, const Shape&, Device);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, Device);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, Device);
template Tensor from_vector<long long>(const std::vector<long long>&, const Shape&, Device);
template Tensor from_vector<float>(const std::vector<float>&, const Shape&, Device);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, Device);
template Tensor from_vector<half>(const std::vector<half>&, const Shape&, Device);
template Tensor from_vector<bfloat16>(const std::vector<bfloat16>&, const Shape&, Device);

}  // namespace loom
