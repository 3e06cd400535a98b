#pragma once
// Whole-file reads and crash-safe writes.
#include <string>

namespace loom {

// Reads a whole file; throws IOError naming the path and the system's reason.
std::string read_file(const std::string& path);

// Writes `bytes` to `path` atomically: into a temporary file in the same directory, fsync,
// rename over `path`, fsync of the directory. A failure at any point leaves the previous file
// (if any) intact and removes the temporary; it throws IOError naming the path and the reason.
void write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace loom
