#pragma once
// Indexing with NumPy semantics; every read is differentiable (repeated indices accumulate).
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

// x[indices...]: integers, slices, Ellipsis, NewAxis, integer arrays and boolean masks.
LOOM_API Tensor index(const Tensor& x, const std::vector<TensorIndex>& indices);
// A copy of x with x[indices] = values (values broadcast); differentiable in x and values.
LOOM_API Tensor index_put(const Tensor& x, const std::vector<TensorIndex>& indices, const Tensor& values,
                 bool accumulate = false);
// numpy.take along an axis (flattened when axis is empty).
LOOM_API Tensor take(const Tensor& x, const Tensor& indices, std::optional<int64_t> axis = std::nullopt);
// numpy.take_along_axis / torch.gather: out[..i..] = x[..indices[..i..]..] along `axis`.
LOOM_API Tensor take_along_axis(const Tensor& x, const Tensor& indices, int64_t axis);
LOOM_API Tensor gather(const Tensor& x, int64_t axis, const Tensor& indices);
// A copy of x with src added at the positions `indices` names along `axis` (torch.scatter_add).
LOOM_API Tensor scatter_add(const Tensor& x, int64_t axis, const Tensor& indices, const Tensor& src);
// Positions of non-zero elements: one int64 tensor per axis.
LOOM_API std::vector<Tensor> nonzero(const Tensor& x);

}  // namespace loom
