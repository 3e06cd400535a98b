#pragma once
// Content-addressed blobs: bytes named by their SHA-256, stored zstd-compressed as files
// "<root>/<sha[0:2]>/<sha[2:]>", with one row per blob in the `blobs` table counting the rows
// that reference it (docs/store.md, "Blobs").
//
// Ordering, so that a crash at any point leaves no row pointing at a missing or partial file:
//   adding:    the file is written to a temporary, fsynced, renamed and its directory fsynced
//              while the caller's write transaction is open and before it commits;
//   releasing: the count is decremented (the row deleted at zero) in the caller's transaction;
//              the file is removed only after that commit, in a new write transaction that
//              sees no row for it (remove_unreferenced), so a concurrent save of the same bytes
//              (which takes the same lock) either keeps the row or writes the file again.
// A crash between the two leaves an unreferenced file, which gc() removes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "store/db.h"

namespace loom::store::detail {

std::string sha256_hex(std::string_view bytes);

// Bytes hashed and compressed, ready to be stored (no I/O yet: done before taking a lock).
struct PreparedBlob {
  std::string sha256;
  uint64_t size = 0;
  std::string compressed;
};
PreparedBlob prepare_blob(std::string_view bytes);

struct BlobRef {
  std::string sha256;
  uint64_t size = 0;
  uint64_t stored_size = 0;
};

class BlobStore {
 public:
  explicit BlobStore(std::string root);  // creates the directory (durably) when absent
  const std::string& root() const { return root_; }
  std::string path_of(const std::string& sha256) const;

  // Inside a write transaction: one more reference to `blob`. A new blob's file is written
  // durably first (also when its row exists but the file is missing: a repair).
  void add_ref(Connection& conn, const PreparedBlob& blob) const;
  // Inside a write transaction: one reference fewer; true when the row is gone (no references).
  bool release(Connection& conn, const std::string& sha256) const;
  // In its own write transaction: removes the files of `hashes` that no row references.
  void remove_unreferenced(Connection& conn, const std::vector<std::string>& hashes) const;
  // The row of a blob; throws BlobError naming `what` when absent.
  BlobRef ref(Connection& conn, const std::string& sha256, const std::string& what) const;
  // The blob's bytes, verified: the file's size, the decompressed size (never more than
  // ref.size bytes are allocated) and the SHA-256. Throws BlobError naming `what` and the blob.
  std::string read(const BlobRef& ref, const std::string& what) const;

  // In its own write transaction: removes unreferenced blob files and stale temporaries.
  struct Removed {
    int64_t files = 0;
    uint64_t bytes = 0;
  };
  Removed gc(Connection& conn) const;

 private:
  void write_file(const PreparedBlob& blob) const;
  std::string root_;
};

}  // namespace loom::store::detail
