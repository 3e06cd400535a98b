#include "loom/core/describe.h"

namespace loom {

std::string describe(const Tensor& t) {
  if (!t.defined()) return "undefined";
  return std::string(dtype_name(t.dtype())) + " " + shape_str(t.shape());
}

}  // namespace loom
