#pragma once
// The errors of loom::store (docs/store.md). Bad arguments (an invalid name, alias, metric
// operator or hyper-parameter JSON) are ValueError, as elsewhere in Loom; what the store finds
// wrong with itself or with the request against its contents is one of these.
#include "loom/core/error.h"

namespace loom::store {

// A database or file-system failure of the store (a locked database after the busy timeout,
// a full disk, an unsupported URL scheme) and the base of the store's errors below.
class LOOM_API StoreError : public Error { using Error::Error; };
// The file is not an SQLite database, or one without Loom's schema table.
class LOOM_API NotAStoreError : public StoreError { using StoreError::StoreError; };
// The database's schema was written by a newer Loom; the message names both versions.
class LOOM_API SchemaVersionError : public StoreError { using StoreError::StoreError; };
// A blob is missing, has the wrong size or its bytes do not match its SHA-256: never loaded.
class LOOM_API BlobError : public StoreError { using StoreError::StoreError; };
// No such model, version or alias.
class LOOM_API NotFoundError : public StoreError { using StoreError::StoreError; };
// The request conflicts with the store's contents (an alias that already names another
// version, deleting a version that an alias names).
class LOOM_API ConflictError : public StoreError { using StoreError::StoreError; };

}  // namespace loom::store
