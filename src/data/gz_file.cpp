#include "data/gz_file.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "loom/core/error.h"
#include "loom/core/file.h"

namespace loom::data::detail {

GzReader::GzReader(const std::string& path, const char* op) : path_(path), op_(op) {
  RegularFile file(path, op);
  file_size_ = file.size();
  const int fd = file.release();
  errno = 0;
  f_ = gzdopen(fd, "rb");
  if (!f_) {
    ::close(fd);
    throw IOError(op_ + ": cannot open '" + path + "': " + (errno ? std::strerror(errno) : "out of memory"));
  }
  gzbuffer(f_, 1 << 16);
  try {
    unsigned char first = 0;  // gzdirect is only known after a first read
    const bool any = read(&first, 1) == 1;
    compressed_ = !gzdirect(f_);
    if (any) gzungetc(first, f_);
  } catch (...) {  // no destructor runs for a constructor that throws
    gzclose(f_);
    throw;
  }
}

GzReader::~GzReader() {
  if (f_) gzclose(f_);
}

void GzReader::check_error() {
  int err = 0;
  const char* msg = gzerror(f_, &err);
  if (err == Z_ERRNO) throw IOError(op_ + ": '" + path_ + "' is not readable (" + std::strerror(errno) + ")");
  // gzread reports a gzip stream cut short as end of file with Z_BUF_ERROR pending.
  if (err != Z_OK && err != Z_STREAM_END)
    throw IOError(op_ + ": '" + path_ + "' is not readable (gzip error: " + msg + ", the file is truncated or corrupt)");
}

size_t GzReader::read(void* dst, size_t n) {
  size_t done = 0;
  while (done < n) {
    const unsigned step = static_cast<unsigned>(std::min<size_t>(n - done, INT_MAX / 2));
    const int got = gzread(f_, static_cast<char*>(dst) + done, step);
    if (got < 0) check_error();
    if (got <= 0) break;
    done += static_cast<size_t>(got);
  }
  check_error();
  return done;
}

bool GzReader::at_end() {
  unsigned char c;
  if (read(&c, 1) == 0) return true;
  gzungetc(c, f_);
  return false;
}

std::string read_maybe_gzip(const std::string& path, const char* op) {
  GzReader r(path, op);
  std::string buf;
  std::string chunk(1 << 16, '\0');
  for (;;) {
    const size_t n = r.read(chunk.data(), chunk.size());
    buf.append(chunk.data(), n);
    if (n < chunk.size()) break;
  }
  return buf;
}

}  // namespace loom::data::detail
