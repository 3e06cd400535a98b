// Readers: NPY/NPZ (against files NumPy writes at test time), CSV, IDX (incl. the real
// Fashion-MNIST files) and text; corrupted and truncated files give IOError naming the file.
#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/index.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/data/csv.h>
#include <loom/data/dataset.h>
#include <loom/data/idx.h>
#include <loom/data/npy.h>
#include <loom/data/text.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "unit/common/core_test_util.h"

using loom_test::TempDir;

using namespace loom;
using namespace loom::data;
using loom_test::contains_all;
using loom_test::error_message;
namespace fs = std::filesystem;

namespace {


void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// gzip-compresses with the gzip tool (the library links zlib privately).
void write_gz(const std::string& path, const std::string& bytes) {
  write_bytes(path + ".raw", bytes);
  ASSERT_EQ(std::system(("gzip -c '" + path + ".raw' > '" + path + "'").c_str()), 0);
}

bool have_numpy() { return std::system("/usr/bin/python3 -c 'import numpy' > /dev/null 2>&1") == 0; }

// Runs a Python program with `d` set to the directory.
void python(const std::string& dir, const std::string& code) {
  const std::string script = dir + "/make.py";
  write_bytes(script, "import numpy as np\nd = '" + dir + "'\n" + code);
  ASSERT_EQ(std::system(("/usr/bin/python3 '" + script + "'").c_str()), 0) << code;
}

std::vector<double> arange_values(int64_t n, double scale = 1.0) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<double>(i) * scale);
  return v;
}

}  // namespace

// ---------------------------------------------------------------- NPY / NPZ

TEST(DataNpy, RoundTripsEveryDType) {
  TempDir dir;
  for (DType dt : {Float32, Float64, Int32, Int64, UInt8, Bool, Float16}) {
    Tensor t = (arange(12) % scalar_tensor(5, Int64)).astype(dt).reshape({3, 4});
    save_npy(dir / "a.npy", t);
    Tensor back = load_npy(dir / "a.npy");
    EXPECT_EQ(back.dtype(), dt);
    EXPECT_EQ(back.shape(), (Shape{3, 4}));
    EXPECT_EQ(back.astype(Float64).to_vector<double>(), t.astype(Float64).to_vector<double>()) << dtype_name(dt);
  }
  // 0-d, empty and non-contiguous views
  save_npy(dir / "s.npy", scalar_tensor(2.5, Float64));
  EXPECT_EQ(load_npy(dir / "s.npy").shape(), Shape{});
  EXPECT_EQ(load_npy(dir / "s.npy").item<double>(), 2.5);
  save_npy(dir / "e.npy", zeros({0, 3}));
  EXPECT_EQ(load_npy(dir / "e.npy").shape(), (Shape{0, 3}));
  Tensor v = arange(0, 6, 1, Float32).reshape({2, 3}).T();
  save_npy(dir / "t.npy", v);
  EXPECT_EQ(load_npy(dir / "t.npy").to_vector<float>(), v.to_vector<float>());
  EXPECT_THROW(save_npy(dir / "b.npy", zeros({2}, BFloat16)), DTypeError);
  // the header pads the data to a 64-byte boundary
  const std::string bytes = npy_to_bytes(zeros({3}));
  EXPECT_EQ((bytes.size() - 12) % 64, 0u);
  EXPECT_EQ(bytes.back() == 0 || true, true);
}

TEST(DataNpy, NpzRoundTrip) {
  TempDir dir;
  std::map<std::string, Tensor> arrays{{"x", arange(0, 6, 1, Float32).reshape({2, 3})}, {"labels", arange(4)}};
  save_npz(dir / "a.npz", arrays);
  auto back = load_npz(dir / "a.npz");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back["x"].to_vector<float>(), arrays["x"].to_vector<float>());
  EXPECT_EQ(back["labels"].to_vector<int64_t>(), arrays["labels"].to_vector<int64_t>());
}

TEST(DataNpy, LoadsWhatNumPyWrites) {
  if (!have_numpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy is not available";
  TempDir dir;
  python(dir / "", R"(
a = np.arange(12).reshape(3, 4)
np.save(d + '/f4.npy', (a * 0.5).astype('<f4'))
np.save(d + '/f8.npy', (a * 0.25).astype('<f8'))
np.save(d + '/i4.npy', (a - 6).astype('<i4'))
np.save(d + '/i8.npy', (a * 1000000000000).astype('<i8'))
np.save(d + '/u1.npy', (a * 20).astype('|u1'))
np.save(d + '/b1.npy', (a % 3 == 0))
np.save(d + '/f2.npy', (a * 0.5).astype('<f2'))
np.save(d + '/be.npy', (a - 6).astype('>i4'))
np.save(d + '/fortran.npy', np.asfortranarray((a * 0.5).astype('<f4')))
np.save(d + '/scalar.npy', np.float64(3.5))
np.save(d + '/empty.npy', np.zeros((0, 5), dtype='<f4'))
with open(d + '/v2.npy', 'wb') as f:
    np.lib.format.write_array(f, a.astype('<i8'), version=(2, 0))
big = (np.arange(300000) % 251).astype('|u1').reshape(1000, 300)
np.savez(d + '/plain.npz', x=(a * 0.5).astype('<f4'), y=np.arange(5))
np.savez_compressed(d + '/packed.npz', x=(a * 0.5).astype('<f4'), big=big)
)");
  auto check = [&](const std::string& name, DType dt, const std::vector<double>& want, Shape shape = {3, 4}) {
    Tensor t = load_npy(dir / name);
    EXPECT_EQ(t.dtype(), dt) << name;
    EXPECT_EQ(t.shape(), shape) << name;
    EXPECT_EQ(t.astype(Float64).to_vector<double>(), want) << name;
  };
  std::vector<double> minus6, times20, mod3, big;
  for (int i = 0; i < 12; ++i) {
    minus6.push_back(i - 6);
    times20.push_back(i * 20);
    mod3.push_back(i % 3 == 0);
  }
  check("f4.npy", Float32, arange_values(12, 0.5));
  check("f8.npy", Float64, arange_values(12, 0.25));
  check("i4.npy", Int32, minus6);
  check("i8.npy", Int64, arange_values(12, 1e12));
  check("u1.npy", UInt8, times20);
  check("b1.npy", Bool, mod3);
  check("f2.npy", Float16, arange_values(12, 0.5));
  check("be.npy", Int32, minus6);
  check("fortran.npy", Float32, arange_values(12, 0.5));
  check("v2.npy", Int64, arange_values(12));
  check("scalar.npy", Float64, {3.5}, {});
  check("empty.npy", Float32, {}, {0, 5});
  for (const std::string& name : {"plain.npz", "packed.npz"}) {
    auto m = load_npz(dir / name);
    ASSERT_TRUE(m.count("x")) << name;
    EXPECT_EQ(m["x"].astype(Float64).to_vector<double>(), arange_values(12, 0.5)) << name;
  }
  auto plain = load_npz(dir / "plain.npz");
  EXPECT_EQ(plain["y"].to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  auto packed = load_npz(dir / "packed.npz");
  ASSERT_TRUE(packed.count("big"));
  EXPECT_EQ(packed["big"].shape(), (Shape{1000, 300}));
  const auto bv = packed["big"].to_vector<uint8_t>();
  bool ok = true;
  for (size_t i = 0; i < bv.size(); ++i) ok &= bv[i] == i % 251;
  EXPECT_TRUE(ok);
}

TEST(DataNpy, CorruptFilesNameTheFileAndTheProblem) {
  TempDir dir;
  const std::string good = npy_to_bytes(arange(0, 6, 1, Float32).reshape({2, 3}));
  auto expect_error = [&](const std::string& name, const std::string& bytes, const std::vector<std::string>& parts) {
    write_bytes(dir / name, bytes);
    std::vector<std::string> all = parts;
    all.push_back(dir / name);
    EXPECT_TRUE(contains_all(error_message<IOError>([&] { load_npy(dir / name); }), all)) << name;
  };
  std::string bad_magic = good;
  bad_magic[1] = 'X';
  expect_error("magic.npy", bad_magic, {"bad magic"});
  expect_error("short.npy", good.substr(0, 7), {"preamble"});
  expect_error("truncated.npy", good.substr(0, good.size() - 3), {"data bytes"});
  expect_error("extra.npy", good + "xx", {"data bytes"});
  std::string header_past = good;
  header_past[8] = '\xff';
  header_past[9] = '\x7f';
  expect_error("headerlen.npy", header_past, {"header declares"});
  std::string descr = good;
  descr.replace(descr.find("<f4"), 3, "<c8");
  expect_error("descr.npy", descr, {"unsupported dtype '<c8'"});
  std::string huge = good;
  const size_t at = huge.find("(2, 3)");
  huge.replace(at, 6, "(4294967296, 4294967296, 4294967296)");
  // keep the header length field consistent with the longer header
  const size_t hl = huge.size() - good.size() + (static_cast<unsigned char>(good[8]) | static_cast<unsigned char>(good[9]) << 8);
  huge[8] = static_cast<char>(hl & 0xff);
  huge[9] = static_cast<char>(hl >> 8);
  expect_error("huge.npy", huge, {"overflows"});
  std::string garbled = good;
  garbled.replace(garbled.find("'shape'"), 7, "'shapes'");
  expect_error("key.npy", garbled, {"bad NPY header"});
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { load_npy(dir / "missing.npy"); }), {dir / "missing.npy"}));
}

TEST(DataNpy, CorruptArchivesNameTheFileAndTheProblem) {
  TempDir dir;
  const std::string good = npz_to_bytes({{"x", arange(0, 100, 1, Float32)}});
  auto expect_error = [&](const std::string& name, const std::string& bytes, const std::vector<std::string>& parts) {
    write_bytes(dir / name, bytes);
    std::vector<std::string> all = parts;
    all.push_back(dir / name);
    EXPECT_TRUE(contains_all(error_message<IOError>([&] { load_npz(dir / name); }), all)) << name;
  };
  expect_error("tiny.npz", "PK", {"not a ZIP archive"});
  expect_error("half.npz", good.substr(0, good.size() / 2), {"not a ZIP archive"});
  std::string flipped = good;
  flipped[200] ^= 0x55;  // inside the member's data
  expect_error("crc.npz", flipped, {"member 'x.npy'", "CRC-32 mismatch"});
  // the central directory claims an offset beyond the end
  std::string moved = good;
  const size_t eocd = moved.size() - 22;
  moved[eocd + 16] = '\xff';
  moved[eocd + 17] = '\xff';
  moved[eocd + 18] = '\xff';
  moved[eocd + 19] = '\x7f';
  expect_error("offset.npz", moved, {"past its end"});
  // a member whose declared sizes exceed the archive
  std::string sized = good;
  const size_t cd = static_cast<unsigned char>(good[eocd + 16]) | static_cast<unsigned char>(good[eocd + 17]) << 8;
  sized[cd + 20] = '\xff';
  sized[cd + 21] = '\xff';
  sized[cd + 22] = '\xff';
  sized[cd + 23] = '\x00';
  expect_error("sizes.npz", sized, {"past its end"});
  if (!have_numpy()) return;
  python(dir / "", "np.savez_compressed(d + '/c.npz', x=np.arange(10000, dtype='<f8'))\n");
  std::string comp;
  {
    std::ifstream in(dir / "c.npz", std::ios::binary);
    comp.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string broken = comp;
  for (size_t i = 100; i < 140; ++i) broken[i] = static_cast<char>(0xff);  // corrupt the deflate stream
  write_bytes(dir / "c_bad.npz", broken);
  std::string msg = error_message<IOError>([&] { load_npz(dir / "c_bad.npz"); });
  EXPECT_TRUE(contains_all(msg, {dir / "c_bad.npz", "x.npy"})) << msg;
}

// ---------------------------------------------------------------- CSV

TEST(DataCsv, ReadsSelectsAndConverts) {
  TempDir dir;
  write_bytes(dir / "a.csv", "a, b,\"c, quoted\"\r\n1,2,3\r\n\r\n4.5, -5 ,6e1\r\n");
  Tensor t = read_csv(dir / "a.csv");
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.dtype(), Float32);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4.5f, -5, 60}));
  EXPECT_EQ(read_csv_header(dir / "a.csv"), (std::vector<std::string>{"a", "b", "c, quoted"}));
  EXPECT_EQ(read_csv(dir / "a.csv", {.names = {"c, quoted", "a"}}).to_vector<float>(), (std::vector<float>{3, 1, 60, 4.5f}));
  EXPECT_EQ(read_csv(dir / "a.csv", {.columns = {-1}, .dtype = Float64}).to_vector<double>(), (std::vector<double>{3, 60}));
  write_bytes(dir / "b.tsv", "# comment line\n7\t8\n9\t10\n");
  Tensor i = read_csv(dir / "b.tsv", {.delimiter = '\t', .header = false, .skip_rows = 1, .dtype = Int64});
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{7, 8, 9, 10}));
  write_gz(dir / "c.csv.gz", "x\n1\n2\n");
  EXPECT_EQ(read_csv(dir / "c.csv.gz").shape(), (Shape{2, 1}));
}

TEST(DataCsv, ErrorsNameFileLineAndColumn) {
  TempDir dir;
  write_bytes(dir / "bad.csv", "a,b\n1,2\n3,oops\n");
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_csv(dir / "bad.csv"); }),
                           {dir / "bad.csv", "line 3", "column 2", "'oops' is not a number"}));
  write_bytes(dir / "ragged.csv", "a,b\n1,2\n3\n");
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_csv(dir / "ragged.csv"); }),
                           {dir / "ragged.csv", "line 3", "1 fields", "header has 2"}));
  write_bytes(dir / "empty.csv", "a,b\n1,\n");
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_csv(dir / "empty.csv"); }), {"line 2", "column 2", "empty"}));
  write_bytes(dir / "int.csv", "1.5\n");
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_csv(dir / "int.csv", {.header = false, .dtype = Int32}); }),
                           {"line 1", "column 1", "not an integer"}));
  write_bytes(dir / "u8.csv", "300\n");
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_csv(dir / "u8.csv", {.header = false, .dtype = UInt8}); }),
                           {"out of the range of uint8"}));
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_csv(dir / "bad.csv", {.names = {"zz"}}); }), {"no column named 'zz'", "a, b"}));
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_csv(dir / "nothing.csv"); }), {dir / "nothing.csv", "cannot open"}));
}

// ---------------------------------------------------------------- IDX

namespace {
std::string idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, const std::string& data) {
  std::string s{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int k = 3; k >= 0; --k) s += static_cast<char>((d >> (8 * k)) & 0xff);
  return s + data;
}
}  // namespace

TEST(DataIdx, PlainAndGzipAndErrors) {
  TempDir dir;
  const std::string bytes = idx_bytes(0x08, {2, 3}, std::string("\x01\x02\x03\x04\x05\x06", 6));
  write_bytes(dir / "a.idx", bytes);
  write_gz(dir / "a.idx.gz", bytes);
  for (const std::string& name : {"a.idx", "a.idx.gz"}) {
    Tensor t = read_idx(dir / name);
    EXPECT_EQ(t.shape(), (Shape{2, 3})) << name;
    EXPECT_EQ(t.dtype(), UInt8);
    EXPECT_EQ(t.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
  }
  // big-endian int32 and int16 (widened)
  write_bytes(dir / "i.idx", idx_bytes(0x0C, {2}, std::string("\x00\x00\x01\x00\xff\xff\xff\xfe", 8)));
  EXPECT_EQ(read_idx(dir / "i.idx").to_vector<int32_t>(), (std::vector<int32_t>{256, -2}));
  write_bytes(dir / "s.idx", idx_bytes(0x0B, {1}, std::string("\xff\xfd", 2)));
  EXPECT_EQ(read_idx(dir / "s.idx").to_vector<int32_t>(), (std::vector<int32_t>{-3}));

  auto expect_error = [&](const std::string& name, const std::vector<std::string>& parts) {
    std::vector<std::string> all = parts;
    all.push_back(dir / name);
    EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_idx(dir / name); }), all)) << name;
  };
  write_bytes(dir / "trunc.idx", bytes.substr(0, bytes.size() - 1));
  expect_error("trunc.idx", {"5 data bytes"});
  write_bytes(dir / "header.idx", bytes.substr(0, 9));
  expect_error("header.idx", {"ends inside"});
  write_bytes(dir / "huge.idx", idx_bytes(0x0E, {0xffffffffu, 0xffffffffu, 0xffffffffu}, "abcd"));
  expect_error("huge.idx", {"overflows"});
  write_bytes(dir / "huge2.idx", idx_bytes(0x0E, {0xffffffffu, 0xffffu}, "abcd"));
  expect_error("huge2.idx", {"data bytes"});
  write_bytes(dir / "magic.idx", "\x01\x00\x08\x01");
  expect_error("magic.idx", {"magic"});
  write_bytes(dir / "type.idx", idx_bytes(0x0A, {1}, "x"));
  expect_error("type.idx", {"0x0A"});
  // a gzip file cut short
  std::string gz;
  {
    std::ifstream in(dir / "a.idx.gz", std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(in), {});
  }
  write_bytes(dir / "cut.idx.gz", gz.substr(0, gz.size() - 6));
  expect_error("cut.idx.gz", {});
  expect_error("missing.idx", {"cannot open"});
}

TEST(DataIdx, FashionMnistFromTheDebianPackage) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir + "/train-images-idx3-ubyte.gz")) GTEST_SKIP() << "Fashion-MNIST not installed";
  Tensor x = read_idx(dir + "/train-images-idx3-ubyte.gz");
  Tensor y = read_idx(dir + "/train-labels-idx1-ubyte.gz");
  EXPECT_EQ(x.shape(), (Shape{60000, 28, 28}));
  EXPECT_EQ(x.dtype(), UInt8);
  EXPECT_EQ(y.shape(), (Shape{60000}));
  EXPECT_EQ(y.max().item<int64_t>(), 9);
  EXPECT_EQ(read_idx(dir + "/t10k-images-idx3-ubyte.gz").shape(), (Shape{10000, 28, 28}));
  EXPECT_EQ(read_idx(dir + "/t10k-labels-idx1-ubyte.gz").shape(), (Shape{10000}));
}

// ---------------------------------------------------------------- text

TEST(DataText, VocabularyTokensAndWindows) {
  TempDir dir;
  write_bytes(dir / "train.txt", " the cat sat on the mat \n the dog <unk> \n\n a cat \n");
  Vocabulary v = Vocabulary::from_file(dir / "train.txt");
  EXPECT_EQ(v.token(0), "<pad>");
  EXPECT_EQ(v.token(1), "<unk>");
  EXPECT_EQ(v.token(2), "<eos>");
  EXPECT_EQ(v.token(3), "the");  // 3 times
  EXPECT_EQ(v.token(4), "cat");  // 2 times
  EXPECT_EQ(v.token(5), "a");    // then count-1 tokens in byte order
  EXPECT_EQ(v.size(), 3 + 7);
  EXPECT_EQ(v.id("zebra"), Vocabulary::kUnkId);
  Vocabulary small = Vocabulary::from_file(dir / "train.txt", {.min_count = 2});
  EXPECT_EQ(small.size(), 5);
  Vocabulary capped = Vocabulary::from_file(dir / "train.txt", {.max_size = 4});
  EXPECT_EQ(capped.tokens(), (std::vector<std::string>{"<pad>", "<unk>", "<eos>", "the"}));

  Tensor ids = tokenize_file(dir / "train.txt", small);
  // the cat <unk> <unk> the <unk> <eos> the <unk> <unk> <eos> <unk> cat <eos>
  EXPECT_EQ(ids.to_vector<int64_t>(), (std::vector<int64_t>{3, 4, 1, 1, 3, 1, 2, 3, 1, 1, 2, 1, 4, 2}));
  EXPECT_EQ(small.decode(ids.index({Slice(0, 2)})), (std::vector<std::string>{"the", "cat"}));

  v.save(dir / "vocab.txt");
  Vocabulary loaded = Vocabulary::load(dir / "vocab.txt");
  EXPECT_EQ(loaded.tokens(), v.tokens());
  write_bytes(dir / "badvocab.txt", "<pad>\nthe\n");
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { Vocabulary::load(dir / "badvocab.txt"); }), {dir / "badvocab.txt", "line 2"}));

  Tensor stream = arange(23);
  Tensor rows = batchify(stream, 4);  // 4 rows of 5, the tail of 3 dropped
  EXPECT_EQ(rows.shape(), (Shape{4, 5}));
  EXPECT_EQ(rows.at({1, 0}), 5);
  SequenceBatcher windows(stream, 4, 2);
  EXPECT_EQ(windows.size(), 2);  // (5 - 1) / 2
  Example w1 = windows.get(1);
  EXPECT_EQ(w1[0].to_vector<int64_t>(), (std::vector<int64_t>{2, 3, 7, 8, 12, 13, 17, 18}));
  EXPECT_EQ(w1[1].to_vector<int64_t>(), (std::vector<int64_t>{3, 4, 8, 9, 13, 14, 18, 19}));
  EXPECT_THROW(windows.get(2), IndexError);
}
