#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/core/file.h>

#include <filesystem>

using namespace loom;
namespace fs = std::filesystem;

TEST(File, AtomicWriteReplacesAndFailureKeepsThePrevious) {
  const fs::path dir = fs::temp_directory_path() / ("loom_file_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "data.bin").string();
  write_file_atomic(path, "first");
  EXPECT_EQ(read_file(path), "first");
  write_file_atomic(path, std::string("sec\0ond", 7));
  EXPECT_EQ(read_file(path), std::string("sec\0ond", 7));
  // a failing write (the directory is read-only) leaves the old file and no temporary
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  bool threw = false;
  try {
    write_file_atomic(path, "third");
  } catch (const IOError& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  fs::permissions(dir, fs::perms::owner_all);
  if (::geteuid() != 0) EXPECT_TRUE(threw);  // root ignores directory permissions
  if (threw) EXPECT_EQ(read_file(path), std::string("sec\0ond", 7));
  size_t files = 0;
  for (auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
  EXPECT_THROW(read_file((dir / "missing").string()), IOError);
  // the final rename fails when the target is a non-empty directory: the temporary goes away
  fs::create_directories(dir / "sub");
  write_file_atomic((dir / "sub" / "inner").string(), "x");
  EXPECT_THROW(write_file_atomic((dir / "sub").string(), "y"), IOError);
  EXPECT_EQ(read_file((dir / "sub" / "inner").string()), "x");
  files = 0;
  for (auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
  fs::remove_all(dir);
}
