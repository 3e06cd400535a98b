// io::SummaryWriter's record framing and checks, and train::TensorBoardLogger's files. The
// values themselves are read back by TensorBoard's own reader in tests/tensorboard/.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/core/file.h>
#include <loom/io/tensorboard.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/crc32c.h"
#include "unit/common/core_test_util.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

// The records of an event file, each checked against its framing's CRCs.
std::vector<std::string> records(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto u32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    return v;
  };
  std::vector<std::string> out;
  size_t at = 0;
  while (at < bytes.size()) {
    EXPECT_LE(at + 12, bytes.size());
    uint64_t n;
    std::memcpy(&n, bytes.data() + at, 8);
    EXPECT_EQ(u32(at + 8), detail::masked_crc32c(std::string_view(bytes).substr(at, 8)));
    EXPECT_LE(at + 12 + n + 4, bytes.size());
    const std::string data = bytes.substr(at + 12, n);
    EXPECT_EQ(u32(at + 12 + n), detail::masked_crc32c(data));
    out.push_back(data);
    at += 12 + n + 4;
  }
  return out;
}

}  // namespace

TEST(Crc32c, KnownValues) {
  // RFC 3720 (iSCSI), appendix B.4, and the customary check value of "123456789"
  EXPECT_EQ(detail::crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(detail::crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(detail::crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i);
  EXPECT_EQ(detail::crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(detail::crc32c(""), 0u);
  // the eight-byte steps and the byte tail agree: every split of a text gives the same CRC
  const std::string text = "The quick brown fox jumps over the lazy dog, 0123456789";
  for (size_t k = 0; k <= text.size(); ++k)
    EXPECT_EQ(detail::crc32c(text.substr(k), detail::crc32c(text.substr(0, k))), detail::crc32c(text)) << k;
}

TEST(SummaryWriter, WritesFramedRecords) {
  loom_test::TempDir tmp;
  const fs::path dir = fs::path(tmp.dir) / "a" / "b";  // parents are created
  std::string path;
  {
    io::SummaryWriter w(dir.string());
    path = w.path();
    EXPECT_EQ(fs::path(path).parent_path(), dir);
    EXPECT_EQ(fs::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u);
    w.add_scalar("loss", 0.5, 1);
    w.add_histogram("w", std::vector<double>{1, 2, 3}, 1);
    // written through at once: a crash loses nothing already added
    EXPECT_EQ(records(path).size(), 3u);
  }
  const auto r = records(path);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_NE(r[0].find("brain.Event:2"), std::string::npos);
  EXPECT_NE(r[1].find("loss"), std::string::npos);
  // two writers of one folder write two files
  io::SummaryWriter a(dir.string()), b(dir.string());
  EXPECT_NE(a.path(), b.path());
}

TEST(SummaryWriter, RefusesBadInput) {
  loom_test::TempDir tmp;
  io::SummaryWriter w(tmp.dir.string());
  EXPECT_THROW(w.add_scalar("", 1, 0), ValueError);
  EXPECT_THROW(w.add_scalar(std::string("bad\xff", 4), 1, 0), ValueError);
  EXPECT_THROW(w.add_histogram("h", std::vector<double>{}, 0), ValueError);
  EXPECT_THROW(w.add_histogram("h", std::vector<double>{NAN, INFINITY}, 0), ValueError);
  EXPECT_THROW(w.add_histogram("h", std::vector<double>{1}, 0, 0, 0), ValueError);
  EXPECT_THROW(w.add_histogram("h", Tensor(), 0), ValueError);
  const size_t before = records(w.path()).size();
  EXPECT_EQ(before, 1u);  // nothing written by a refused call
  // a folder that cannot be made (a file is in the way)
  const std::string file = (fs::path(tmp.dir) / "file").string();
  write_file_atomic(file, "x");
  try {
    io::SummaryWriter bad(file + "/sub");
    FAIL() << "expected IOError";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
}
