#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace loom {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;  // in elements, not bytes

inline int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}
Strides contiguous_strides(const Shape& shape);
std::string shape_str(const Shape& shape);  // "(2, 3)", "()" for 0-d
// NumPy broadcasting of two shapes; throws ShapeError naming `op` when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast");
// Wraps a possibly negative axis into [0, ndim); throws IndexError naming `op` otherwise.
int64_t normalize_axis(int64_t axis, int64_t ndim, const char* op);

}  // namespace loom
