#pragma once
// Shape manipulation. Views (no copy) where NumPy returns views: reshape of compatible
// strides, transpose/permute, squeeze, expand_dims, broadcast_to, slice.
#include <variant>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

LOOM_API Tensor reshape(const Tensor& x, const Shape& shape);  // one -1 allowed
LOOM_API Tensor transpose(const Tensor& x, const Axes& axes = {});  // empty: reverse
LOOM_API Tensor permute(const Tensor& x, const Axes& axes);
LOOM_API Tensor swapaxes(const Tensor& x, int64_t a, int64_t b);
LOOM_API Tensor moveaxis(const Tensor& x, int64_t source, int64_t destination);
LOOM_API Tensor squeeze(const Tensor& x, const Axes& axes = {});
template <AxisIndex I> Tensor squeeze(const Tensor& x, I axis) { return squeeze(x, Axes{static_cast<int64_t>(axis)}); }
LOOM_API Tensor expand_dims(const Tensor& x, int64_t axis);
LOOM_API Tensor broadcast_to(const Tensor& x, const Shape& shape);
LOOM_API Tensor flatten(const Tensor& x);
// x[start:stop:step] along one axis, as a view.
LOOM_API Tensor slice(const Tensor& x, int64_t axis, std::optional<int64_t> start, std::optional<int64_t> stop,
             int64_t step = 1);
LOOM_API Tensor concatenate(const std::vector<Tensor>& xs, int64_t axis = 0);
LOOM_API Tensor stack(const std::vector<Tensor>& xs, int64_t axis = 0);
// numpy.split: `sections` equal parts, or split before the given indices.
LOOM_API std::vector<Tensor> split(const Tensor& x, int64_t sections, int64_t axis = 0);
LOOM_API std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& indices, int64_t axis = 0);
// torch.unbind: the x.dim(axis) slices of x along axis, without that axis, as views. In backward
// their gradients are written into one tensor of x's shape (slices taken one by one would each
// make a zero tensor of x's shape: quadratic for a recurrent layer's time steps).
LOOM_API std::vector<Tensor> unbind(const Tensor& x, int64_t axis = 0);
// Constant padding: pad_width holds (before, after) per axis.
LOOM_API Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& pad_width, Scalar value = 0.0);
LOOM_API Tensor tile(const Tensor& x, const std::vector<int64_t>& reps);
LOOM_API Tensor repeat(const Tensor& x, int64_t repeats, std::optional<int64_t> axis = std::nullopt);
LOOM_API Tensor flip(const Tensor& x, const Axes& axes = {});  // empty: all axes

}  // namespace loom
