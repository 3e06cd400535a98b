// IDX format: two zero bytes, a type code, the rank, then one big-endian uint32 per axis,
// then the elements in big-endian row-major order.
#include "loom/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "loom/ops/creation.h"

namespace loom::data {

namespace {

std::vector<unsigned char> read_all(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files too
  if (!f) throw IOError("read_idx: cannot open '" + path + "': " + std::strerror(errno));
  std::unique_ptr<gzFile_s, int (*)(gzFile)> guard(f, gzclose);
  std::vector<unsigned char> buf;
  unsigned char chunk[1 << 16];
  for (;;) {
    const int n = gzread(f, chunk, sizeof chunk);
    if (n < 0) {
      int err = 0;
      throw IOError("read_idx: '" + path + "' is not readable as IDX (gzip error: " + gzerror(f, &err) + ")");
    }
    if (n == 0) break;
    buf.insert(buf.end(), chunk, chunk + n);
  }
  return buf;
}

uint32_t be32(const unsigned char* p) { return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3]; }

}  // namespace

Tensor read_idx(const std::string& path) {
  const std::vector<unsigned char> buf = read_all(path);
  auto bad = [&](const std::string& what) { return IOError("read_idx: '" + path + "' is not a valid IDX file: " + what); };
  if (buf.size() < 4) throw bad("it has " + std::to_string(buf.size()) + " bytes, fewer than the 4-byte magic number");
  if (buf[0] != 0 || buf[1] != 0) throw bad("the magic number does not start with two zero bytes");
  DType dtype;
  size_t esize;
  switch (buf[2]) {
    case 0x08: dtype = DType::UInt8; esize = 1; break;
    case 0x0C: dtype = DType::Int32; esize = 4; break;
    case 0x0D: dtype = DType::Float32; esize = 4; break;
    case 0x0E: dtype = DType::Float64; esize = 8; break;
    default: throw bad("unsupported element type code 0x" + std::to_string(buf[2]) + " (supported: 0x08 uint8, 0x0C int32, 0x0D float32, 0x0E float64)");
  }
  const size_t rank = buf[3];
  if (buf.size() < 4 + 4 * rank) throw bad("the header declares " + std::to_string(rank) + " axes but the file ends inside it");
  Shape shape;
  size_t count = 1;
  for (size_t i = 0; i < rank; ++i) {
    const uint32_t d = be32(&buf[4 + 4 * i]);
    shape.push_back(d);
    if (d != 0 && count > SIZE_MAX / d) throw bad("the declared shape overflows");
    count *= d;
  }
  const size_t header = 4 + 4 * rank;
  const size_t expected = count * esize;
  if (buf.size() - header != expected)
    throw bad("the header declares shape " + shape_str(shape) + " (" + std::to_string(expected) + " data bytes) but the file has " +
              std::to_string(buf.size() - header) + " data bytes");
  std::vector<unsigned char> data(buf.begin() + static_cast<std::ptrdiff_t>(header), buf.end());
  if (esize > 1)
    for (size_t i = 0; i < count; ++i) std::reverse(data.begin() + i * esize, data.begin() + (i + 1) * esize);
  return from_data(data.data(), shape, dtype);
}

}  // namespace loom::data
