#pragma once
// Private to src/data: images decoded into interleaved (height, width, channels) uint8 pixels, the
// form the decoders produce, for ImageFolder's fused decode-resize path (src/data/image_folder.cpp).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "loom/data/image.h"

namespace loom::data::detail {

struct DecodedImage {
  int64_t height = 0, width = 0, channels = 0;  // channels: 1 (ImageMode::Gray) or 3 (RGB)
  std::unique_ptr<uint8_t[]> pixels;           // height * width * channels, row-major HWC
};

DecodedImage decode_hwc(const void* data, size_t size, const ImageReadOptions& options, const std::string& name);

}  // namespace loom::data::detail
