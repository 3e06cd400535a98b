#include "loom/ops/registry.h"

#include <algorithm>
#include <stdexcept>

#include "ops/registry_parts.h"

namespace loom {

namespace {

// The sources' lists (src/ops/registry_parts.h), in the order op_registry() lists them.
constexpr std::vector<OpInfo> (*kParts[])() = {
    &detail::elementwise_ops,
    &detail::reduction_ops,
    &detail::linalg_ops,
    &detail::linalg_norm_ops,
    &detail::einsum_ops,
    &detail::linalg_decomposition_ops,
    &detail::sparse_ops,
    &detail::manipulation_ops,
    &detail::indexing_ops,
    &detail::conv_ops,
    &detail::pooling_ops,
    &detail::normalization_ops,
    &detail::nn_ops,
    &detail::loss_ops,
    &detail::attention_ops,
    &detail::recurrent_ops,
    &detail::rotary_ops,
};

std::vector<OpInfo> join_parts() {
  std::vector<OpInfo> all;
  for (const auto part : kParts)
    for (OpInfo& op : part()) {
      // one entry per name: find_op and the coverage tests key on it
      if (std::find_if(all.begin(), all.end(), [&](const OpInfo& o) { return o.name == op.name; }) != all.end())
        throw std::logic_error("op_registry: op '" + op.name + "' is listed twice");
      all.push_back(std::move(op));
    }
  return all;
}

}  // namespace

const std::vector<OpInfo>& op_registry() {
  static const std::vector<OpInfo> ops = join_parts();
  return ops;
}

const OpInfo* find_op(const std::string& name) {
  for (const auto& op : op_registry())
    if (op.name == name) return &op;
  return nullptr;
}

}  // namespace loom
