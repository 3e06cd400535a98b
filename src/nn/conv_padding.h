#pragma once
// The convolution layers' padding rule, a declared interface of nn for the parts above it: the
// ONNX exporter writes a Conv's pads by it rather than by a copy of the rule.
#include <cstdint>
#include <utility>
#include <vector>

#include "loom/nn/conv.h"

namespace loom::nn {

// The zeros a Conv1D or Conv2D of these attributes adds, (before, after) per spatial axis: the
// one rule its shapes, its construction's checks and the ONNX exporter read. ValueError for a
// padding these attributes cannot take (an unknown mode, "same" with a stride other than 1,
// values out of [0, 2^31] or not 1, one or two per axis).
std::vector<std::pair<int64_t, int64_t>> conv_padding(const ConvAttributes& attributes);

}  // namespace loom::nn
