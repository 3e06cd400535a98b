#pragma once
// Helpers of the unit tests from ops up: tensors to test with.
#include <loom/core/dtype.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>

namespace loom_test {

// 0, 1, ..., n-1 as float32 of the given shape.
inline loom::Tensor iota(const loom::Shape& shape, loom::DType dtype = loom::Float32) {
  return loom::arange(loom::shape_numel(shape)).astype(dtype).reshape(shape);
}

}  // namespace loom_test
