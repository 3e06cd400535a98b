#pragma once
// Whole-file reads of plain or gzip-compressed files (zlib's gzread passes plain files through).
#include <string>

namespace loom::data::detail {

// The file's bytes, decompressed when it is gzip; throws IOError "<op>: cannot open '<path>': ..."
// or "<op>: '<path>' is not readable (gzip error: ...)" (a truncated or corrupt .gz file).
std::string read_maybe_gzip(const std::string& path, const char* op);

}  // namespace loom::data::detail
