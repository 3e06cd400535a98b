#include "loom/core/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "loom/core/error.h"

namespace loom {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw IOError(what + " '" + path + "': " + std::strerror(err));
}

// Closes a descriptor on scope exit; removes the temporary unless released.
struct TempFile {
  int fd = -1;
  std::string path;
  bool keep = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!keep && !path.empty()) ::unlink(path.c_str());
  }
};

}  // namespace

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("read_file: cannot open", path, errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("read_file: cannot read", path, errno);
  return ss.str();
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  std::random_device rd;
  TempFile tmp;
  tmp.path = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (tmp.fd < 0) {
    const int err = errno;
    tmp.path.clear();
    fail("write_file_atomic: cannot create a temporary file next to", path, err);
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(tmp.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write_file_atomic: cannot write", path, errno);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(tmp.fd) != 0) fail("write_file_atomic: cannot flush", path, errno);
  if (::close(tmp.fd) != 0) {
    tmp.fd = -1;
    fail("write_file_atomic: cannot close", path, errno);
  }
  tmp.fd = -1;
  if (::rename(tmp.path.c_str(), path.c_str()) != 0) fail("write_file_atomic: cannot replace", path, errno);
  tmp.keep = true;
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {  // make the rename itself durable
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace loom
