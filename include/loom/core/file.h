#pragma once
// Whole-file reads and crash-safe writes.
#include <cstdint>
#include <string>

#include "loom/core/api.h"

namespace loom {

// A file opened read-only and known to be a regular file. A FIFO, a device (/dev/zero), a
// directory or a socket is refused with IOError "<op>: '<path>' is not a regular file ..."
// without blocking on it (a reader would otherwise wait forever or read without end).
class LOOM_API RegularFile {
 public:
  RegularFile(const std::string& path, const std::string& op);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }  // as fstat reported it when opened
  int release();                           // the descriptor, now the caller's to close

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Reads a whole regular file; throws IOError naming the path and the system's reason.
LOOM_API std::string read_file(const std::string& path);

// Writes `bytes` to `path` atomically: into a temporary file in the same directory, fsync,
// rename over `path`, fsync of the directory. A failure at any point leaves the previous file
// (if any) intact and removes the temporary; it throws IOError naming the path and the reason.
// Temporaries are named "<path>.tmp.<pid>.<random>"; a save first removes those of the same
// `path` whose process no longer runs (left by a save that was killed), never a live writer's.
LOOM_API void write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace loom
