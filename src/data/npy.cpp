// NPY (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html) and NPZ (a ZIP
// archive of NPY members, PKWARE APPNOTE 6.3) readers and writers.
#include "loom/data/npy.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "loom/core/file.h"
#include "loom/ops/creation.h"
#include "loom/ops/manipulation.h"

namespace loom::data {

namespace {

// An error about `where` (a file, or a member of an archive).
struct Fail {
  std::string op, where;
  [[noreturn]] void operator()(const std::string& what) const { throw IOError(op + ": '" + where + "': " + what); }
};

// --- NPY

struct NpyType {
  DType dtype;
  size_t size;
  bool swap;
};

std::optional<NpyType> parse_descr(const std::string& d) {
  if (d.size() < 3) return std::nullopt;
  const char order = d[0];
  const std::string code = d.substr(1);
  if (order != '<' && order != '>' && order != '|' && order != '=') return std::nullopt;
  const bool big = order == '>';
  if (code == "u1") return NpyType{UInt8, 1, false};
  if (code == "b1") return NpyType{Bool, 1, false};
  if (order == '|') return std::nullopt;  // multi-byte types need a byte order
  if (code == "f2") return NpyType{Float16, 2, big};
  if (code == "f4") return NpyType{Float32, 4, big};
  if (code == "f8") return NpyType{Float64, 8, big};
  if (code == "i4") return NpyType{Int32, 4, big};
  if (code == "i8") return NpyType{Int64, 8, big};
  return std::nullopt;
}

const char* descr_of(DType dt) {
  switch (dt) {
    case DType::Bool: return "|b1";
    case DType::UInt8: return "|u1";
    case DType::Int32: return "<i4";
    case DType::Int64: return "<i8";
    case DType::Float16: return "<f2";
    case DType::Float32: return "<f4";
    case DType::Float64: return "<f8";
    default: return nullptr;
  }
}

// A parser for the Python dict literal of an NPY header.
class HeaderParser {
 public:
  HeaderParser(const std::string& s, const Fail& fail) : s_(s), fail_(fail) {}

  void parse(std::string& descr, bool& fortran, Shape& shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    expect('{');
    for (;;) {
      skip();
      if (peek() == '}') break;
      const std::string key = string_literal();
      expect(':');
      skip();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"') bad("'descr' is not a string (structured dtypes are not supported)");
        descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        fortran = boolean();
        have_fortran = true;
      } else if (key == "shape") {
        shape = tuple();
        have_shape = true;
      } else {
        bad("unexpected key '" + key + "' (valid: 'descr', 'fortran_order', 'shape')");
      }
      skip();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      skip();
      if (peek() != '}') bad("expected ',' or '}' at header offset " + std::to_string(i_));
    }
    ++i_;
    for (; i_ < s_.size(); ++i_)
      if (s_[i_] != ' ' && s_[i_] != '\n' && s_[i_] != '\t' && s_[i_] != '\r' && s_[i_] != '\0')
        bad("unexpected characters after the header dictionary");
    if (!have_descr || !have_fortran || !have_shape) bad("the header lacks one of 'descr', 'fortran_order', 'shape'");
  }

 private:
  [[noreturn]] void bad(const std::string& what) const { fail_("bad NPY header: " + what); }
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  char peek() const {
    if (i_ >= s_.size()) bad("the header ends early");
    return s_[i_];
  }
  void expect(char c) {
    skip();
    if (peek() != c) bad(std::string("expected '") + c + "' at header offset " + std::to_string(i_));
    ++i_;
  }
  std::string string_literal() {
    skip();
    const char q = peek();
    if (q != '\'' && q != '"') bad("expected a string at header offset " + std::to_string(i_));
    const size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) bad("unterminated string");
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    bad("'fortran_order' is not True or False");
  }
  Shape tuple() {
    expect('(');
    Shape shape;
    for (;;) {
      skip();
      if (peek() == ')') break;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) bad("the shape holds something other than non-negative integers");
      uint64_t v = 0;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
        const uint64_t digit = static_cast<uint64_t>(s_[i_] - '0');
        if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10) bad("a dimension of the shape overflows int64");
        v = v * 10 + digit;
        ++i_;
      }
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2 longs
      shape.push_back(static_cast<int64_t>(v));
      skip();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != ')') bad("expected ',' or ')' in the shape");
    }
    ++i_;
    return shape;
  }

  const std::string& s_;
  const Fail& fail_;
  size_t i_ = 0;
};

uint32_t le16(const unsigned char* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8; }
uint32_t le32(const unsigned char* p) { return le16(p) | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }
uint64_t le64(const unsigned char* p) { return uint64_t(le32(p)) | uint64_t(le32(p + 4)) << 32; }

Tensor parse_npy(const std::string& bytes, const Fail& fail) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  if (n < 10) fail("not an NPY file: " + std::to_string(n) + " bytes, fewer than the 10-byte preamble");
  if (std::memcmp(p, "\x93NUMPY", 6) != 0) fail("not an NPY file: bad magic (expected \\x93NUMPY)");
  const int major = p[6], minor = p[7];
  size_t header_len, start;
  if (major == 1) {
    header_len = le16(p + 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (n < 12) fail("the file ends inside the NPY v" + std::to_string(major) + " preamble");
    header_len = le32(p + 8);
    start = 12;
  } else {
    fail("unsupported NPY format version " + std::to_string(major) + "." + std::to_string(minor) + " (valid: 1.0, 2.0, 3.0)");
  }
  if (header_len > n - start)
    fail("the header declares " + std::to_string(header_len) + " bytes but only " + std::to_string(n - start) + " follow");
  const std::string header = bytes.substr(start, header_len);
  std::string descr;
  bool fortran = false;
  Shape shape;
  HeaderParser(header, fail).parse(descr, fortran, shape);
  const std::optional<NpyType> type = parse_descr(descr);
  if (!type) fail("unsupported dtype '" + descr + "' (valid: <f4 <f8 <i4 <i8 |u1 |b1 <f2, or their big-endian forms)");
  size_t count = 1;
  for (int64_t d : shape) {
    if (d != 0 && count > std::numeric_limits<size_t>::max() / static_cast<size_t>(d)) fail("the declared shape overflows");
    count *= static_cast<size_t>(d);
  }
  const size_t data_at = start + header_len, have = n - data_at;
  if (count > std::numeric_limits<size_t>::max() / type->size || count * type->size != have)
    fail("the header declares shape " + shape_str(shape) + " of " + descr + " (" +
         (count > std::numeric_limits<size_t>::max() / type->size ? std::string("more than addressable")
                                                                   : std::to_string(count * type->size)) +
         " data bytes) but the file has " + std::to_string(have) + " data bytes");
  // the checks above miss a product with a zero: (0, 2^62, 2^62) must not load either
  shape_nbytes(shape, itemsize(type->dtype), (fail.op + ": '" + fail.where + "' declares").c_str());
  std::vector<unsigned char> data(p + data_at, p + n);
  if (type->swap)
    for (size_t i = 0; i < count; ++i) std::reverse(data.begin() + i * type->size, data.begin() + (i + 1) * type->size);
  if (type->dtype == Bool)
    for (auto& b : data) b = b != 0;
  if (!fortran) return from_data(data.data(), shape, type->dtype, Device::cpu());
  Shape reversed(shape.rbegin(), shape.rend());
  return from_data(data.data(), reversed, type->dtype, Device::cpu()).transpose().contiguous();
}

std::string make_npy(const Tensor& array, const char* op) {
  if (!array.defined()) throw ValueError(std::string(op) + ": the array is undefined");
  const char* descr = descr_of(array.dtype());
  if (!descr)
    throw DTypeError(std::string(op) + ": dtype " + dtype_name(array.dtype()) +
                     " has no NumPy equivalent (valid: float16, float32, float64, int32, int64, uint8, bool; convert with astype)");
  if (array.device() != Device::cpu()) throw DeviceError(std::string(op) + ": the array is not on the CPU (move it with to())");
  const Tensor c = array.contiguous();
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < c.shape().size(); ++i) dict += std::to_string(c.shape()[i]) + (c.shape().size() == 1 || i + 1 < c.shape().size() ? ", " : "");
  if (c.shape().size() == 1) dict.pop_back();  // "(3,)"
  dict += "), }";
  // Pad with spaces so that the data starts on a 64-byte boundary, then a newline.
  size_t preamble = 10;
  size_t total = preamble + dict.size() + 1;
  std::string out;
  if ((total + 63) / 64 * 64 - preamble > 65535) {
    preamble = 12;
    total = preamble + dict.size() + 1;
  }
  const size_t padded = (total + 63) / 64 * 64;
  const size_t header_len = padded - preamble;
  dict.append(padded - total, ' ');
  dict += '\n';
  out.reserve(padded + c.nbytes());
  out.append("\x93NUMPY", 6);
  if (preamble == 10) {
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(header_len & 0xff);
    out += static_cast<char>((header_len >> 8) & 0xff);
  } else {
    out += '\x02';
    out += '\x00';
    for (int i = 0; i < 4; ++i) out += static_cast<char>((header_len >> (8 * i)) & 0xff);
  }
  out += dict;
  const auto* data = static_cast<const char*>(c.data_ptr());
  if (c.dtype() == Bool) {
    for (int64_t i = 0; i < c.numel(); ++i) out += data[i] ? '\x01' : '\x00';
  } else {
    out.append(data, c.nbytes());
  }
  return out;
}

// --- ZIP

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;

// Bounds-checked little-endian reads of an archive in memory.
struct Reader {
  const unsigned char* p;
  size_t n;
  const Fail& fail;
  void need(uint64_t off, uint64_t len, const char* what) const {
    if (off > n || len > n - off)
      fail(std::string("truncated or corrupt ZIP archive: ") + what + " at offset " + std::to_string(off) + " (" +
           std::to_string(len) + " bytes) lies past its end (" + std::to_string(n) + " bytes)");
  }
  uint32_t u16(uint64_t off) const { need(off, 2, "a field"); return le16(p + off); }
  uint32_t u32(uint64_t off) const { need(off, 4, "a field"); return le32(p + off); }
  uint64_t u64(uint64_t off) const { need(off, 8, "a field"); return le64(p + off); }
};

// Deflate expands at most 1032:1; a member declaring more than that is corrupt or hostile.
constexpr uint64_t kMaxDeflateRatio = 1032;

// Inflates a member, its output buffer growing only as data actually comes (never to the
// declared size up front), refusing a member that inflates to more or less than declared.
std::string inflate_raw(const unsigned char* src, size_t csize, size_t usize, const Fail& fail) {
  if (usize / kMaxDeflateRatio > csize)
    fail("the member declares " + std::to_string(usize) + " bytes uncompressed from " + std::to_string(csize) +
         " compressed bytes, more than deflate can produce (at most " + std::to_string(kMaxDeflateRatio) + " times the compressed size)");
  std::string out;
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) fail("zlib inflateInit2 failed");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&zs};
  size_t in_done = 0, cap = 0;  // cap: bytes of `out` handed to zlib so far
  constexpr size_t kStep = 1u << 30;
  for (;;) {
    if (zs.avail_in == 0 && in_done < csize) {
      zs.next_in = const_cast<Bytef*>(src + in_done);
      zs.avail_in = static_cast<uInt>(std::min(kStep, csize - in_done));
      in_done += zs.avail_in;
    }
    if (zs.avail_out == 0) {
      if (cap > usize) fail("the member inflates to more than its declared " + std::to_string(usize) + " bytes");
      // Up to one byte past the declared size, which reveals a member that is longer.
      const size_t grow = std::min(usize + 1, std::max(cap * 2, size_t{1} << 20));
      out.resize(grow);
      zs.next_out = reinterpret_cast<Bytef*>(out.data() + cap);
      zs.avail_out = static_cast<uInt>(std::min(kStep, grow - cap));
      cap += zs.avail_out;
    }
    const uInt in_before = zs.avail_in, out_before = zs.avail_out;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) break;
    if (rc == Z_NEED_DICT || rc == Z_DATA_ERROR || rc == Z_MEM_ERROR)
      fail(std::string("corrupt deflate data (zlib: ") + (zs.msg ? zs.msg : "error") + ")");
    if (zs.avail_in == in_before && zs.avail_out == out_before) fail("the deflate stream ends early (truncated member)");
  }
  if (zs.total_out != usize)
    fail("the member inflates to " + std::to_string(zs.total_out) + " bytes but declares " + std::to_string(usize));
  out.resize(usize);
  return out;
}

uint32_t crc_of(const std::string& s) {
  return static_cast<uint32_t>(crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(s.data()), s.size()));
}

std::map<std::string, Tensor> parse_npz(const std::string& bytes, const std::string& name) {
  const Fail fail{"load_npz", name};
  const Reader r{reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), fail};
  if (r.n < 22) fail("not a ZIP archive: " + std::to_string(r.n) + " bytes, fewer than an end-of-central-directory record");
  // The end record: the last signature within the final 64 KiB + 22 bytes.
  size_t eocd = std::string::npos;
  const size_t lowest = r.n > 22 + 65535 ? r.n - 22 - 65535 : 0;
  for (size_t i = r.n - 22 + 1; i-- > lowest;)
    if (le32(r.p + i) == kEndSig) {
      eocd = i;
      break;
    }
  if (eocd == std::string::npos) fail("not a ZIP archive (no end-of-central-directory record)");
  uint64_t entries = r.u16(eocd + 10), cd_size = r.u32(eocd + 12), cd_offset = r.u32(eocd + 16);
  if (entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {  // ZIP64
    if (eocd < 20 || r.u32(eocd - 20) != kZip64LocatorSig) fail("ZIP64 sizes without a ZIP64 end-of-central-directory locator");
    const uint64_t z64 = r.u64(eocd - 20 + 8);
    if (r.u32(z64) != kZip64EndSig) fail("the ZIP64 end-of-central-directory record is missing at offset " + std::to_string(z64));
    entries = r.u64(z64 + 32);
    cd_size = r.u64(z64 + 40);
    cd_offset = r.u64(z64 + 48);
  }
  r.need(cd_offset, cd_size, "the central directory");
  std::map<std::string, Tensor> out;
  uint64_t at = cd_offset;
  for (uint64_t e = 0; e < entries; ++e) {
    if (r.u32(at) != kCentralSig) fail("bad central directory entry " + std::to_string(e) + " at offset " + std::to_string(at));
    const uint32_t flags = r.u16(at + 8), method = r.u16(at + 10), crc = r.u32(at + 16);
    uint64_t csize = r.u32(at + 20), usize = r.u32(at + 24);
    const uint32_t name_len = r.u16(at + 28), extra_len = r.u16(at + 30), comment_len = r.u16(at + 32);
    uint64_t local = r.u32(at + 42);
    r.need(at + 46, uint64_t(name_len) + extra_len + comment_len, "a central directory entry");
    const std::string member(bytes.data() + at + 46, name_len);
    const Fail mfail{"load_npz", name + "' member '" + member};
    // ZIP64 extra field: the 64-bit values of the fields set to 0xFFFFFFFF, in order.
    for (uint64_t x = at + 46 + name_len; x + 4 <= at + 46 + name_len + extra_len;) {
      const uint32_t id = r.u16(x), len = r.u16(x + 2);
      if (x + 4 + len > at + 46 + name_len + extra_len) mfail("an extra field overruns its entry");
      if (id == 0x0001) {
        uint64_t f = x + 4;
        const uint64_t fend = x + 4 + len;
        auto take64 = [&](uint64_t& v) {
          if (v != 0xFFFFFFFF) return;
          if (f + 8 > fend) mfail("a ZIP64 extra field is too short");
          v = r.u64(f);
          f += 8;
        };
        take64(usize);
        take64(csize);
        take64(local);
      }
      x += 4 + len;
    }
    at += 46 + uint64_t(name_len) + extra_len + comment_len;
    std::string key = member;
    if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0) key.resize(key.size() - 4);
    if (out.count(key))
      mfail("a second member holds the array '" + key + "' (member names must be unique, with or without '.npy')");
    if (flags & 1) mfail("encrypted members are not supported");
    if (r.u32(local) != kLocalSig) mfail("no local file header at offset " + std::to_string(local));
    const uint64_t data = local + 30 + r.u16(local + 26) + r.u16(local + 28);
    r.need(data, csize, ("the data of member '" + member + "'").c_str());
    std::string content;
    if (method == 0) {
      if (csize != usize) mfail("a stored member with different compressed and uncompressed sizes");
      content.assign(bytes.data() + data, csize);
    } else if (method == 8) {
      content = inflate_raw(r.p + data, csize, usize, mfail);
    } else {
      mfail("unsupported compression method " + std::to_string(method) + " (valid: 0 stored, 8 deflated)");
    }
    if (crc_of(content) != crc) mfail("CRC-32 mismatch (the member is corrupt)");
    out[key] = parse_npy(content, mfail);
  }
  return out;
}

void put16(std::string& s, uint32_t v) {
  s += static_cast<char>(v & 0xff);
  s += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xffff);
  put16(s, v >> 16);
}

}  // namespace

Tensor npy_from_bytes(const std::string& bytes, const std::string& name) { return parse_npy(bytes, Fail{"load_npy", name}); }
std::string npy_to_bytes(const Tensor& array) { return make_npy(array, "save_npy"); }

// read_file's errors name the path; say which reader asked.
static std::string read_for(const char* op, const std::string& path) {
  try {
    return read_file(path);
  } catch (const IOError& e) {
    throw IOError(std::string(op) + ": " + e.what());
  }
}

Tensor load_npy(const std::string& path) { return parse_npy(read_for("load_npy", path), Fail{"load_npy", path}); }

void save_npy(const std::string& path, const Tensor& array) { write_file_atomic(path, make_npy(array, "save_npy")); }

std::map<std::string, Tensor> npz_from_bytes(const std::string& bytes, const std::string& name) { return parse_npz(bytes, name); }
std::map<std::string, Tensor> load_npz(const std::string& path) { return parse_npz(read_for("load_npz", path), path); }

std::string npz_to_bytes(const std::map<std::string, Tensor>& arrays) {
  if (arrays.size() >= 0xFFFF) throw ValueError("save_npz: " + std::to_string(arrays.size()) + " arrays are more than a ZIP without ZIP64 holds");
  std::string zip, central;
  constexpr uint32_t kDosDate = (0u << 9) | (1u << 5) | 1u;  // 1980-01-01
  for (const auto& [key, array] : arrays) {
    if (key.empty()) throw ValueError("save_npz: an array has an empty name");
    const std::string member = key + ".npy";
    if (member.size() > 0xFFFF) throw ValueError("save_npz: the name '" + key.substr(0, 40) + "...' is too long");
    const std::string npy = make_npy(array, "save_npz");
    const uint32_t crc = crc_of(npy);
    if (npy.size() >= 0xFFFFFFFFull || zip.size() >= 0xFFFFFFFFull)
      throw ValueError("save_npz: the archive would exceed 4 GiB, which needs ZIP64 (not written by Loom)");
    const uint32_t offset = static_cast<uint32_t>(zip.size());
    put32(zip, kLocalSig);
    put16(zip, 20);  // version needed
    put16(zip, 0);   // flags
    put16(zip, 0);   // stored
    put16(zip, 0);   // time
    put16(zip, kDosDate);
    put32(zip, crc);
    put32(zip, static_cast<uint32_t>(npy.size()));
    put32(zip, static_cast<uint32_t>(npy.size()));
    put16(zip, static_cast<uint32_t>(member.size()));
    put16(zip, 0);
    zip += member;
    zip += npy;
    put32(central, kCentralSig);
    put16(central, 20);  // made by
    put16(central, 20);  // needed
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put16(central, kDosDate);
    put32(central, crc);
    put32(central, static_cast<uint32_t>(npy.size()));
    put32(central, static_cast<uint32_t>(npy.size()));
    put16(central, static_cast<uint32_t>(member.size()));
    put16(central, 0);  // extra
    put16(central, 0);  // comment
    put16(central, 0);  // disk
    put16(central, 0);  // internal attributes
    put32(central, 0);  // external attributes
    put32(central, offset);
    central += member;
  }
  if (zip.size() + central.size() >= 0xFFFFFFFFull)
    throw ValueError("save_npz: the archive would exceed 4 GiB, which needs ZIP64 (not written by Loom)");
  const uint32_t cd_offset = static_cast<uint32_t>(zip.size());
  zip += central;
  put32(zip, kEndSig);
  put16(zip, 0);
  put16(zip, 0);
  put16(zip, static_cast<uint32_t>(arrays.size()));
  put16(zip, static_cast<uint32_t>(arrays.size()));
  put32(zip, static_cast<uint32_t>(central.size()));
  put32(zip, cd_offset);
  put16(zip, 0);  // comment
  return zip;
}

void save_npz(const std::string& path, const std::map<std::string, Tensor>& arrays) {
  write_file_atomic(path, npz_to_bytes(arrays));
}

}  // namespace loom::data
