#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/dim_vector.h"

namespace loom {

// small vectors (inline up to six axes, see dim_vector.h), with std::vector's interface
using Shape = DimVector;
using Strides = DimVector;  // in elements, not bytes

// The one checked size arithmetic of Loom. A shape is valid when no dim is negative and the
// product of its nonzero dims, times the item size, fits in int64 (zero dims are skipped so
// that reductions and views of an empty tensor can never produce an overflowing shape).
namespace detail {
[[noreturn]] LOOM_API void throw_invalid_shape(const Shape& shape, size_t itemsize, const char* what);
}

// Number of elements; throws ShapeError for an invalid shape (inline: every op calls it).
inline int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d <= 0) {
      if (d < 0) [[unlikely]] detail::throw_invalid_shape(shape, 1, "shape");
      empty = true;
    } else if (__builtin_mul_overflow(n, d, &n)) [[unlikely]] {
      detail::throw_invalid_shape(shape, 1, "shape");
    }
  }
  return empty ? 0 : n;
}
// Validates `shape` for elements of `itemsize` bytes and returns its size in bytes; throws
// ShapeError naming `what`, the shape and the limit otherwise.
LOOM_API int64_t shape_nbytes(const Shape& shape, size_t itemsize, const char* what = "shape");
// a * b and a + b of sizes (>= 0); throw ShapeError naming `what` on overflow.
LOOM_API int64_t checked_mul(int64_t a, int64_t b, const char* what);
LOOM_API int64_t checked_add(int64_t a, int64_t b, const char* what);

LOOM_API Strides contiguous_strides(const Shape& shape);
// True when two elements of a view with these strides certainly share memory: a zero stride
// on an axis of size > 1 (a broadcast view), or two such axes with equal |stride|. In-place
// writes refuse such targets (as NumPy and PyTorch do).
LOOM_API bool has_internal_overlap(const Shape& shape, const Strides& strides);
LOOM_API std::string shape_str(const Shape& shape);  // "(2, 3)", "()" for 0-d
// Whether `shape` fits `pattern`, a shape whose -1 entries match any size: the same rank, and
// the pattern's size wherever it gives one. A -1 in `shape` (a size still open) fits only a -1.
LOOM_API bool shape_matches(const Shape& pattern, const Shape& shape);
// NumPy broadcasting of two shapes; throws ShapeError naming `op` when incompatible.
LOOM_API Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast");
// Wraps a possibly negative axis into [0, ndim); throws IndexError naming `op` otherwise.
LOOM_API int64_t normalize_axis(int64_t axis, int64_t ndim, const char* op);

}  // namespace loom
