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
  // The header is read and checked first; then exactly the declared bytes are read (inflated)
  // and anything after them is refused, so that a small .gz cannot inflate without bound and a
  // header cannot make Loom allocate more than the file holds.
  detail::GzReader in(path, "read_idx");
  auto bad = [&](const std::string& what) { return IOError("read_idx: '" + path + "' is not a valid IDX file: " + what); };
  unsigned char head[4];
  const size_t got = in.read(head, 4);
  if (got < 4) throw bad("it has " + std::to_string(got) + " bytes, fewer than the 4-byte magic number");
  if (head[0] != 0 || head[1] != 0) throw bad("the magic number does not start with two zero bytes");
  DType dtype;
  size_t esize;
  switch (head[2]) {  // int8 and int16 (no Loom dtype) widen to int32
    case 0x08: dtype = DType::UInt8; esize = 1; break;
    case 0x09: dtype = DType::Int32; esize = 1; break;
    case 0x0B: dtype = DType::Int32; esize = 2; break;
    case 0x0C: dtype = DType::Int32; esize = 4; break;
    case 0x0D: dtype = DType::Float32; esize = 4; break;
    case 0x0E: dtype = DType::Float64; esize = 8; break;
    default: {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02X", head[2]);
      throw bad(std::string("unsupported element type code ") + code +
                " (supported: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64)");
    }
  }
  const size_t rank = head[3];
  std::vector<unsigned char> dims(4 * rank);
  if (in.read(dims.data(), dims.size()) != dims.size())
    throw bad("the header declares " + std::to_string(rank) + " axes but the file ends inside it");
  Shape shape;
  size_t count = 1;
  for (size_t i = 0; i < rank; ++i) {
    const uint32_t d = be32(&dims[4 * i]);
    shape.push_back(d);
    if (d != 0 && count > SIZE_MAX / d) throw bad("the declared shape overflows");
    count *= d;
  }
  const size_t header = 4 + 4 * rank;
  if (count > SIZE_MAX / esize) throw bad("the declared shape " + shape_str(shape) + " overflows the addressable size");
  const size_t expected = count * esize;
  auto mismatch = [&](const std::string& have) {
    return bad("the header declares shape " + shape_str(shape) + " (" + std::to_string(expected) + " data bytes) but the file has " +
               have + " data bytes");
  };
  // the checks above miss a product with a zero: (0, 2^32 - 1, ...) must not load either
  shape_nbytes(shape, itemsize(dtype), ("read_idx: '" + path + "' declares").c_str());
  // A plain file's size is known: check it before allocating anything.
  if (!in.compressed() && in.file_size() - header != expected) throw mismatch(std::to_string(in.file_size() - header));
  // A compressed one grows its buffer only as data actually arrives.
  std::vector<unsigned char> data;
  size_t done = 0;
  while (done < expected) {
    const size_t next = std::min(expected, std::max<size_t>(done * 2, size_t{1} << 20));
    data.resize(next);
    const size_t want = next - done;
    const size_t n = in.read(data.data() + done, want);
    done += n;
    if (n < want) break;  // the data ended
  }
  if (done < expected) throw mismatch(std::to_string(done));
  if (!in.at_end()) throw mismatch("more than " + std::to_string(expected));
  if (head[2] == 0x09 || head[2] == 0x0B) {
    std::vector<int32_t> wide(count);
    for (size_t i = 0; i < count; ++i)
      wide[i] = esize == 1 ? static_cast<int8_t>(data[i]) : static_cast<int16_t>((uint16_t(data[2 * i]) << 8) | data[2 * i + 1]);
    return from_data(wide.data(), shape, dtype, Device::cpu());
  }
  if (esize > 1)
    for (size_t i = 0; i < count; ++i) std::reverse(data.begin() + i * esize, data.begin() + (i + 1) * esize);
  return from_data(data.data(), shape, dtype, Device::cpu());
}

}  // namespace loom::data
