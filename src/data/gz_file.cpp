#include "data/gz_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "loom/core/error.h"

namespace loom::data::detail {

std::string read_maybe_gzip(const std::string& path, const char* op) {
  errno = 0;
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw IOError(std::string(op) + ": cannot open '" + path + "': " + (errno ? std::strerror(errno) : "out of memory"));
  std::unique_ptr<gzFile_s, int (*)(gzFile)> guard(f, gzclose);
  std::string buf;
  std::string chunk(1 << 16, '\0');
  for (;;) {
    const int n = gzread(f, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      throw IOError(std::string(op) + ": '" + path + "' is not readable (" + (err == Z_ERRNO ? std::strerror(errno) : std::string("gzip error: ") + msg) + ")");
    }
    if (n == 0) break;
    buf.append(chunk.data(), static_cast<size_t>(n));
  }
  // gzread reports a gzip stream cut short as end of file with Z_BUF_ERROR pending.
  int err = 0;
  const char* msg = gzerror(f, &err);
  if (err != Z_OK && err != Z_STREAM_END)
    throw IOError(std::string(op) + ": '" + path + "' is not readable (gzip error: " + msg + ", the file is truncated or corrupt)");
  return buf;
}

}  // namespace loom::data::detail
