#include "loom/core/shape.h"

#include <ostream>

#include "loom/core/error.h"
#include "loom/core/shape_io.h"

namespace loom {

void detail::throw_invalid_shape(const Shape& shape, size_t itemsize, const char* what) {
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < 0)
      throw ShapeError(std::string(what) + ": shape " + shape_str(shape) + " has a negative size " +
                       std::to_string(shape[i]) + " on axis " + std::to_string(i) + " (sizes must be >= 0)");
  throw ShapeError(std::string(what) + ": shape " + shape_str(shape) + " is too large: the product of its nonzero sizes" +
                   (itemsize > 1 ? " times the item size (" + std::to_string(itemsize) + " bytes)" : std::string()) +
                   " exceeds the limit of 2^63 - 1 = 9223372036854775807");
}

int64_t shape_nbytes(const Shape& shape, size_t itemsize, const char* what) {
  int64_t n = static_cast<int64_t>(itemsize);
  bool empty = false;
  for (int64_t d : shape) {
    if (d <= 0) {
      if (d < 0) detail::throw_invalid_shape(shape, itemsize, what);
      empty = true;
    } else if (__builtin_mul_overflow(n, d, &n)) {
      detail::throw_invalid_shape(shape, itemsize, what);
    }
  }
  return empty ? 0 : n;
}

int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    throw ShapeError(std::string(what) + ": size " + std::to_string(a) + " * " + std::to_string(b) +
                     (a < 0 || b < 0 ? " has a negative operand (sizes must be >= 0)"
                                     : " exceeds the limit of 2^63 - 1 = 9223372036854775807"));
  return r;
}

int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r))
    throw ShapeError(std::string(what) + ": size " + std::to_string(a) + " + " + std::to_string(b) +
                     (a < 0 || b < 0 ? " has a negative operand (sizes must be >= 0)"
                                     : " exceeds the limit of 2^63 - 1 = 9223372036854775807"));
  return r;
}

Strides contiguous_strides(const Shape& shape) {
  Strides s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i] > 0 ? shape[i] : 1;
  }
  return s;
}

bool has_internal_overlap(const Shape& s, const Strides& st) {
  for (int64_t d : s)
    if (d == 0) return false;  // no element at all
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] <= 1) continue;
    if (st[i] == 0) return true;
    // equal |stride|: elements (1, 0) and (0, 1), or (1, 1) and (0, 0), coincide
    for (size_t j = i + 1; j < s.size(); ++j)
      if (s[j] > 1 && (st[j] == st[i] || st[j] == -st[i])) return true;
  }
  return false;
}

bool shape_matches(const Shape& pattern, const Shape& shape) {
  if (pattern.size() != shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] < -1 || (pattern[d] >= 0 && shape[d] != pattern[d])) return false;
  return true;
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

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape_str(shape); }

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
  shape_nbytes(out, 1, op);  // two valid shapes can broadcast to one whose size overflows
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
