#pragma once
// What a Store handle shares: the connection (one per Store; its operations are serialised by
// `mutex`), the blob store and where the database is (for PostgreSQL, the URL without its password).
#include <memory>
#include <mutex>
#include <string>

#include "store/blobs.h"
#include "store/db.h"

namespace loom::store::detail {

struct StoreImpl {
  std::string path;
  std::unique_ptr<Connection> conn;
  std::unique_ptr<BlobStore> blobs;
  int64_t schema_version = 0;
  mutable std::mutex mutex;
};

}  // namespace loom::store::detail
