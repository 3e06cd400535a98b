#include "loom/core/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

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

// Removes "<base>.tmp.<pid>.<digits>" in `dir` left by saves of the same target whose process
// is gone (killed mid-save). A live process's temporaries, ours included, are left alone; a
// failure to remove one is not an error (the save itself does not need it gone).
void remove_stale_temporaries(const std::string& dir, const std::string& base) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  const std::string prefix = base + ".tmp.";
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const size_t dot = rest.find('.');
    if (dot == 0 || dot == std::string::npos || dot + 1 == rest.size() || dot > 9) continue;
    if (rest.find_first_not_of("0123456789") != dot || rest.find_first_not_of("0123456789", dot + 1) != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(rest.substr(0, dot)));
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to signal): keep
    ::unlinkat(::dirfd(d), name.c_str(), 0);
  }
  ::closedir(d);
}

}  // namespace

RegularFile::RegularFile(const std::string& path, const std::string& op) {
  // O_NONBLOCK: opening a FIFO without a writer would otherwise block; cleared below.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) fail(op + ": cannot open", path, errno);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    fail(op + ": cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    const char* what = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device";
    throw IOError(op + ": '" + path + "' is not a regular file (it is " + what + "; valid: a regular file)");
  }
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
  size_ = static_cast<uint64_t>(st.st_size);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

int RegularFile::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

std::string read_file(const std::string& path) {
  RegularFile f(path, "read_file");
  std::string out(f.size(), '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(f.fd(), out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("read_file: cannot read", path, errno);
    }
    if (n == 0) throw IOError("read_file: '" + path + "' shrank while being read");
    done += static_cast<size_t>(n);
  }
  return out;
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  remove_stale_temporaries(dir, slash == std::string::npos ? path : path.substr(slash + 1));
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
