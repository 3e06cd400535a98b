// JPEG through libjpeg-turbo's TurboJPEG API (the 2.x functions Debian 12's libturbojpeg0-dev
// offers), PNG through libpng's classic API. libpng reports errors by longjmp to the setjmp of
// the caller: every libpng call that can fail is made from a small function below whose locals
// are all trivially destructible (a longjmp must not skip a destructor), and the buffers and
// handles are owned by their C++ callers, outside those functions.
#include <png.h>
#include <turbojpeg.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

#include "data/image_codec.h"
#include "loom/core/file.h"
#include "loom/ops/creation.h"

namespace loom::data {

namespace {

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw IOError("read_image: '" + name + "' " + what);
}

void check_pixels(int64_t width, int64_t height, const ImageReadOptions& options, const std::string& name, const char* format) {
  if (width < 1 || height < 1)
    fail(name, std::string("is not a valid ") + format + " image: it declares " + std::to_string(width) + " x " +
                   std::to_string(height) + " pixels");
  if (width > options.max_pixels / height)
    fail(name, "declares " + std::to_string(width) + " x " + std::to_string(height) + " pixels, more than the limit of " +
                   std::to_string(options.max_pixels) + " (ImageReadOptions::max_pixels)");
}

std::unique_ptr<uint8_t[]> buffer(size_t n) { return std::make_unique_for_overwrite<uint8_t[]>(n); }

// PIL's convert("L"): L = (R 19595 + G 38470 + B 7471 + 2^15) >> 16, weights 0.299, 0.587, 0.114 in 16 bits.
inline uint8_t luma(const uint8_t* p) { return static_cast<uint8_t>((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16); }

// Pixels of `src_channels` (1 gray, 2 gray + alpha, 3 RGB, 4 RGBA) to the mode's 1 or 3 channels.
detail::DecodedImage convert(std::unique_ptr<uint8_t[]> src, int64_t h, int64_t w, int src_channels, ImageMode mode) {
  const int out_c = mode == ImageMode::Gray ? 1 : 3;
  detail::DecodedImage img{h, w, out_c, nullptr};
  if (src_channels == out_c) {
    img.pixels = std::move(src);
    return img;
  }
  const size_t n = static_cast<size_t>(h) * static_cast<size_t>(w);
  img.pixels = buffer(n * static_cast<size_t>(out_c));
  const uint8_t* s = src.get();
  uint8_t* d = img.pixels.get();
  const bool color = src_channels >= 3;
  for (size_t i = 0; i < n; ++i, s += src_channels) {
    if (out_c == 1) {
      d[i] = color ? luma(s) : s[0];
    } else if (color) {
      d[3 * i] = s[0], d[3 * i + 1] = s[1], d[3 * i + 2] = s[2];
    } else {
      d[3 * i] = d[3 * i + 1] = d[3 * i + 2] = s[0];
    }
  }
  return img;
}

// --- JPEG

struct TjHandle {
  tjhandle h = nullptr;
  explicit TjHandle(tjhandle handle) : h(handle) {}
  ~TjHandle() {
    if (h) tjDestroy(h);
  }
  TjHandle(const TjHandle&) = delete;
  TjHandle& operator=(const TjHandle&) = delete;
};

// One decompressor per thread (the loader's workers decode concurrently; a handle is not
// shared), replaced after a failure: libjpeg's state after an error would leak into the next image.
thread_local TjHandle tj_decompressor(nullptr);

tjhandle decompressor() {
  if (!tj_decompressor.h) tj_decompressor.h = tjInitDecompress();
  if (!tj_decompressor.h)
    throw IOError(std::string("read_image: TurboJPEG could not start a decompressor: ") + tjGetErrorStr2(nullptr));
  return tj_decompressor.h;
}

[[noreturn]] void jpeg_fail(const std::string& name, const std::string& what) {
  tjDestroy(tj_decompressor.h);
  tj_decompressor.h = nullptr;
  fail(name, what);
}

detail::DecodedImage decode_jpeg(const uint8_t* data, size_t size, const ImageReadOptions& options, const std::string& name) {
  tjhandle tj = decompressor();
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, data, static_cast<unsigned long>(size), &width, &height, &subsamp, &colorspace) != 0)
    jpeg_fail(name, std::string("is not a valid JPEG image (corrupt or truncated): ") + tjGetErrorStr2(tj));
  check_pixels(width, height, options, name, "JPEG");
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK)
    fail(name, "is a CMYK JPEG image (supported: grayscale, YCbCr and RGB JPEG images)");
  const bool gray = colorspace == TJCS_GRAY;
  const int channels = gray ? 1 : 3;
  auto pixels = buffer(static_cast<size_t>(width) * static_cast<size_t>(height) * channels);
  // Accurate integer DCT and fancy upsampling (TurboJPEG's defaults, as PIL decodes); at most
  // 500 progressive scans, so that a small file cannot make the decoder work without end.
  if (tjDecompress2(tj, data, static_cast<unsigned long>(size), pixels.get(), width, 0, height, gray ? TJPF_GRAY : TJPF_RGB,
                    TJFLAG_LIMITSCANS) != 0) {
    const std::string msg = tjGetErrorStr2(tj);
    // A warning leaves a complete image, except when the data ends early (libjpeg fills the rest
    // with gray): that one is refused as PIL refuses truncated images; "extraneous bytes" and
    // the like, common in cameras' files, are accepted.
    if (tjGetErrorCode(tj) != TJERR_WARNING || msg.find("Premature end") != std::string::npos)
      jpeg_fail(name, "is not a valid JPEG image (corrupt or truncated): " + msg);
  }
  return convert(std::move(pixels), height, width, channels, options.mode);
}

// --- PNG

struct PngSource {
  const uint8_t* data;
  size_t size;
  size_t pos;
  char error[256];
};

void png_read_bytes(png_structp png, png_bytep out, size_t n) {
  auto* s = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > s->size - s->pos) png_error(png, "the file ends early (truncated)");
  std::memcpy(out, s->data + s->pos, n);
  s->pos += n;
}

void png_on_error(png_structp png, png_const_charp msg) {
  auto* s = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(s->error, sizeof s->error, "%s", msg ? msg : "unknown error");
  png_longjmp(png, 1);
}

void png_on_warning(png_structp, png_const_charp) {}  // ancillary-chunk problems: libpng skips the chunk

struct PngHeader {
  png_uint_32 width, height;
  int channels;  // after the transformations below
  size_t rowbytes;
  int passes;
};

// The functions that call into libpng after setjmp: trivially destructible locals only.
bool png_header(png_structp png, png_infop info, PngHeader* h) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  h->width = png_get_image_width(png, info);
  h->height = png_get_image_height(png, info);
  return true;
}

bool png_prepare(png_structp png, png_infop info, PngHeader* h) {
  if (setjmp(png_jmpbuf(png))) return false;
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_strip_16(png);  // the high byte, as PIL
  h->passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  h->channels = png_get_channels(png, info);
  h->rowbytes = png_get_rowbytes(png, info);
  return true;
}

bool png_pixels(png_structp png, const PngHeader* h, uint8_t* out) {
  if (setjmp(png_jmpbuf(png))) return false;
  for (int p = 0; p < h->passes; ++p)
    for (png_uint_32 y = 0; y < h->height; ++y) png_read_row(png, out + static_cast<size_t>(y) * h->rowbytes, nullptr);
  png_read_end(png, nullptr);  // the chunks after the image data, through IEND: a truncated file fails here
  return true;
}

struct PngRead {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngRead() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

detail::DecodedImage decode_png(const uint8_t* data, size_t size, const ImageReadOptions& options, const std::string& name) {
  PngSource src{data, size, 0, {0}};
  PngRead r;
  r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
  if (!r.png) fail(name, "could not be read: libpng could not start");
  r.info = png_create_info_struct(r.png);
  if (!r.info) fail(name, "could not be read: libpng could not start");
  png_set_read_fn(r.png, &src, png_read_bytes);
  png_set_chunk_malloc_max(r.png, 8u << 20);  // text and profile chunks: at most 8 MiB each
  const auto bad = [&] { fail(name, std::string("is not a valid PNG image: ") + src.error); };
  PngHeader h{};
  if (!png_header(r.png, r.info, &h)) bad();
  check_pixels(h.width, h.height, options, name, "PNG");
  if (!png_prepare(r.png, r.info, &h)) bad();
  if (h.channels < 1 || h.channels > 4 || h.rowbytes != static_cast<size_t>(h.width) * static_cast<size_t>(h.channels))
    fail(name, "is a PNG image of an unsupported layout (" + std::to_string(h.channels) + " channels, " +
                   std::to_string(h.rowbytes) + " bytes a row)");
  auto pixels = buffer(h.rowbytes * h.height);
  if (!png_pixels(r.png, &h, pixels.get())) bad();
  return convert(std::move(pixels), h.height, h.width, h.channels, options.mode);
}

const uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

}  // namespace

namespace detail {

DecodedImage decode_hwc(const void* data, size_t size, const ImageReadOptions& options, const std::string& name) {
  if (options.max_pixels < 1)
    throw ValueError("read_image: max_pixels must be >= 1, got " + std::to_string(options.max_pixels));
  const auto* p = static_cast<const uint8_t*>(data);
  if (size >= 8 && std::memcmp(p, kPngSignature, 8) == 0) return decode_png(p, size, options, name);
  if (size >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF) return decode_jpeg(p, size, options, name);
  fail(name, "is neither a JPEG nor a PNG image (its first bytes are not either signature; " + std::to_string(size) +
                 " bytes)");
}

}  // namespace detail

Tensor decode_image(const void* data, size_t size, const ImageReadOptions& options, const std::string& name) {
  const detail::DecodedImage img = detail::decode_hwc(data, size, options, name);
  const int64_t c = img.channels, hw = img.height * img.width;
  Tensor out = empty({c, img.height, img.width}, UInt8, Device::cpu());
  uint8_t* d = out.data<uint8_t>();
  const uint8_t* s = img.pixels.get();
  for (int64_t k = 0; k < c; ++k)
    for (int64_t i = 0; i < hw; ++i) d[k * hw + i] = s[i * c + k];
  return out;
}

Tensor read_image(const std::string& path, const ImageReadOptions& options) {
  const std::string bytes = read_file(path);
  return decode_image(bytes.data(), bytes.size(), options, path);
}

// --- encoders

namespace {

struct ChwImage {
  int64_t c, h, w;
  std::unique_ptr<uint8_t[]> hwc;
};

ChwImage interleave(const Tensor& image, const char* who) {
  if (!image.defined()) throw ValueError(std::string(who) + ": the image is undefined");
  if (image.dtype() != UInt8)
    throw DTypeError(std::string(who) + ": the image has dtype " + dtype_name(image.dtype()) + " (valid: uint8)");
  if (image.ndim() != 3 || (image.dim(0) != 1 && image.dim(0) != 3) || image.dim(1) < 1 || image.dim(2) < 1)
    throw ShapeError(std::string(who) + ": the image has shape " + shape_str(image.shape()) +
                     " (valid: (C, H, W) with C = 1 or 3 and H, W >= 1)");
  const Tensor x = image.to(Device::cpu()).contiguous();
  ChwImage out{x.dim(0), x.dim(1), x.dim(2), nullptr};
  const int64_t hw = out.h * out.w;
  out.hwc = buffer(static_cast<size_t>(hw * out.c));
  const uint8_t* s = x.data<uint8_t>();
  for (int64_t k = 0; k < out.c; ++k)
    for (int64_t i = 0; i < hw; ++i) out.hwc[static_cast<size_t>(i * out.c + k)] = s[k * hw + i];
  return out;
}

struct PngSink {
  std::string* out;
  char error[256];
};

void png_write_bytes(png_structp png, png_bytep data, size_t n) {
  auto* s = static_cast<PngSink*>(png_get_io_ptr(png));
  bool ok = true;
  try {
    s->out->append(reinterpret_cast<const char*>(data), n);
  } catch (...) {
    ok = false;
  }
  if (!ok) png_error(png, "out of memory");  // outside the handler: the longjmp leaves no exception behind
}

void png_flush(png_structp) {}

void png_on_write_error(png_structp png, png_const_charp msg) {
  auto* s = static_cast<PngSink*>(png_get_error_ptr(png));
  std::snprintf(s->error, sizeof s->error, "%s", msg ? msg : "unknown error");
  png_longjmp(png, 1);
}

bool png_write_all(png_structp png, png_infop info, const ChwImage* img) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_IHDR(png, info, static_cast<png_uint_32>(img->w), static_cast<png_uint_32>(img->h), 8,
               img->c == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  const size_t row = static_cast<size_t>(img->w * img->c);
  for (int64_t y = 0; y < img->h; ++y) png_write_row(png, img->hwc.get() + static_cast<size_t>(y) * row);
  png_write_end(png, nullptr);
  return true;
}

struct PngWrite {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngWrite() { png_destroy_write_struct(&png, info ? &info : nullptr); }
};

}  // namespace

std::string encode_png(const Tensor& image) {
  const ChwImage img = interleave(image, "encode_png");
  if (img.w > 0x7fffffff || img.h > 0x7fffffff) throw ValueError("encode_png: the image is too large for PNG");
  std::string out;
  PngSink sink{&out, {0}};
  PngWrite w;
  w.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink, png_on_write_error, png_on_warning);
  if (!w.png) throw IOError("encode_png: libpng could not start");
  w.info = png_create_info_struct(w.png);
  if (!w.info) throw IOError("encode_png: libpng could not start");
  png_set_write_fn(w.png, &sink, png_write_bytes, png_flush);
  if (!png_write_all(w.png, w.info, &img)) throw IOError(std::string("encode_png: ") + sink.error);
  return out;
}

std::string encode_jpeg(const Tensor& image, int quality) {
  if (quality < 1 || quality > 100) throw ValueError("encode_jpeg: quality must be in 1-100, got " + std::to_string(quality));
  const ChwImage img = interleave(image, "encode_jpeg");
  if (img.w > 65535 || img.h > 65535)
    throw ValueError("encode_jpeg: an image of " + std::to_string(img.w) + " x " + std::to_string(img.h) +
                     " pixels is too large for JPEG (at most 65535 x 65535)");
  TjHandle tj(tjInitCompress());
  if (!tj.h) throw IOError(std::string("encode_jpeg: TurboJPEG could not start a compressor: ") + tjGetErrorStr2(nullptr));
  unsigned char* jpeg = nullptr;
  unsigned long jpeg_size = 0;
  const bool gray = img.c == 1;
  const int rc = tjCompress2(tj.h, img.hwc.get(), static_cast<int>(img.w), 0, static_cast<int>(img.h), gray ? TJPF_GRAY : TJPF_RGB,
                             &jpeg, &jpeg_size, gray ? TJSAMP_GRAY : TJSAMP_420, quality, 0);
  std::unique_ptr<unsigned char, void (*)(unsigned char*)> owned(jpeg, [](unsigned char* p) { tjFree(p); });
  if (rc != 0) throw IOError(std::string("encode_jpeg: ") + tjGetErrorStr2(tj.h));
  return std::string(reinterpret_cast<const char*>(jpeg), jpeg_size);
}

}  // namespace loom::data
