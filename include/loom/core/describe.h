#pragma once
// How error messages name a tensor: its dtype and shape, "float32 (2, 3)".
#include <string>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

// "float32 (2, 3)"; "undefined" for a default-constructed tensor.
LOOM_API std::string describe(const Tensor& t);

}  // namespace loom
