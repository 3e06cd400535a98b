#pragma once
// The op registry's parts (op_registry(), loom/ops/registry.h): each source of ops lists its own
// ops at its end, beside their definitions, and registry.cpp joins the lists, as the ONNX
// importer joins its converters. A new op is one entry in its source's list; a new source of ops
// adds its list here and in registry.cpp's kParts.
#include <vector>

#include "loom/ops/registry.h"

namespace loom::detail {

std::vector<OpInfo> elementwise_ops();  // src/ops/elementwise.cpp
std::vector<OpInfo> reduction_ops();  // src/ops/reduction.cpp
std::vector<OpInfo> linalg_ops();  // src/ops/linalg.cpp
std::vector<OpInfo> linalg_norm_ops();  // src/ops/linalg_norm.cpp
std::vector<OpInfo> einsum_ops();  // src/ops/einsum.cpp
std::vector<OpInfo> linalg_decomposition_ops();  // src/ops/linalg_decompositions.cpp
std::vector<OpInfo> sparse_ops();  // src/ops/sparse.cpp
std::vector<OpInfo> manipulation_ops();  // src/ops/manipulation.cpp
std::vector<OpInfo> indexing_ops();  // src/ops/indexing.cpp
std::vector<OpInfo> conv_ops();  // src/ops/conv.cpp
std::vector<OpInfo> pooling_ops();  // src/ops/pooling.cpp
std::vector<OpInfo> normalization_ops();  // src/ops/normalization.cpp
std::vector<OpInfo> nn_ops();  // src/ops/nn.cpp
std::vector<OpInfo> loss_ops();  // src/ops/losses.cpp
std::vector<OpInfo> attention_ops();  // src/ops/attention.cpp
std::vector<OpInfo> recurrent_ops();  // src/ops/recurrent.cpp
std::vector<OpInfo> rotary_ops();  // src/ops/rotary.cpp

}  // namespace loom::detail
