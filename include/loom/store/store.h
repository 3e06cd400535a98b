#pragma once
// A store: a database of records (models, datasets and runs) and its content-addressed blobs
// (SQLite: a directory beside the file; PostgreSQL: in the database) (docs/store.md).
//
//   store::Store s = store::Store::open("runs.db");      // or "sqlite:///abs/path/runs.db"
//   store::ModelInfo v = s.models().save("mnist-cnn", graph, {{"accuracy", 0.91}});
//   Graph g = s.models().load("mnist-cnn", "production");
//
// One Store object may be used from several threads (its operations are serialised); several
// Store objects and processes may share one database (writes take the database's write lock).
#include <cstdint>
#include <memory>
#include <string>

#include "loom/core/api.h"
#include "loom/store/error.h"
#include "loom/store/schema_part.h"

namespace loom::store {

namespace detail {
struct StoreImpl;
struct SessionAccess;
}
class Models;
class Datasets;
class Queries;
class Runs;

struct LOOM_API GcReport {
  int64_t files_removed = 0;  // blob files no row references, and temporaries of killed writers
  uint64_t bytes_freed = 0;
};

class LOOM_API Store {
 public:
  // Opens (creating when absent) the store at `url`:
  //   "path/to/file.db" or "sqlite:///abs/path/file.db"  an embedded SQLite database, blobs in
  //                                                       "<file>.blobs/" beside it
  //   "postgresql://user@host/db", "postgres://...",      a PostgreSQL database (libpq URL, e.g.
  //   "postgresql://user@/db?host=/socket/dir"            a unix socket folder), blobs in the
  //                                                       database itself (docs/store.md)
  // The schema is created or migrated on open, in one transaction. Throws NotAStoreError for a
  // file that is not a Loom store, SchemaVersionError for a schema newer than this library's,
  // StoreError when the database cannot be opened or reached (naming it, never its password).
  static Store open(const std::string& url);

  Models models() const;
  Datasets datasets() const;
  Queries queries() const;  // named queries over datasets (loom/store/queries.h)
  Runs runs() const;

  // SQLite: removes blob files that no row references (left by a writer killed between writing a blob
  // and committing its row, or by a deletion interrupted after its commit) and the
  // temporaries of killed writers. Runs under the database's write lock, so it never removes a
  // blob that a concurrent save is about to reference. PostgreSQL: blob bytes live and die with
  // their rows in one transaction, so there is never anything to remove (a zero report).
  GcReport gc();

  // Creates or migrates the tables of a part above the store (flow's task queue): applies, in
  // one write session, the migrations of `part` after the version the database records for it,
  // and records the new one. Once current, a later call on this handle reads nothing. Returns
  // the part's version. Throws ValueError for a bad part (a name, or versions not 1, 2, ...),
  // SchemaVersionError when the database's version of the part is newer than `part`'s (nothing
  // is changed). The store's own tables are created by open().
  int64_t ensure_schema(const SchemaPart& part) const;

  int64_t schema_version() const;        // the database's (equal to the library's after open)
  static int64_t library_schema_version();
  const std::string& path() const;       // the database file; PostgreSQL: the URL, password "***"
  const std::string& blob_dir() const;   // "<path>.blobs"; PostgreSQL: "" (blobs in the database)

 private:
  friend struct detail::SessionAccess;  // the one way in: sessions (loom/store/session.h)
  explicit Store(std::shared_ptr<detail::StoreImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::StoreImpl> impl_;
};

}  // namespace loom::store
