// ONNX import, the reading half (docs/onnx.md, "Hostile files"): a ModelProto from untrusted
// bytes, and its tensors as Loom tensors with every size checked against the data before
// anything is allocated; external data only from inside the model's folder.
#include "io/onnx_read.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>

#include "loom/core/error.h"
#include "loom/core/file.h"
#include "loom/core/memory.h"
#include "loom/ops/creation.h"

namespace loom::io::detail {

namespace {

constexpr size_t kMaxModelBytes = (size_t{1} << 31) - 1;  // protobuf's limit
constexpr int kMaxRank = 16;
constexpr int64_t kMaxDim = int64_t{1} << 40;
constexpr int64_t kMaxElements = int64_t{1} << 33;

std::string tname(const onnx::TensorProto& t) { return "tensor '" + t.name() + "'"; }

// The element count of the tensor's dims, bounded; IOError naming the tensor otherwise.
int64_t checked_numel(const onnx::TensorProto& t, Shape& shape) {
  if (t.dims_size() > kMaxRank) throw IOError("import_onnx: " + tname(t) + " has " + std::to_string(t.dims_size()) + " dimensions (at most 16)");
  int64_t n = 1;
  shape.clear();
  for (int64_t d : t.dims()) {
    if (d < 0 || d > kMaxDim) throw IOError("import_onnx: " + tname(t) + " has the dimension " + std::to_string(d));
    shape.push_back(d);
    if (d != 0 && n > kMaxElements / d) throw IOError("import_onnx: " + tname(t) + " has more than 2^33 elements");
    n *= d;
  }
  return n;
}

// The machine's physical memory: no import can hold more (the default cap).
uint64_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return uint64_t{1} << 40;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

// Counts `bytes` of `t` against the import's cap and the memory limit, before they are allocated.
void reserve(const onnx::TensorProto& t, uint64_t bytes, ExternalReads& reads) {
  const bool by_default = reads.max_bytes == 0;
  const uint64_t cap = by_default ? physical_memory() : reads.max_bytes;
  if (bytes > cap || reads.loaded > cap - bytes)
    throw OutOfMemoryError("import_onnx: " + tname(t) + " takes " + std::to_string(bytes) + " bytes, which with the " +
                           std::to_string(reads.loaded) + " bytes of the tensors before it is past the import's limit of " +
                           std::to_string(cap) + " bytes (" +
                           (by_default ? "by default the machine's physical memory" : "OnnxImportOptions::max_tensor_bytes") +
                           "; raise OnnxImportOptions::max_tensor_bytes to load more)");
  const MemoryStats ms = memory_stats();
  if (ms.limit_bytes >= 0 && static_cast<int64_t>(bytes) > ms.limit_bytes - ms.current_bytes)
    throw OutOfMemoryError("import_onnx: " + tname(t) + " takes " + std::to_string(bytes) + " bytes; " + std::to_string(ms.current_bytes) +
                           " are in use and the memory limit (set_memory_limit) is " + std::to_string(ms.limit_bytes));
  reads.loaded += bytes;
}

// A tensor of `shape` to load `t` into; OutOfMemoryError naming `t` when the system has not the memory.
Tensor allocate(const Shape& shape, DType dtype, const onnx::TensorProto& t) {
  try {
    return empty(shape, dtype);
  } catch (const std::bad_alloc&) {
    throw OutOfMemoryError("import_onnx: " + tname(t) + ": the system could not allocate its " + std::to_string(shape_numel(shape) * static_cast<int64_t>(itemsize(dtype))) + " bytes");
  }
}

template <class T, class Field>
Tensor from_field(const Field& f, int64_t n, const Shape& shape, DType dtype, const onnx::TensorProto& t) {
  if (static_cast<int64_t>(f.size()) != n)
    throw IOError("import_onnx: " + tname(t) + " holds " + std::to_string(f.size()) + " values for " + std::to_string(n) + " elements");
  Tensor out = allocate(shape, dtype, t);
  T* p = static_cast<T*>(out.data_ptr());
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(f.Get(static_cast<int>(i)));
  return out;
}

void normalize_bools(Tensor& out) {
  if (out.dtype() != DType::Bool) return;  // one byte per bool; anything but 0 is true
  auto* p = static_cast<uint8_t*>(out.data_ptr());
  for (int64_t i = 0; i < out.numel(); ++i) p[i] = p[i] != 0;
}

Tensor from_bytes(const char* data, size_t size, int64_t n, const Shape& shape, DType dtype, const onnx::TensorProto& t) {
  const size_t want = static_cast<size_t>(n) * itemsize(dtype);
  if (size != want)
    throw IOError("import_onnx: " + tname(t) + " holds " + std::to_string(size) + " bytes for " + std::to_string(n) + " elements (" +
                  std::to_string(want) + " bytes)");
  Tensor out = allocate(shape, dtype, t);
  if (want) std::memcpy(out.data_ptr(), data, want);
  normalize_bools(out);
  return out;
}

uint64_t parse_u64(const std::string& s, const onnx::TensorProto& t, const char* what) {
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos)
    throw IOError("import_onnx: " + tname(t) + ": external data " + what + " '" + s + "' is not a non-negative integer");
  return std::stoull(s);
}

// The external data of `t` into `dst` (`want` bytes): `location` relative to `folder`, staying inside it.
void read_external(const onnx::TensorProto& t, const std::string& folder, size_t want, ExternalReads& reads, char* dst) {
  if (folder.empty()) throw IOError("import_onnx: " + tname(t) + " has external data; decode_onnx reads models whose tensors are inside (import_onnx reads files)");
  std::string location;
  uint64_t offset = 0, length = 0;
  bool has_length = false;
  for (const auto& e : t.external_data()) {
    if (e.key() == "location") location = e.value();
    else if (e.key() == "offset") offset = parse_u64(e.value(), t, "offset");
    else if (e.key() == "length") length = parse_u64(e.value(), t, "length"), has_length = true;
  }
  namespace fs = std::filesystem;
  if (location.empty()) throw IOError("import_onnx: " + tname(t) + " has external data without a location");
  if (location.find('\0') != std::string::npos) throw IOError("import_onnx: " + tname(t) + ": its external data location holds a NUL byte");
  const fs::path loc(location);
  if (loc.is_absolute() || loc.has_root_name() || loc.has_root_directory())
    throw IOError("import_onnx: " + tname(t) + ": external data location '" + location + "' is an absolute path (it must be inside the model's folder)");
  for (const auto& part : loc)
    if (part == "..") throw IOError("import_onnx: " + tname(t) + ": external data location '" + location + "' leaves the model's folder ('..')");
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(fs::path(folder), ec);
  if (ec) throw IOError("import_onnx: the model's folder '" + folder + "' cannot be resolved: " + ec.message());
  const fs::path full = fs::weakly_canonical(base / loc, ec);  // symlinks resolved
  if (ec) throw IOError("import_onnx: " + tname(t) + ": external data '" + location + "' cannot be resolved: " + ec.message());
  const auto rel = full.lexically_relative(base);
  if (rel.empty() || *rel.begin() == ".." || rel.is_absolute())
    throw IOError("import_onnx: " + tname(t) + ": external data '" + location + "' resolves to '" + full.string() +
                  "', outside the model's folder (a symlink leading out)");
  RegularFile f(full.string(), "import_onnx");
  if (!has_length) length = want;
  if (length != want)
    throw IOError("import_onnx: " + tname(t) + ": external data length " + std::to_string(length) + " for " + std::to_string(want) + " bytes");
  if (offset > f.size() || length > f.size() - offset)
    throw IOError("import_onnx: " + tname(t) + ": external data [" + std::to_string(offset) + ", +" + std::to_string(length) + ") past the end of '" +
                  location + "' (" + std::to_string(f.size()) + " bytes)");
  if (length > 0) {
    auto& ranges = reads.ranges[full.string()];
    auto next = ranges.lower_bound(offset);
    const bool overlaps = (next != ranges.end() && next->first < offset + length) ||
                          (next != ranges.begin() && std::prev(next)->second > offset);
    if (overlaps)
      throw IOError("import_onnx: " + tname(t) + ": external data [" + std::to_string(offset) + ", +" + std::to_string(length) + ") of '" +
                    location + "' overlaps another tensor's");
    ranges.emplace(offset, offset + length);
  }
  size_t done = 0;
  while (done < length) {
    const ssize_t r = ::pread(f.fd(), dst + done, length - done, static_cast<off_t>(offset + done));
    if (r <= 0) throw IOError("import_onnx: " + tname(t) + ": reading its external data from '" + location + "' failed");
    done += static_cast<size_t>(r);
  }
}

}  // namespace

onnx::ModelProto parse_model(const std::string& bytes) {
  if (bytes.size() > kMaxModelBytes) throw IOError("import_onnx: the model is past protobuf's 2 GB limit");
  onnx::ModelProto m;
  if (!m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw IOError("import_onnx: not an ONNX model (the bytes do not parse as a ModelProto)");
  if (!m.has_graph()) throw IOError("import_onnx: the model has no graph");
  return m;
}

onnx::ModelProto read_model_file(const std::string& path) {
  {
    RegularFile f(path, "import_onnx");
    if (f.size() > kMaxModelBytes) throw IOError("import_onnx: '" + path + "' is past protobuf's 2 GB limit");
  }
  return parse_model(read_file(path));
}

Tensor to_tensor(const onnx::TensorProto& t, const std::string& folder, ExternalReads& reads) {
  if (t.has_segment()) throw IOError("import_onnx: " + tname(t) + " is segmented (not supported)");
  const auto dtype = loom_dtype(t.data_type());
  if (!dtype) throw IOError("import_onnx: " + tname(t) + " has the element type " + std::to_string(t.data_type()) + ", which Loom has no dtype for");
  Shape shape;
  const int64_t n = checked_numel(t, shape);
  const size_t want = static_cast<size_t>(n) * itemsize(*dtype);
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    if (folder.empty()) throw IOError("import_onnx: " + tname(t) + " has external data; decode_onnx reads models whose tensors are inside (import_onnx reads files)");
    reserve(t, want, reads);
    Tensor out = allocate(shape, *dtype, t);
    read_external(t, folder, want, reads, static_cast<char*>(out.data_ptr()));
    normalize_bools(out);
    return out;
  }
  reserve(t, want, reads);
  if (t.has_raw_data()) return from_bytes(t.raw_data().data(), t.raw_data().size(), n, shape, *dtype, t);
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT: return from_field<float>(t.float_data(), n, shape, *dtype, t);
    case onnx::TensorProto::DOUBLE: return from_field<double>(t.double_data(), n, shape, *dtype, t);
    case onnx::TensorProto::INT64: return from_field<int64_t>(t.int64_data(), n, shape, *dtype, t);
    case onnx::TensorProto::INT32: return from_field<int32_t>(t.int32_data(), n, shape, *dtype, t);
    case onnx::TensorProto::UINT8: return from_field<uint8_t>(t.int32_data(), n, shape, *dtype, t);
    case onnx::TensorProto::BOOL: {
      Tensor out = from_field<uint8_t>(t.int32_data(), n, shape, *dtype, t);
      auto* p = static_cast<uint8_t*>(out.data_ptr());
      for (int64_t i = 0; i < n; ++i) p[i] = p[i] != 0;
      return out;
    }
    default: break;
  }
  throw IOError("import_onnx: " + tname(t) + ": its element type is read from raw data only");
}

}  // namespace loom::io::detail
