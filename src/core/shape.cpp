#include "loom/core/shape.h"

#include "loom/core/error.h"

namespace loom {

Strides contiguous_strides(const Shape& shape) {
  Strides s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i] > 0 ? shape[i] : 1;
  }
  return s;
}

std::string shape_str(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw ShapeError(std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) +
                       " do not broadcast (axis " + std::to_string(i) + " has sizes " + std::to_string(da) +
                       " and " + std::to_string(db) + "; sizes must be equal or one of them 1)");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t normalize_axis(int64_t axis, int64_t ndim, const char* op) {
  if (axis < -ndim || axis >= ndim) {
    if (ndim == 0)
      throw IndexError(std::string(op) + ": axis " + std::to_string(axis) +
                       " is out of range for a tensor of rank 0 (a 0-d tensor has no axes)");
    const int64_t lo = ndim > 0 ? -ndim : 0, hi = ndim > 0 ? ndim - 1 : -1;
    throw IndexError(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for a tensor of rank " +
                     std::to_string(ndim) + " (valid: " + std::to_string(lo) + " to " + std::to_string(hi) + ")");
  }
  return axis < 0 ? axis + ndim : axis;
}

}  // namespace loom
