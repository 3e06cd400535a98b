#pragma once
// What a Store handle shares: the connection (one per Store; sessions serialise its use by
// `mutex`), the blob store and where the database is (for PostgreSQL, the URL without its
// password). Private to the store: the parts above reach the database through store::Session.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loom/store/provenance.h"
#include "loom/store/session.h"
#include "loom/store/store.h"
#include "store/blobs.h"
#include "store/db.h"

namespace loom::store::detail {

struct StoreImpl {
  std::string path;
  std::unique_ptr<Connection> conn;
  std::unique_ptr<BlobStore> blobs;
  int64_t schema_version = 0;
  // The schema parts (Store::ensure_schema) this handle has found current, by name: their
  // version. Read and written under a session.
  std::map<std::string, int64_t> current_parts;
  mutable std::mutex mutex;
};

// The store's own way into a Store's shared state and a session's connection.
struct SessionAccess {
  static StoreImpl& impl(const Store& store) { return *store.impl_; }
  static Session open(StoreImpl& impl, Access access) { return Session(impl, access); }
  static Connection& connection(Session& session) { return session.connection(); }
};

// ValueError for a negative id in `p` (before anything is written).
void check_provenance_ids(const char* op, const Provenance& p);
// In the caller's session: NotFoundError when p.run_id names no run of the store.
void check_provenance(Connection& conn, const char* op, const Provenance& p);

// A session on `impl` (the store's registries hold a StoreImpl, not a Store).
inline Session open_session(StoreImpl& impl, Access access) { return SessionAccess::open(impl, access); }
// The connection a session holds, for the store's helpers that run in the caller's session.
inline Connection& connection(Session& session) { return SessionAccess::connection(session); }

// After the session that released them committed, in a write session of its own: removes the
// stored bytes of `hashes` that no row references (src/store/blobs.h says why after).
inline void remove_unreferenced(StoreImpl& impl, const std::vector<std::string>& hashes) {
  if (hashes.empty()) return;
  Session session = open_session(impl, Access::Write);  // no save can reference them while it is open
  impl.blobs->remove_unreferenced(connection(session), hashes);
  session.commit();
}

}  // namespace loom::store::detail
