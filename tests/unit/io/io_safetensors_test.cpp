// safetensors: round trips of every dtype and shape, and every rejection of a bad file.
#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/file.h>
#include <loom/core/index.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/io/safetensors.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <limits>

#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::same_bytes;
using loom_test::TempDir;
namespace fs = std::filesystem;

namespace {

// Deterministic values of each dtype (with NaN, infinities and -0 for the floating ones).
Tensor sample(const Shape& shape, DType dtype) {
  const int64_t n = shape_numel(shape);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = (i * 37 % 101) - 50 + (i % 4) * 0.25;
  Tensor t = from_vector(v, shape);
  if (dtype == Bool) return (t > 0.0).astype(Bool);
  if (is_floating(dtype) && n >= 4) {
    Tensor f = t.flatten().copy();
    f.index_put_({TensorIndex(0)}, std::numeric_limits<double>::quiet_NaN());
    f.index_put_({TensorIndex(1)}, -std::numeric_limits<double>::infinity());
    f.index_put_({TensorIndex(2)}, -0.0);
    f.index_put_({TensorIndex(3)}, 1e-3);
    t = f.reshape(shape);
  }
  return t.astype(dtype);
}

std::string u64le(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A file from a header (padded with spaces to a multiple of 8 unless `pad` is false) and data.
std::string craft(const std::string& header, const std::string& data, bool pad = true) {
  std::string h = header;
  if (pad) h.append((8 - h.size() % 8) % 8, ' ');
  return u64le(h.size()) + h + data;
}

std::string write_bytes(const TempDir& d, const std::string& name, const std::string& bytes) {
  const std::string path = d / name;
  write_file_atomic(path, bytes);
  return path;
}

// Loads a crafted file and returns the IOError's message (failing when it does not throw).
std::string rejection(const TempDir& d, const std::string& bytes) {
  const std::string path = write_bytes(d, "bad.safetensors", bytes);
  return error_message<IOError>([&] { io::load_safetensors(path); });
}

}  // namespace

TEST(IoSafetensors, RoundTripsEveryDTypeAndShape) {
  TempDir d;
  io::TensorMap in;
  const std::vector<Shape> shapes = {{}, {0}, {1}, {7}, {2, 3}, {2, 0, 4}, {3, 1, 2, 5}};
  for (DType dt : {Bool, UInt8, Int32, Int64, Float16, BFloat16, Float32, Float64})
    for (size_t s = 0; s < shapes.size(); ++s)
      in[std::string(io::safetensors_dtype_name(dt)) + "_" + std::to_string(s)] = sample(shapes[s], dt);
  in["transposed"] = sample({3, 5}, Float32).transpose();  // non-contiguous source
  in["sliced"] = sample({6, 4}, Int64).index({Slice(None, None, 2), Slice(1, 3)});
  const io::Metadata meta = {{"author", "loom"}, {"unicode", "\xc5\xbc\xc3\xb3\xc5\x82w \xe2\x9c\x93"}, {"empty", ""}};
  const std::string path = d / "all.safetensors";
  io::save_safetensors(path, in, meta);

  const std::string bytes = read_file(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);  // the header is padded to a multiple of 8
  EXPECT_EQ(bytes[8], '{');

  io::Metadata back_meta;
  io::TensorMap out = io::load_safetensors(path, &back_meta);
  EXPECT_EQ(back_meta, meta);
  EXPECT_EQ(io::load_safetensors_metadata(path), meta);
  ASSERT_EQ(out.size(), in.size());
  for (const auto& [name, t] : in) {
    ASSERT_TRUE(out.count(name)) << name;
    EXPECT_TRUE(same_bytes(out.at(name), t)) << name;
    EXPECT_TRUE(out.at(name).is_contiguous() || out.at(name).numel() == 0) << name;
  }
  // the same bytes through memory
  io::TensorMap mem = io::decode_safetensors(io::encode_safetensors(in, meta));
  for (const auto& [name, t] : in) EXPECT_TRUE(same_bytes(mem.at(name), t)) << name;
  // no tensors, no metadata: the header is "{}" padded
  const std::string empty = io::encode_safetensors({});
  EXPECT_EQ(empty, u64le(8) + "{}      ");
  EXPECT_TRUE(io::decode_safetensors(empty).empty());
}

TEST(IoSafetensors, WritesTheExactFormat) {
  io::TensorMap in{{"b", from_vector<int32_t>({1, -2}, {2})}, {"a", from_vector<float>({1.5f}, {})}};
  const std::string bytes = io::encode_safetensors(in, {{"k", "v"}});
  const std::string header =
      R"({"__metadata__":{"k":"v"},"a":{"data_offsets":[0,4],"dtype":"F32","shape":[]},)"
      R"("b":{"data_offsets":[4,12],"dtype":"I32","shape":[2]}})";
  std::string padded = header;
  padded.append((8 - padded.size() % 8) % 8, ' ');
  const float f = 1.5f;
  const int32_t ints[2] = {1, -2};
  std::string data(reinterpret_cast<const char*>(&f), 4);
  data.append(reinterpret_cast<const char*>(ints), 8);
  EXPECT_EQ(bytes, u64le(padded.size()) + padded + data);
}

TEST(IoSafetensors, RejectsBadFilesByteByByte) {
  TempDir d;
  const std::string path = d / "bad.safetensors";
  auto expect = [&](const std::string& bytes, const std::vector<std::string>& parts) {
    const std::string msg = rejection(d, bytes);
    EXPECT_TRUE(contains_all(msg, parts)) << "for bytes of size " << bytes.size();
    EXPECT_TRUE(contains_all(msg, {path}));
  };
  const std::string four(4, '\0'), eight(8, '\0'), twelve(12, '\0');
  const std::string f32_2 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  // sanity: the well-formed file loads
  write_bytes(d, "good.safetensors", craft(f32_2, eight));
  EXPECT_EQ(io::load_safetensors(d / "good.safetensors").at("a").shape(), (Shape{2}));

  expect("", {"0 bytes", "fewer than the 8"});
  expect("abcdefg", {"7 bytes", "fewer than the 8"});
  expect(u64le(100) + "{}", {"header size 100", "runs past the end of the file"});
  expect(u64le(uint64_t(1) << 63), {"absurdly large"});
  expect(u64le(200'000'000) + "{}", {"absurdly large"});
  expect(u64le(0), {"does not begin with '{'"});
  expect(craft(" {}", ""), {"does not begin with '{'"});
  expect(craft("[1, 2]", ""), {"does not begin with '{'"});
  expect(craft(R"({"a": )", ""), {"not valid JSON"});
  expect(craft(R"({"a": 1} x)", ""), {"not valid JSON"});
  expect(craft("{\"\xff\": 1}", ""), {"not valid JSON"});  // not UTF-8
  // duplicate keys, at the top and inside a tensor's description
  expect(craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight),
         {"the key 'a' twice"});
  expect(craft(R"({"a":{"dtype":"F32","dtype":"I32","shape":[1],"data_offsets":[0,4]}})", four), {"the key 'dtype' twice"});
  expect(craft(R"({"__metadata__":{"k":"1","k":"2"}})", ""), {"the key 'k' twice"});
  // descriptions
  expect(craft(R"({"a":[1]})", ""), {"tensor 'a' is not described by an object"});
  expect(craft(R"({"a":{"dtype":"F32","shape":[1]}})", four), {"tensor 'a' lacks the field 'data_offsets'"});
  expect(craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}})", four), {"unknown field 'extra'"});
  expect(craft(R"({"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", four), {"tensor 'a'", "unknown dtype 'F33'"});
  expect(craft(R"({"a":{"dtype":"I16","shape":[2],"data_offsets":[0,4]}})", four), {"'I16'", "Loom does not support"});
  expect(craft(R"({"a":{"dtype":3,"shape":[1],"data_offsets":[0,4]}})", four), {"'dtype' is not a string"});
  expect(craft(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", four), {"non-negative integer"});
  expect(craft(R"({"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", four), {"non-negative integer"});
  expect(craft(R"({"a":{"dtype":"F32","shape":{},"data_offsets":[0,4]}})", four), {"'shape' is not an array"});
  expect(craft(R"({"__metadata__":{"k":1}})", ""), {"metadata value of 'k' is not a string"});
  expect(craft(R"({"__metadata__":[]})", ""), {"'__metadata__' is not an object"});
  // sizes: overflow, disagreement with the offsets
  expect(craft(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,4]}})", four), {"overflows"});
  expect(craft(R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,4]}})", four), {"overflows"});
  expect(craft(R"({"a":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,4]}})", four), {"overflows"});
  expect(craft(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight), {"need 12 bytes", "span 8"});
  expect(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}})", eight), {"not a pair"});
  expect(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,-8]}})", eight), {"not a pair"});
  // offsets out of range, reversed, overlapping, with holes, with bytes left over
  expect(craft(f32_2, four), {"out of range", "has 4 bytes"});
  expect(craft(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[16,16]}})", eight), {"out of range"});
  expect(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", eight), {"end before they begin"});
  expect(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", twelve),
         {"'a' and 'b' overlap"});
  expect(craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", four),
         {"overlap"});
  expect(craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", twelve),
         {"hole", "[4, 8)"});
  expect(craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight), {"hole", "[0, 4)"});
  expect(craft(f32_2, twelve), {"4 bytes after the last tensor"});
  expect(craft("{}", "x"), {"1 bytes after the last tensor"});
  // a truncated file
  const std::string good = io::encode_safetensors({{"w", sample({4, 4}, Float64)}});
  expect(good.substr(0, good.size() - 1), {"out of range"});
  expect(good.substr(0, 12), {"runs past the end of the file"});
  // bool bytes other than 0 and 1
  expect(craft(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", std::string("\x01\x00\x02", 3)),
         {"BOOL tensor 'm'", "must be 0 or 1"});
  // not a file
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { io::load_safetensors(d / "missing"); }), {"cannot open", "missing"}));
  fs::create_directories(d.dir / "adir");
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { io::load_safetensors(d / "adir"); }), {"not a regular file"}));
  // the same checks apply to bytes in memory, named by `source`
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { io::decode_safetensors(craft(f32_2, four), nullptr, "blob"); }),
                           {"'blob'", "out of range"}));
}

TEST(IoSafetensors, AcceptsValidFilesFromOtherWriters) {
  // unpadded header, keys in any order, data in an order other than the header's, zero-size
  // tensors sharing an offset, whitespace in the JSON
  const float a[2] = {1.0f, 2.0f};
  const int64_t b = -5;
  std::string data(reinterpret_cast<const char*>(&b), 8);
  data.append(reinterpret_cast<const char*>(a), 8);
  const std::string header =
      "{ \"a\" : {\"shape\":[2], \"data_offsets\":[8,16], \"dtype\":\"F32\"},\n"
      "  \"e\": {\"dtype\":\"F16\",\"shape\":[0,3],\"data_offsets\":[8,8]},\n"
      "  \"b\": {\"data_offsets\":[0,8],\"dtype\":\"I64\",\"shape\":[]}, \"__metadata__\": {} }\n\t";
  io::TensorMap t = io::decode_safetensors(craft(header, data, /*pad=*/false));
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t.at("a").to_vector<float>(), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(t.at("b").item<int64_t>(), -5);
  EXPECT_EQ(t.at("b").ndim(), 0);
  EXPECT_EQ(t.at("e").shape(), (Shape{0, 3}));
  EXPECT_EQ(t.at("e").dtype(), Float16);
}

TEST(IoSafetensors, SaveFailuresLeaveThePreviousFile) {
  TempDir d;
  const std::string path = d / "w.safetensors";
  io::TensorMap good{{"w", sample({3}, Float32)}};
  io::save_safetensors(path, good);
  const std::string before = read_file(path);
  // rejected before the file is touched
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { io::save_safetensors(path, {{"__metadata__", sample({1}, Float32)}}); }),
                           {"'__metadata__' is reserved"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { io::save_safetensors(path, {{"u", Tensor()}}); }), {"'u' is undefined"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { io::save_safetensors(path, {{"bad\xff", sample({1}, Float32)}}); }),
                           {"not valid UTF-8"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { io::save_safetensors(path, good, {{"k", "\xc3"}}); }), {"not valid UTF-8"}));
  EXPECT_EQ(read_file(path), before);
  // the write itself fails: the target is a non-empty directory
  fs::create_directories(d.dir / "target" / "inner");
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { io::save_safetensors(d / "target", good); }), {"target"}));
  EXPECT_TRUE(fs::is_directory(d.dir / "target" / "inner"));
  size_t files = 0;
  for (auto& e : fs::directory_iterator(d.dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);  // no temporary left behind
  EXPECT_EQ(read_file(path), before);
}
