#pragma once
// The indexing kernel slot that another op file calls too (nn.cpp's embedding backward adds rows
// into its table with it); defined, with the indexing ops' other slots, in indexing.cpp.
#include <cstdint>

#include "loom/core/tensor.h"
#include "ops/backend.h"

namespace loom::detail {

// dst[..., index[i], ...] += src[..., i, ...] along axis (index has any shape; src matches
// take's output). Filled by src/ops/cpu/index.cpp.
extern constinit const KernelSlot<void(const Tensor& dst, int64_t axis, const Tensor& index, const Tensor& src)> kIndexAdd;

}  // namespace loom::detail
