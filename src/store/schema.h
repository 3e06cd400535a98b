#pragma once
// The store's schema and its migrations (docs/store.md, "Schema").
#include <cstdint>

#include "loom/store/schema_part.h"
#include "store/db.h"

namespace loom::store::detail {

struct StoreImpl;

// The store's own tables: the part "loom.store", its version kept in the loom_schema table.
LOOM_INTERNAL const SchemaPart& store_schema();

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
int64_t migrate(StoreImpl& impl);

// Store::ensure_schema: the version of `part` in the database, its missing migrations applied
// first (loom/store/schema_part.h).
int64_t ensure_part(StoreImpl& impl, const SchemaPart& part);

}  // namespace loom::store::detail
