#pragma once
// JPEG and PNG images to and from tensors (libjpeg-turbo's TurboJPEG API and libpng).
//
// Decoded images are uint8 tensors of shape (channels, height, width) — Loom's convolutions take
// NCHW — with 1 channel (ImageMode::Gray) or 3 (ImageMode::RGB), whatever the file holds: colour
// images become gray with PIL's convert("L") weights (L = R 299/1000 + G 587/1000 + B 114/1000,
// rounded), gray ones are repeated into R, G and B; an alpha channel is dropped, palettes are
// expanded and 16-bit PNG samples keep their high byte (as PIL reads them). No gamma or colour
// profile is applied.
//
// Files are untrusted: a corrupt, truncated or unsupported image is an IOError naming the file (or
// the name given) and the reason, and the width x height declared in the header is checked
// against `max_pixels` before any pixel buffer is allocated.
#include <cstddef>
#include <cstdint>
#include <string>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom::data {

enum class ImageMode { Gray, RGB };

// PIL's decompression-bomb limit (Image.MAX_IMAGE_PIXELS * 2, where PIL raises rather than warns).
inline constexpr int64_t kDefaultMaxImagePixels = 178956970;

struct LOOM_API ImageReadOptions {
  ImageMode mode = ImageMode::RGB;
  // Images declaring more pixels (width x height) than this are refused before decoding.
  int64_t max_pixels = kDefaultMaxImagePixels;
};

// Decodes a JPEG or PNG image held in memory (the format is told by its signature) into a uint8
// (C, H, W) tensor. `name` is what error messages call the bytes (a file name).
LOOM_API Tensor decode_image(const void* data, size_t size, const ImageReadOptions& options = {},
                             const std::string& name = "<memory>");
// Reads and decodes a JPEG or PNG file (a regular file only) into a uint8 (C, H, W) tensor.
LOOM_API Tensor read_image(const std::string& path, const ImageReadOptions& options = {});

// Encodes a uint8 (C, H, W) tensor with C = 1 (gray) or 3 (RGB) as a PNG (8-bit, not interlaced)
// or a baseline JPEG of the given quality (1-100; 4:2:0 chroma subsampling for RGB, as PIL's
// default). Returns the file's bytes (write_file_atomic writes them).
LOOM_API std::string encode_png(const Tensor& image);
LOOM_API std::string encode_jpeg(const Tensor& image, int quality = 75);

}  // namespace loom::data
