// IDX format: two zero bytes, a type code, the rank, then one big-endian uint32 per axis,
// then the elements in big-endian row-major order.
#include "loom/data/idx.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "data/gz_file.h"
#include "loom/ops/creation.h"

namespace loom::data {

namespace {

uint32_t be32(const unsigned char* p) { return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3]; }

}  // namespace

Tensor read_idx(const std::string& path) {
  const std::string bytes = detail::read_maybe_gzip(path, "read_idx");
  const auto* buf = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t size = bytes.size();
  auto bad = [&](const std::string& what) { return IOError("read_idx: '" + path + "' is not a valid IDX file: " + what); };
  if (size < 4) throw bad("it has " + std::to_string(size) + " bytes, fewer than the 4-byte magic number");
  if (buf[0] != 0 || buf[1] != 0) throw bad("the magic number does not start with two zero bytes");
  DType dtype;
  size_t esize;
  switch (buf[2]) {  // int8 and int16 (no Loom dtype) widen to int32
    case 0x08: dtype = DType::UInt8; esize = 1; break;
    case 0x09: dtype = DType::Int32; esize = 1; break;
    case 0x0B: dtype = DType::Int32; esize = 2; break;
    case 0x0C: dtype = DType::Int32; esize = 4; break;
    case 0x0D: dtype = DType::Float32; esize = 4; break;
    case 0x0E: dtype = DType::Float64; esize = 8; break;
    default: {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02X", buf[2]);
      throw bad(std::string("unsupported element type code ") + code +
                " (supported: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64)");
    }
  }
  const size_t rank = buf[3];
  if (size < 4 + 4 * rank) throw bad("the header declares " + std::to_string(rank) + " axes but the file ends inside it");
  Shape shape;
  size_t count = 1;
  for (size_t i = 0; i < rank; ++i) {
    const uint32_t d = be32(&buf[4 + 4 * i]);
    shape.push_back(d);
    if (d != 0 && count > SIZE_MAX / d) throw bad("the declared shape overflows");
    count *= d;
  }
  const size_t header = 4 + 4 * rank;
  if (count > SIZE_MAX / esize) throw bad("the declared shape " + shape_str(shape) + " overflows the addressable size");
  const size_t expected = count * esize;
  if (size - header != expected)
    throw bad("the header declares shape " + shape_str(shape) + " (" + std::to_string(expected) + " data bytes) but the file has " +
              std::to_string(size - header) + " data bytes");
  // the checks above miss a product with a zero: (0, 2^32 - 1, ...) must not load either
  shape_nbytes(shape, itemsize(dtype), ("read_idx: '" + path + "' declares").c_str());
  const unsigned char* src = buf + header;
  if (buf[2] == 0x09 || buf[2] == 0x0B) {
    std::vector<int32_t> wide(count);
    for (size_t i = 0; i < count; ++i)
      wide[i] = esize == 1 ? static_cast<int8_t>(src[i]) : static_cast<int16_t>((uint16_t(src[2 * i]) << 8) | src[2 * i + 1]);
    return from_data(wide.data(), shape, dtype, Device::cpu());
  }
  std::vector<unsigned char> data(src, buf + size);
  if (esize > 1)
    for (size_t i = 0; i < count; ++i) std::reverse(data.begin() + i * esize, data.begin() + (i + 1) * esize);
  return from_data(data.data(), shape, dtype, Device::cpu());
}

}  // namespace loom::data
