#pragma once
// Small helpers shared by the unit tests of every part (tests/unit/<part>/): core's headers only.
#include <gtest/gtest.h>
#include <loom/core/parallel.h>
#include <loom/core/tensor.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace loom_test {

// Sets the thread pool's size for a scope, and restores it after.
class ThreadsScope {
 public:
  explicit ThreadsScope(int n) : before_(loom::get_num_threads()) { loom::set_num_threads(n); }
  ~ThreadsScope() { loom::set_num_threads(before_); }
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int before_;
};

// A fresh directory named after the running test, removed at the end.
struct TempDir {
  std::filesystem::path dir;
  TempDir() {
    dir = std::filesystem::temp_directory_path() /
          ("loom_test_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~TempDir() { std::filesystem::remove_all(dir); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
};

// Runs f, expects it to throw exactly E (or a subclass), and returns the message ("" otherwise).
template <typename E, typename F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw the wrong exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

inline ::testing::AssertionResult contains_all(const std::string& msg, const std::vector<std::string>& parts) {
  for (const auto& p : parts)
    if (msg.find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "message \"" << msg << "\" does not mention \"" << p << "\"";
  return ::testing::AssertionSuccess();
}

template <typename T = double>
std::vector<T> values(const loom::Tensor& t) {
  return t.to_vector<T>();
}

// Same dtype, shape and bytes (so NaN payloads and -0.0 count), whatever the strides.
inline bool same_bytes(const loom::Tensor& a, const loom::Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  loom::Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

}  // namespace loom_test
