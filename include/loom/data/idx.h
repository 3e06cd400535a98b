#pragma once
// IDX files (the MNIST / Fashion-MNIST format), plain or gzip-compressed.
#include <string>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom::data {

// Reads the whole file into a tensor of the file's element type (uint8 images and labels for
// MNIST; int8 and int16 files widen to int32). The declared shape must match the data exactly
// (no read past the data, no overflow of huge declared dimensions). Throws IOError naming the
// file and what is wrong with it (cannot open, truncated gzip, bad magic, size mismatch).
LOOM_API Tensor read_idx(const std::string& path);

}  // namespace loom::data
