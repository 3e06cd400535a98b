#pragma once
// IDX files (the MNIST / Fashion-MNIST format), plain or gzip-compressed.
#include <string>

#include "loom/core/tensor.h"

namespace loom::data {

// Reads the whole file into a tensor of the file's element type (uint8 images and labels for
// MNIST). Throws IOError naming the file and what is wrong with it.
Tensor read_idx(const std::string& path);

}  // namespace loom::data
