#pragma once
// The list of every public op: its name and whether it has a gradient. Tests walk this list
// and fail when an op has no reference check or no gradient check.
#include <string>
#include <vector>

#include "loom/core/api.h"

namespace loom {

struct LOOM_API OpInfo {
  std::string name;
  std::string category;  // elementwise, reduction, linalg, manipulation, indexing, creation, random, nn
  bool differentiable;
};

LOOM_API const std::vector<OpInfo>& op_registry();
LOOM_API const OpInfo* find_op(const std::string& name);

}  // namespace loom
