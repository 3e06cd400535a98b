// Readers against hostile and unlucky files (crafted here byte by byte): no crash, no
// allocation beyond what the file holds, a typed IOError naming the problem.
#include <gtest/gtest.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/file.h>
#include <loom/core/tensor.h>
#include <loom/data/csv.h>
#include <loom/data/idx.h>
#include <loom/data/npy.h>
#include <loom/ops/creation.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "unit/common/core_test_util.h"

using namespace loom;
using namespace loom::data;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::TempDir;
namespace fs = std::filesystem;

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void put16(std::string& s, uint32_t v) {
  s += static_cast<char>(v & 0xff);
  s += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xffff);
  put16(s, v >> 16);
}
void put64(std::string& s, uint64_t v) {
  put32(s, static_cast<uint32_t>(v));
  put32(s, static_cast<uint32_t>(v >> 32));
}

// A one-member ZIP whose member claims `usize` bytes deflated from `data` (method 8); with
// zip64, the central directory gives the sizes in a ZIP64 extra field.
std::string zip_declaring(uint64_t usize, const std::string& data, bool zip64) {
  const std::string name = "a.npy";
  std::string z;
  put32(z, 0x04034b50);
  put16(z, 20);
  put16(z, 0);
  put16(z, 8);
  put16(z, 0);
  put16(z, 0);
  put32(z, 0);
  put32(z, static_cast<uint32_t>(data.size()));
  put32(z, zip64 ? 0xFFFFFFFFu : static_cast<uint32_t>(usize));
  put16(z, static_cast<uint32_t>(name.size()));
  put16(z, 0);
  z += name + data;
  const uint32_t cd_offset = static_cast<uint32_t>(z.size());
  std::string cd;
  put32(cd, 0x02014b50);
  put16(cd, 45);
  put16(cd, 45);
  put16(cd, 0);
  put16(cd, 8);
  put16(cd, 0);
  put16(cd, 0);
  put32(cd, 0);  // crc
  put32(cd, static_cast<uint32_t>(data.size()));
  put32(cd, zip64 ? 0xFFFFFFFFu : static_cast<uint32_t>(usize));
  put16(cd, static_cast<uint32_t>(name.size()));
  put16(cd, zip64 ? 12 : 0);
  put16(cd, 0);
  put16(cd, 0);
  put16(cd, 0);
  put32(cd, 0);
  put32(cd, 0);  // local header offset
  cd += name;
  if (zip64) {
    put16(cd, 0x0001);
    put16(cd, 8);
    put64(cd, usize);
  }
  z += cd;
  put32(z, 0x06054b50);
  put16(z, 0);
  put16(z, 0);
  put16(z, 1);
  put16(z, 1);
  put32(z, static_cast<uint32_t>(cd.size()));
  put32(z, cd_offset);
  put16(z, 0);
  return z;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// A 300-byte archive declaring a 4 GiB member used to allocate (and zero) 4 GiB first.
TEST(DataHostileFiles, NpzMemberDeclaringMoreThanDeflateCanProduceIsRefusedUpFront) {
  const std::string data(200, 'x');
  const std::string zip = zip_declaring(0xF0000000u, data, false);
  EXPECT_LT(zip.size(), 400u);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string msg = error_message<IOError>([&] { npz_from_bytes(zip, "big.npz"); });
  EXPECT_TRUE(contains_all(msg, {"big.npz", "a.npy", "4026531840 bytes", "200 compressed bytes", "1032 times"}));
  EXPECT_LT(seconds_since(t0), 1.0);
}

// A ZIP64 size of 2^40 used to escape as std::bad_alloc.
TEST(DataHostileFiles, Zip64SizeOfTwoToTheFortyIsATypedError) {
  const std::string zip = zip_declaring(uint64_t{1} << 40, std::string(64, 'x'), true);
  const std::string msg = error_message<IOError>([&] { npz_from_bytes(zip, "z64.npz"); });
  EXPECT_TRUE(contains_all(msg, {"z64.npz", "1099511627776 bytes", "more than deflate can produce"}));
}

// Duplicate members were last-wins: an array silently replaced by another.
TEST(DataHostileFiles, NpzWithTwoMembersOfTheSameNameIsRefused) {
  std::string zip = npz_to_bytes({{"a", tensor<float>({1, 2})}, {"b", tensor<float>({3, 4})}});
  // rename every "b.npy" (local and central headers) to "a.npy": same length, same CRCs
  for (size_t at = zip.find("b.npy"); at != std::string::npos; at = zip.find("b.npy", at)) zip[at] = 'a';
  const std::string msg = error_message<IOError>([&] { npz_from_bytes(zip, "dup.npz"); });
  EXPECT_TRUE(contains_all(msg, {"dup.npz", "'a'", "unique"}));
}

// The header is checked before anything is inflated: a small .gz whose data goes on far past
// the declared size is refused after reading the declared bytes (it used to inflate all of it).
TEST(DataHostileFiles, IdxGzIsInflatedOnlyUpToItsDeclaredSize) {
  TempDir dir;
  const std::string raw = dir / "big.idx";
  {
    std::ofstream out(raw, std::ios::binary);
    out.write("\x00\x00\x08\x01\x00\x00\x00\x02", 8);  // uint8, shape (2)
    const std::string zeros(1 << 20, '\0');
    for (int i = 0; i < 64; ++i) out.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  ASSERT_EQ(std::system(("gzip -c '" + raw + "' > '" + raw + ".gz'").c_str()), 0);
  const std::string msg = error_message<IOError>([&] { read_idx(raw + ".gz"); });
  EXPECT_TRUE(contains_all(msg, {"big.idx.gz", "declares", "(2 data bytes)", "more than 2 data bytes"}));
  // short data is refused too, without allocating the declared size
  write_bytes(dir / "short.idx", std::string("\x00\x00\x08\x01\x7f\xff\xff\xff\x01\x02", 10));
  ASSERT_EQ(std::system(("gzip -k '" + dir / "short.idx" + "'").c_str()), 0);
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_idx(dir / "short.idx.gz"); }), {"2147483647 data bytes", "has 2 data bytes"}));
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_idx(dir / "short.idx"); }), {"2147483647 data bytes", "has 2 data bytes"}));
  // a truncated .gz fails on its first byte, and failing leaks no descriptor
  std::ifstream gz(dir / "short.idx.gz", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(gz)), std::istreambuf_iterator<char>());
  write_bytes(dir / "cut.idx.gz", bytes.substr(0, bytes.size() - 6));
  auto open_fds = [] { return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator{}); };
  const auto fds = open_fds();
  for (int i = 0; i < 20; ++i) EXPECT_THROW(read_idx(dir / "cut.idx.gz"), IOError);
  EXPECT_EQ(open_fds(), fds);
}

// A FIFO or a device used to hang (or read without end); every reader refuses them.
TEST(DataHostileFiles, NonRegularFilesAreRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero"), dir / ""}) {
    SCOPED_TRACE(path);
    EXPECT_TRUE(contains_all(error_message<IOError>([&] { load_npy(path); }), {"not a regular file"}));
    EXPECT_TRUE(contains_all(error_message<IOError>([&] { load_npz(path); }), {"not a regular file"}));
    EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_idx(path); }), {"read_idx", "not a regular file"}));
    EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_csv(path); }), {"read_csv", "not a regular file"}));
    EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_file(path); }), {"not a regular file"}));
  }
}

// float32 1e300 used to become inf silently.
TEST(DataHostileFiles, CsvValuesOutOfTheDTypeRangeNameRowColumnAndRange) {
  TempDir dir;
  write_bytes(dir / "f.csv", "a,b\n1,2\n3,1e300\n");
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_csv(dir / "f.csv", {.dtype = Float32}); }),
                           {"f.csv", "line 3", "column 2", "1e300", "float32", "3.4028234663852886e+38"}));
  EXPECT_EQ(read_csv(dir / "f.csv", {.dtype = Float64}).to_vector<double>()[3], 1e300);  // fits float64
  // the largest float32 and values that round to it are fine; an explicit inf stays inf
  write_bytes(dir / "edge.csv", "3.4028234663852886e38,3.40282356e38,-inf\n");
  const auto v = read_csv(dir / "edge.csv", {.header = false, .dtype = Float32}).to_vector<float>();
  EXPECT_EQ(v[0], std::numeric_limits<float>::max());
  EXPECT_EQ(v[1], std::numeric_limits<float>::max());
  EXPECT_EQ(v[2], -std::numeric_limits<float>::infinity());
  write_bytes(dir / "half.csv", "3.4028235677973366e38\n");  // halfway to 2^128: rounds to inf
  EXPECT_THROW(read_csv(dir / "half.csv", {.header = false, .dtype = Float32}), IOError);
  write_bytes(dir / "i.csv", "1\n2147483648\n");
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_csv(dir / "i.csv", {.header = false, .dtype = Int32}); }),
                           {"line 2", "column 1", "int32", "-2147483648 to 2147483647"}));
  write_bytes(dir / "l.csv", "99999999999999999999\n");
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_csv(dir / "l.csv", {.header = false, .dtype = Int64}); }),
                           {"line 1", "int64", "9223372036854775807"}));
}
