#pragma once
// Reads of plain or gzip-compressed regular files (zlib's gzread passes plain files through).
#include <cstddef>
#include <cstdint>
#include <string>

struct gzFile_s;

namespace loom::data::detail {

// A stream over the file's bytes, decompressed when it is gzip, so that a reader can check a
// header before it inflates (or allocates for) the rest. Refuses anything but a regular file.
class GzReader {
 public:
  GzReader(const std::string& path, const char* op);
  ~GzReader();
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;
  // Reads up to n bytes into dst; fewer only at the end of the data. Throws IOError
  // "<op>: '<path>' is not readable (gzip error: ...)" for a corrupt or truncated .gz file.
  size_t read(void* dst, size_t n);
  // True when no byte is left (reads one byte ahead to find out).
  bool at_end();
  bool compressed() const { return compressed_; }
  uint64_t file_size() const { return file_size_; }

 private:
  void check_error();
  gzFile_s* f_ = nullptr;
  std::string path_, op_;
  uint64_t file_size_ = 0;
  bool compressed_ = false;
};

// The file's bytes, decompressed when it is gzip; throws IOError "<op>: cannot open '<path>': ..."
// or "<op>: '<path>' is not readable (gzip error: ...)" (a truncated or corrupt .gz file).
std::string read_maybe_gzip(const std::string& path, const char* op);

}  // namespace loom::data::detail
