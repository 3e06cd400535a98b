#pragma once
// The store's schema and its migrations (docs/store.md, "Schema").
#include <cstdint>

#include "store/db.h"

namespace loom::store::detail {

// The schema version this library writes and understands.
int64_t library_schema_version();

// Reads, in the caller's transaction, whether the database is a Loom store this library can
// open: its schema version, or -1 for a database without tables (a new one). Throws
// NotAStoreError for a database that has tables but no Loom schema table (or is not a database
// at all), SchemaVersionError for a newer schema. Writes nothing.
int64_t check_store(Connection& conn);

// In one write transaction: creates the schema in a database without tables, or applies the
// migrations after the database's version, in order. Throws NotAStoreError for a database that
// has tables but no Loom schema table, SchemaVersionError for a newer schema. Returns the
// database's version (the library's).
int64_t migrate(Connection& conn);

}  // namespace loom::store::detail
