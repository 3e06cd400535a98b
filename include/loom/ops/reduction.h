#pragma once
// Reductions over any set of axes (empty = all axes), with keepdims as in NumPy.
#include <optional>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

LOOM_API Tensor sum(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
LOOM_API Tensor mean(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
LOOM_API Tensor prod(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
// max/min gradient: split equally among the tied maxima (documented in docs/autograd.md).
LOOM_API Tensor max(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
LOOM_API Tensor min(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
LOOM_API Tensor var(const Tensor& x, const Axes& axes = {}, int64_t ddof = 0, bool keepdims = false);
LOOM_API Tensor std(const Tensor& x, const Axes& axes = {}, int64_t ddof = 0, bool keepdims = false);
LOOM_API Tensor logsumexp(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
LOOM_API Tensor all(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
LOOM_API Tensor any(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
// One integer axis: sum(x, 1) is sum(x, {1}). A template, so that `{}` and `{1, 2}` still mean Axes.
template <AxisIndex I> Tensor sum(const Tensor& x, I axis, bool keepdims = false) { return sum(x, Axes{static_cast<int64_t>(axis)}, keepdims); }
template <AxisIndex I> Tensor mean(const Tensor& x, I axis, bool keepdims = false) { return mean(x, Axes{static_cast<int64_t>(axis)}, keepdims); }
template <AxisIndex I> Tensor prod(const Tensor& x, I axis, bool keepdims = false) { return prod(x, Axes{static_cast<int64_t>(axis)}, keepdims); }
template <AxisIndex I> Tensor max(const Tensor& x, I axis, bool keepdims = false) { return max(x, Axes{static_cast<int64_t>(axis)}, keepdims); }
template <AxisIndex I> Tensor min(const Tensor& x, I axis, bool keepdims = false) { return min(x, Axes{static_cast<int64_t>(axis)}, keepdims); }
template <AxisIndex I> Tensor var(const Tensor& x, I axis, int64_t ddof = 0, bool keepdims = false) {
  return var(x, Axes{static_cast<int64_t>(axis)}, ddof, keepdims);
}
template <AxisIndex I> Tensor std(const Tensor& x, I axis, int64_t ddof = 0, bool keepdims = false) {
  return std(x, Axes{static_cast<int64_t>(axis)}, ddof, keepdims);
}
template <AxisIndex I> Tensor logsumexp(const Tensor& x, I axis, bool keepdims = false) {
  return logsumexp(x, Axes{static_cast<int64_t>(axis)}, keepdims);
}
template <AxisIndex I> Tensor all(const Tensor& x, I axis, bool keepdims = false) { return all(x, Axes{static_cast<int64_t>(axis)}, keepdims); }
template <AxisIndex I> Tensor any(const Tensor& x, I axis, bool keepdims = false) { return any(x, Axes{static_cast<int64_t>(axis)}, keepdims); }
// First index of the extreme value along `axis`; over the flattened tensor when axis is empty.
LOOM_API Tensor argmax(const Tensor& x, std::optional<int64_t> axis = std::nullopt, bool keepdims = false);
LOOM_API Tensor argmin(const Tensor& x, std::optional<int64_t> axis = std::nullopt, bool keepdims = false);
LOOM_API Tensor cumsum(const Tensor& x, int64_t axis);
LOOM_API Tensor count_nonzero(const Tensor& x);

// softmax family (composites of the ops above, stable by max subtraction)
LOOM_API Tensor softmax(const Tensor& x, int64_t axis = -1);
LOOM_API Tensor log_softmax(const Tensor& x, int64_t axis = -1);

}  // namespace loom
