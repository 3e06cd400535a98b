#include "loom/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <functional>
#include <set>
#include <vector>

#include "core/json_util.h"
#include "loom/core/file.h"
#include "loom/ops/creation.h"

namespace loom::io {

using json = nlohmann::json;

namespace {

// The format's limit (the reference implementation refuses larger headers).
constexpr uint64_t kMaxHeader = 100'000'000;

struct DTypeName {
  const char* name;
  std::optional<DType> dtype;
};
// Every dtype the format defines; those Loom lacks are rejected by name, not as unknown.
const DTypeName kDTypes[] = {
    {"BOOL", Bool},         {"U8", UInt8},          {"I32", Int32},         {"I64", Int64},
    {"F16", Float16},       {"BF16", BFloat16},     {"F32", Float32},       {"F64", Float64},
    {"I8", std::nullopt},   {"I16", std::nullopt},  {"U16", std::nullopt},  {"U32", std::nullopt},
    {"U64", std::nullopt},  {"F8_E5M2", std::nullopt}, {"F8_E4M3", std::nullopt},
    {"F8_E8M0", std::nullopt}, {"F6_E2M3", std::nullopt}, {"F6_E3M2", std::nullopt},
    {"F4", std::nullopt},   {"C64", std::nullopt}};

// Reverses the bytes of each element in place (only on big-endian hosts).
void to_little_endian(char* p, size_t n_bytes, size_t item) {
  if constexpr (std::endian::native == std::endian::big) {
    if (item > 1)
      for (size_t i = 0; i + item <= n_bytes; i += item) std::reverse(p + i, p + i + item);
  }
}

// Where the bytes come from: a file (read with pread, never past its size) or memory.
struct Source {
  std::string name;
  uint64_t size = 0;
  std::function<void(uint64_t offset, uint64_t length, void* dst)> read;
};

[[noreturn]] void bad(const Source& src, const std::string& problem) {
  throw IOError("load_safetensors: '" + src.name + "': " + problem);
}

std::string u64s(uint64_t v) { return std::to_string(v); }

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
  bool int8 = false;  // I8 in the file, read as the UInt8 tensor of its bytes
};

struct Header {
  std::vector<Entry> entries;  // in data order
  Metadata metadata;
  uint64_t data_start = 0;     // 8 + N
};

// JSON parsing that refuses duplicate keys (nlohmann keeps the last one silently).
json parse_strict(const Source& src, const std::string& text) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string duplicate;
  auto cb = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: keys.emplace_back(); break;
      case json::parse_event_t::object_end: if (!keys.empty()) keys.pop_back(); break;
      case json::parse_event_t::key:
        if (!keys.empty() && !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty())
          duplicate = parsed.get<std::string>();
        break;
      default: break;
    }
    return true;
  };
  if (detail::json_too_deep(text))
    bad(src, "the header nests arrays/objects more than " + std::to_string(detail::kMaxJsonDepth) + " levels deep (the limit)");
  json j;
  try {
    j = json::parse(text, cb);
  } catch (const json::exception& e) {
    bad(src, std::string("the header is not valid JSON (") + e.what() + ")");
  }
  if (!duplicate.empty()) bad(src, "the header holds the key '" + duplicate + "' twice");
  return j;
}

uint64_t read_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// The header's JSON text: its size from the first 8 bytes (a torch.save file named as such),
// then the text, which must begin with '{'.
std::string read_header_text(const Source& src) {
  if (src.size < 8) bad(src, "the file has " + u64s(src.size) + " bytes, fewer than the 8 of the header size");
  unsigned char head[8];
  src.read(0, 8, head);
  const uint64_t n = read_u64_le(head);
  // torch.save's files (a zip archive since torch 1.6, a bare pickle before): named as such, not
  // read as a header size of 8 bytes of "PK\3\4..." or of a pickle's opcodes. Only a size that
  // cannot be a header's is taken for one: a real header of 128 bytes starts with 0x80 too.
  const bool zip = head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4;
  const bool pickle = head[0] == 0x80 && head[1] >= 2 && head[1] <= 5;  // PROTO 2 to 5
  if ((zip || pickle) && (n > kMaxHeader || n > src.size - 8))
    bad(src, std::string("this is a PyTorch pickle (torch.save's ") + (zip ? "zip archive" : "pickle") +
                 "), not safetensors: save a state dict with safetensors (safetensors.torch.save_file(model.state_dict(), path); "
                 "docs/torch_weights.md)");
  if (n > kMaxHeader) bad(src, "the header size " + u64s(n) + " is absurdly large (the limit is " + u64s(kMaxHeader) + " bytes)");
  if (n > src.size - 8)
    bad(src, "the header size " + u64s(n) + " runs past the end of the file (" + u64s(src.size - 8) + " bytes follow the size)");
  std::string text(n, '\0');
  if (n) src.read(8, n, text.data());
  if (n == 0 || text[0] != '{') bad(src, "the header does not begin with '{'");
  return text;
}

// '__metadata__': an object of strings.
void read_metadata(const Source& src, const json& info, Metadata& metadata) {
  if (!info.is_object()) bad(src, "'__metadata__' is not an object of strings");
  for (const auto& [k, v] : info.items()) {
    if (!v.is_string()) bad(src, "the metadata value of '" + k + "' is not a string (" + v.dump() + ")");
    metadata.emplace(k, v.get<std::string>());
  }
}

// One tensor's description: exactly dtype (one Loom reads), shape (whose byte size fits 64
// bits) and data_offsets, a range of the data buffer (`buffer` bytes) as long as the shape needs.
Entry read_entry(const Source& src, const std::string& name, const json& info, uint64_t buffer, bool int8_ok) {
  const std::string where = "tensor '" + name + "'";
  if (!info.is_object()) bad(src, where + " is not described by an object");
  for (const auto& [k, v] : info.items())
    if (k != "dtype" && k != "shape" && k != "data_offsets") bad(src, where + " has the unknown field '" + k + "'");
  for (const char* k : {"dtype", "shape", "data_offsets"})
    if (!info.contains(k)) bad(src, where + " lacks the field '" + k + "'");
  const json& jd = info["dtype"];
  if (!jd.is_string()) bad(src, where + ": 'dtype' is not a string");
  const std::string dname = jd.get<std::string>();
  const DTypeName* found = nullptr;
  for (const auto& d : kDTypes)
    if (dname == d.name) found = &d;
  if (!found) bad(src, where + " has the unknown dtype '" + dname + "'");
  // int8 (weight-only quantized checkpoints) only for a reader that asked: Loom has no int8
  // dtype, so the values come as the UInt8 tensor of their bytes and the caller is told which
  const bool int8 = int8_ok && dname == "I8";
  if (!found->dtype && !int8)
    bad(src, where + " has the dtype '" + dname + "', which Loom does not support (supported: BOOL U8 I32 I64 F16 BF16 F32 F64)");
  Entry e{name, int8 ? UInt8 : *found->dtype, {}, 0, 0, int8};
  const json& js = info["shape"];
  if (!js.is_array()) bad(src, where + ": 'shape' is not an array");
  uint64_t count = 1;
  bool overflow = false;
  for (const json& d : js) {
    if (!d.is_number_unsigned()) bad(src, where + ": the shape " + js.dump() + " holds something other than a non-negative integer");
    const uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX) || (v != 0 && count > UINT64_MAX / v)) overflow = true;
    else count *= v;
    e.shape.push_back(static_cast<int64_t>(v));
  }
  const uint64_t item = itemsize(e.dtype);
  if (overflow || count > static_cast<uint64_t>(INT64_MAX) / item)
    bad(src, where + ": the shape " + js.dump() + " overflows (element count times itemsize exceeds 64 bits)");
  // the check above misses a product with a zero: [0, 2^62, 2^62] must not load either
  shape_nbytes(e.shape, item, ("load_safetensors: '" + src.name + "': " + where + " declares").c_str());
  const uint64_t nbytes = count * item;
  const json& jo = info["data_offsets"];
  if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() || !jo[1].is_number_unsigned())
    bad(src, where + ": 'data_offsets' is not a pair of non-negative integers (" + jo.dump() + ")");
  e.begin = jo[0].get<uint64_t>();
  e.end = jo[1].get<uint64_t>();
  if (e.begin > e.end) bad(src, where + " has data_offsets [" + u64s(e.begin) + ", " + u64s(e.end) + "] that end before they begin");
  if (e.end > buffer)
    bad(src, where + " has data_offsets [" + u64s(e.begin) + ", " + u64s(e.end) + "] out of range: the data buffer has " + u64s(buffer) +
                 " bytes");
  if (e.end - e.begin != nbytes)
    bad(src, where + ": dtype " + dname + " and shape " + js.dump() + " need " + u64s(nbytes) + " bytes but data_offsets [" +
                 u64s(e.begin) + ", " + u64s(e.end) + "] span " + u64s(e.end - e.begin));
  return e;
}

// The tensors must tile the data buffer: no overlap, no hole, nothing left over. Sorts them
// into data order.
void check_tiling(const Source& src, std::vector<Entry>& entries, uint64_t buffer) {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t at = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < at) bad(src, "tensors '" + prev->name + "' and '" + e.name + "' overlap (bytes [" + u64s(e.begin) + ", " + u64s(at) + "))");
    if (e.begin > at) bad(src, "the data buffer has a hole: no tensor covers bytes [" + u64s(at) + ", " + u64s(e.begin) + ")");
    at = e.end;
    prev = &e;
  }
  if (at != buffer)
    bad(src, "the data buffer has " + u64s(buffer - at) + " bytes after the last tensor (tensors cover " + u64s(at) + " of " + u64s(buffer) +
                 " bytes)");
}

Header read_header(const Source& src, bool int8_ok = false) {
  const std::string text = read_header_text(src);
  const json j = parse_strict(src, text);
  if (!j.is_object()) bad(src, "the header is not a JSON object");
  Header h;
  h.data_start = 8 + text.size();
  const uint64_t buffer = src.size - h.data_start;
  for (const auto& [name, info] : j.items()) {
    if (name == "__metadata__") read_metadata(src, info, h.metadata);
    else h.entries.push_back(read_entry(src, name, info, buffer, int8_ok));
  }
  check_tiling(src, h.entries, buffer);
  return h;
}

TensorMap read_all(const Source& src, Metadata* metadata, std::set<std::string>* int8) {
  Header h = read_header(src, int8 != nullptr);
  if (int8) int8->clear();
  TensorMap out;
  for (const Entry& e : h.entries) {
    Tensor t = empty(e.shape, e.dtype, Device::cpu());
    const uint64_t n = e.end - e.begin;
    if (n) {
      char* p = static_cast<char*>(t.data_ptr());
      src.read(h.data_start + e.begin, n, p);
      to_little_endian(p, n, itemsize(e.dtype));
      if (e.dtype == Bool)
        for (uint64_t i = 0; i < n; ++i)
          if (static_cast<unsigned char>(p[i]) > 1)
            bad(src, "BOOL tensor '" + e.name + "' holds the byte " + std::to_string(static_cast<unsigned char>(p[i])) +
                         " at element " + u64s(i) + " (a bool must be 0 or 1)");
    }
    out.emplace(e.name, std::move(t));
    if (e.int8) int8->insert(e.name);
  }
  if (metadata) *metadata = std::move(h.metadata);
  return out;
}

// The Source reads a regular file (never a FIFO or a device) with pread.
Source file_source(const std::string& path, const RegularFile& f) {
  Source src;
  src.name = path;
  src.size = f.size();
  const int fd = f.fd();
  src.read = [fd, path, size = src.size](uint64_t offset, uint64_t length, void* dst) {
    if (offset > size || length > size - offset) throw IOError("load_safetensors: '" + path + "': read past the end of the file");
    char* p = static_cast<char*>(dst);
    while (length) {
      const ssize_t n = ::pread(fd, p, length, static_cast<off_t>(offset));
      if (n < 0) {
        if (errno == EINTR) continue;
        throw IOError("load_safetensors: cannot read '" + path + "': " + std::strerror(errno));
      }
      if (n == 0) throw IOError("load_safetensors: '" + path + "' shrank while being read");
      p += n;
      offset += static_cast<uint64_t>(n);
      length -= static_cast<uint64_t>(n);
    }
  };
  return src;
}

Source memory_source(const std::string& bytes, const std::string& name) {
  Source src;
  src.name = name;
  src.size = bytes.size();
  src.read = [&bytes, name](uint64_t offset, uint64_t length, void* dst) {
    if (offset > bytes.size() || length > bytes.size() - offset)
      throw IOError("load_safetensors: '" + name + "': read past the end of the data");
    std::memcpy(dst, bytes.data() + offset, length);
  };
  return src;
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const auto& d : kDTypes)
    if (d.dtype == dtype) return d.name;
  throw DTypeError(std::string("safetensors: no name for dtype ") + dtype_name(dtype));
}

std::optional<DType> dtype_from_safetensors(const std::string& name) {
  for (const auto& d : kDTypes)
    if (name == d.name) return d.dtype;
  return std::nullopt;
}

std::string encode_safetensors(const TensorMap& tensors, const Metadata& metadata, const std::set<std::string>& int8) {
  for (const std::string& name : int8) {
    const auto it = tensors.find(name);
    if (it == tensors.end() || !it->second.defined() || it->second.dtype() != UInt8)
      throw ValueError("save_safetensors: '" + name + "' is to be written as I8 but is " +
                       (it == tensors.end() ? std::string("not among the tensors") : !it->second.defined() ? std::string("undefined")
                                                                                      : std::string("of dtype ") + dtype_name(it->second.dtype())) +
                       " (valid: a UInt8 tensor of int8 bytes)");
  }
  json header = json::object();
  std::vector<Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") throw ValueError("save_safetensors: '__metadata__' is reserved and cannot name a tensor");
    if (!t.defined()) throw ValueError("save_safetensors: tensor '" + name + "' is undefined");
    Tensor c = t.detach().to(Device::cpu()).contiguous();
    const uint64_t n = c.nbytes();
    const char* dtype = int8.count(name) ? "I8" : safetensors_dtype_name(c.dtype());
    header[name] = {{"dtype", dtype}, {"shape", c.shape()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    data.push_back(std::move(c));
  }
  if (!metadata.empty()) {
    json m = json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  std::string text;
  try {
    text = header.dump(-1, ' ', false, json::error_handler_t::strict);
  } catch (const json::type_error& e) {
    throw ValueError(std::string("save_safetensors: a tensor name or metadata string is not valid UTF-8 (") + e.what() + ")");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + text.size() + offset);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += text;
  for (const Tensor& c : data) {
    if (c.nbytes() == 0) continue;
    const size_t start = out.size();
    out.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
    to_little_endian(out.data() + start, c.nbytes(), c.itemsize());
  }
  return out;
}

void save_safetensors(const std::string& path, const TensorMap& tensors, const Metadata& metadata, const std::set<std::string>& int8) {
  write_file_atomic(path, encode_safetensors(tensors, metadata, int8));
}

TensorMap decode_safetensors(const std::string& bytes, Metadata* metadata, const std::string& source, std::set<std::string>* int8) {
  return read_all(memory_source(bytes, source), metadata, int8);
}

TensorMap load_safetensors(const std::string& path, Metadata* metadata, std::set<std::string>* int8) {
  RegularFile f(path, "load_safetensors");
  return read_all(file_source(path, f), metadata, int8);
}

Metadata load_safetensors_metadata(const std::string& path) {
  RegularFile f(path, "load_safetensors");
  return read_header(file_source(path, f)).metadata;
}

}  // namespace loom::io
