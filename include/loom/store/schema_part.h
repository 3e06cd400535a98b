#pragma once
// A part of the schema that a part above the store owns (flow's task queue): its name and its
// migrations, which Store::ensure_schema applies to a database that lacks them (docs/store.md,
// "Schema").
//
//   const store::SchemaPart kQueue{"my.queue", {{1, {"CREATE TABLE my_items (id {id}, name {text} NOT NULL)"}}}};
//   s.ensure_schema(kQueue);   // creates my_items on first use; then a read of one row
#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/api.h"

namespace loom::store {

struct LOOM_API SchemaMigration {
  int64_t version;               // 1, 2, ... in order
  std::vector<std::string> ddl;  // statements; column types as {id} {int} {real} {text} {blob}
};

struct LOOM_API SchemaPart {
  std::string name;  // 1 to 64 characters of [a-z0-9_.]; the store's own is "loom.store"
  // Append only: a released migration is never edited; a change of the part's tables is a new
  // entry with the next version.
  std::vector<SchemaMigration> migrations;
};

}  // namespace loom::store
