#pragma once
// Content-addressed blobs: bytes named by their SHA-256, stored zstd-compressed (SQLite: as
// files "<root>/<sha[0:2]>/<sha[2:]>"; PostgreSQL: in the table `blob_data`), with one row per
// blob in the `blobs` table counting the rows that reference it (docs/store.md, "Blobs").
//
// Ordering of the files, so that a crash at any point leaves no row pointing at a missing or partial file:
//   adding:    the file is written to a temporary, fsynced, renamed and its directory fsynced
//              while the caller's write transaction is open and before it commits;
//   releasing: the count is decremented (the row deleted at zero) in the caller's transaction;
//              the file is removed only after that commit, in a new write transaction that
//              sees no row for it (remove_unreferenced), so a concurrent save of the same bytes
//              (which takes the same lock) either keeps the row or writes the file again.
// A crash between the two leaves an unreferenced file, which gc() removes.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loom/core/api.h"
#include "store/db.h"

namespace loom::store::detail {

LOOM_INTERNAL std::string sha256_hex(std::string_view bytes);

// A blob reference read from the database is used as a file name (SQLite) and a key: anything
// but a SHA-256 in hex (64 of [0-9a-f]) is a damaged row, never a path. Throws BlobError
// "store: <what>: invalid blob reference '<ref, escaped>' ..." otherwise. BlobStore::ref and
// FileBlobStore::path_of check every reference they are given, so no reader can bypass it.
void check_blob_ref(const std::string& sha256, const std::string& what);

// Bytes hashed and compressed, ready to be stored (no I/O yet: done before taking a lock).
struct PreparedBlob {
  std::string sha256;
  uint64_t size = 0;
  std::string compressed;
};
LOOM_INTERNAL PreparedBlob prepare_blob(std::string_view bytes);

struct BlobRef {
  std::string sha256;
  uint64_t size = 0;
  uint64_t stored_size = 0;
};

// The blob layer: one interface, the bytes stored where the backend suits (make_blob_store).
// The `blobs` table (hash, sizes, reference count) is common; so are the checks on reading.
class LOOM_INTERNAL BlobStore {
 public:
  virtual ~BlobStore() = default;
  // The blob directory, or "" when the bytes live in the database.
  virtual const std::string& root() const = 0;

  // Inside a write transaction: one more reference to `blob`. A new blob's bytes are stored
  // durably first (also when its row exists but its bytes are missing: a repair).
  virtual void add_ref(Connection& conn, const PreparedBlob& blob) const = 0;
  // Inside a write transaction: one reference fewer; true when the row is gone (no references).
  bool release(Connection& conn, const std::string& sha256) const;
  // In a write session of its own, opened after the releasing one committed: removes the stored
  // bytes of `hashes` that no row references.
  virtual void remove_unreferenced(Connection& conn, const std::vector<std::string>& hashes) const = 0;
  // The row of a blob; throws BlobError naming `what` when absent or when `sha256` is not a
  // reference (check_blob_ref), before anything is read.
  BlobRef ref(Connection& conn, const std::string& sha256, const std::string& what) const;
  // Inside the caller's transaction: the blob's stored (compressed) bytes, unchecked. Throws
  // BlobError naming `what` and the blob when they cannot be read.
  virtual std::string stored(Connection& conn, const BlobRef& ref, const std::string& what) const = 0;
  // The blob's bytes from its stored bytes, verified: the stored size, the decompressed size
  // (never more than ref.size bytes are allocated) and the SHA-256. Throws BlobError naming
  // `what` and the blob. No I/O: callers run it outside their lock.
  std::string decode(const BlobRef& ref, const std::string& stored, const std::string& what) const;
  std::string read(Connection& conn, const BlobRef& ref, const std::string& what) const {
    return decode(ref, stored(conn, ref, what), what);
  }

  // In the caller's write session (Store::gc): removes stored bytes no row references and stale
  // temporaries.
  struct Removed {
    int64_t files = 0;
    uint64_t bytes = 0;
  };
  virtual Removed gc(Connection& conn) const = 0;

 protected:
  // "what: blob <sha> (<where it is>)", for messages.
  virtual std::string name(const std::string& what, const std::string& sha256) const = 0;
};

// The blobs of an SQLite store: files "<root>/<sha[0:2]>/<sha[2:]>", ordered as the top of
// this header says.
class LOOM_INTERNAL FileBlobStore final : public BlobStore {
 public:
  explicit FileBlobStore(std::string root);  // creates the directory (durably) when absent
  const std::string& root() const override { return root_; }
  // "<root>/<sha[0:2]>/<sha[2:]>"; BlobError unless `sha256` is a reference (check_blob_ref).
  std::string path_of(const std::string& sha256) const;
  void add_ref(Connection& conn, const PreparedBlob& blob) const override;
  void remove_unreferenced(Connection& conn, const std::vector<std::string>& hashes) const override;
  std::string stored(Connection& conn, const BlobRef& ref, const std::string& what) const override;
  Removed gc(Connection& conn) const override;

 protected:
  std::string name(const std::string& what, const std::string& sha256) const override;

 private:
  void write_file(const PreparedBlob& blob) const;
  std::string root_;
};

// The blobs of a PostgreSQL store (shared by several machines, so no local directory): the
// compressed bytes in the table `blob_data`, written in the transaction of the row that
// references them and deleted with the `blobs` row (ON DELETE CASCADE), so a crash can leave
// neither a missing nor an orphaned blob; gc has nothing to remove.
class DatabaseBlobStore final : public BlobStore {
 public:
  const std::string& root() const override { return root_; }
  void add_ref(Connection& conn, const PreparedBlob& blob) const override;
  void remove_unreferenced(Connection&, const std::vector<std::string>&) const override {}
  std::string stored(Connection& conn, const BlobRef& ref, const std::string& what) const override;
  Removed gc(Connection&) const override { return {}; }

 protected:
  std::string name(const std::string& what, const std::string& sha256) const override;

 private:
  std::string root_;  // empty
};

// The blob store for a connection's backend: files in "<db_path>.blobs" for SQLite, the
// database itself for PostgreSQL.
std::unique_ptr<BlobStore> make_blob_store(const Connection& conn, const std::string& db_path);

}  // namespace loom::store::detail
