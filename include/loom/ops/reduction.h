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
// First index of the extreme value along `axis`; over the flattened tensor when axis is empty.
LOOM_API Tensor argmax(const Tensor& x, std::optional<int64_t> axis = std::nullopt, bool keepdims = false);
LOOM_API Tensor argmin(const Tensor& x, std::optional<int64_t> axis = std::nullopt, bool keepdims = false);
LOOM_API Tensor cumsum(const Tensor& x, int64_t axis);
LOOM_API Tensor count_nonzero(const Tensor& x);

// softmax family (composites of the ops above, stable by max subtraction)
LOOM_API Tensor softmax(const Tensor& x, int64_t axis = -1);
LOOM_API Tensor log_softmax(const Tensor& x, int64_t axis = -1);

}  // namespace loom
