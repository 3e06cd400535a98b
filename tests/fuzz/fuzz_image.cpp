// Images: data::decode_image on the bytes (JPEG or PNG by signature), in both modes, with a pixel
// limit of 2^22 so that a header's declared size, checked before allocating, bounds the memory.
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (loom::data::ImageMode mode : {loom::data::ImageMode::RGB, loom::data::ImageMode::Gray})
    loom_fuzz::expect_loom_errors("image", [&] {
      loom::data::decode_image(data, size, {.mode = mode, .max_pixels = int64_t{1} << 22}, "<fuzz>");
    });
  return 0;
}
