#include "store/schema.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "loom/store/error.h"
#include "store/store_impl.h"

namespace loom::store::detail {

namespace {

constexpr const char* kSchemaTable = "loom_schema";
constexpr const char* kStorePart = "loom.store";

// Content-addressed blobs and the model catalog: names, versions, metrics, tags, aliases.
SchemaMigration models_and_blobs() {
  return {1,
          {
              // Content-addressed blobs (files "<db>.blobs/<sha[0:2]>/<sha[2:]>"): the uncompressed
              // size and SHA-256, the stored (zstd) size, and how many rows reference each.
              "CREATE TABLE blobs (sha256 {text} PRIMARY KEY, size {int} NOT NULL, stored_size {int} NOT NULL, "
              "refcount {int} NOT NULL CHECK (refcount > 0), created_ms {int} NOT NULL)",
              // Version numbers are never reused, even after the latest version is deleted.
              "CREATE TABLE model_names (name {text} PRIMARY KEY, last_version {int} NOT NULL)",
              "CREATE TABLE models (id {id}, name {text} NOT NULL REFERENCES model_names(name), version {int} NOT NULL, "
              "created_ms {int} NOT NULL, architecture {text} NOT NULL, hyper_parameters {text} NOT NULL, "
              "weights {text} NOT NULL REFERENCES blobs(sha256), UNIQUE (name, version))",
              "CREATE TABLE model_metrics (model_id {int} NOT NULL REFERENCES models(id) ON DELETE CASCADE, "
              "metric {text} NOT NULL, value {real} NOT NULL, PRIMARY KEY (model_id, metric))",
              "CREATE INDEX model_metrics_by_metric ON model_metrics (metric, value)",
              "CREATE TABLE model_tags (model_id {int} NOT NULL REFERENCES models(id) ON DELETE CASCADE, "
              "tag {text} NOT NULL, PRIMARY KEY (model_id, tag))",
              "CREATE INDEX model_tags_by_tag ON model_tags (tag)",
              "CREATE TABLE model_aliases (name {text} NOT NULL, alias {text} NOT NULL, "
              "model_id {int} NOT NULL REFERENCES models(id), PRIMARY KEY (name, alias))",
          }};
}

SchemaMigration blob_bytes_in_database() {
  return {2,
          {
              // The compressed bytes of blobs kept in the database (PostgreSQL: a store shared by
              // several machines has no common directory; SQLite keeps files and leaves this empty).
              "CREATE TABLE blob_data (sha256 {text} PRIMARY KEY REFERENCES blobs(sha256) ON DELETE CASCADE, data {blob} NOT NULL)",
          }};
}

// Was the task queue of loom::flow, whose tables are now flow's own schema part
// (src/flow/task_schema.cpp): created when flow first uses a store, with IF NOT EXISTS, so
// a database that applied this migration keeps its tasks.
SchemaMigration former_task_queue() { return {3, {}}; }

// Datasets and runs.
SchemaMigration datasets_and_runs() {
  return {4,
          {
              "CREATE TABLE dataset_names (name {text} PRIMARY KEY, last_version {int} NOT NULL)",
              // committed = 0 while a writer is appending (a draft, invisible to readers).
              "CREATE TABLE datasets (id {id}, name {text} NOT NULL REFERENCES dataset_names(name), version {int} NOT NULL, "
              "created_ms {int} NOT NULL, committed {int} NOT NULL, fields {text} NOT NULL, samples {int} NOT NULL, "
              "shards {int} NOT NULL, UNIQUE (name, version))",
              "CREATE TABLE dataset_tags (dataset_id {int} NOT NULL REFERENCES datasets(id) ON DELETE CASCADE, "
              "tag {text} NOT NULL, PRIMARY KEY (dataset_id, tag))",
              "CREATE INDEX dataset_tags_by_tag ON dataset_tags (tag)",
              "CREATE TABLE dataset_shards (dataset_id {int} NOT NULL REFERENCES datasets(id) ON DELETE CASCADE, "
              "shard {int} NOT NULL, blob {text} NOT NULL REFERENCES blobs(sha256), samples {int} NOT NULL, "
              "PRIMARY KEY (dataset_id, shard))",
              "CREATE TABLE dataset_samples (dataset_id {int} NOT NULL REFERENCES datasets(id) ON DELETE CASCADE, "
              "idx {int} NOT NULL, shard {int} NOT NULL, position {int} NOT NULL, metadata {text} NOT NULL, "
              "PRIMARY KEY (dataset_id, idx))",
              // The top-level scalar metadata values, for predicates and ordering in SQL: a number
              // (booleans as 1/0) in num or a string in str.
              "CREATE TABLE dataset_sample_meta (dataset_id {int} NOT NULL REFERENCES datasets(id) ON DELETE CASCADE, "
              "idx {int} NOT NULL, mkey {text} NOT NULL, num {real}, str {text}, PRIMARY KEY (dataset_id, idx, mkey))",
              "CREATE INDEX dataset_sample_meta_by_key ON dataset_sample_meta (dataset_id, mkey, num)",
              "CREATE TABLE dataset_sample_tags (dataset_id {int} NOT NULL REFERENCES datasets(id) ON DELETE CASCADE, "
              "idx {int} NOT NULL, tag {text} NOT NULL, PRIMARY KEY (dataset_id, idx, tag))",
              "CREATE INDEX dataset_sample_tags_by_tag ON dataset_sample_tags (dataset_id, tag)",
              // Runs: status 'running', 'finished' or 'failed'; ended_ms and checkpoint NULL until set.
              "CREATE TABLE runs (id {id}, experiment {text} NOT NULL, name {text} NOT NULL, status {text} NOT NULL, "
              "hyper_parameters {text} NOT NULL, started_ms {int} NOT NULL, ended_ms {int}, error {text}, "
              "checkpoint {text} REFERENCES blobs(sha256))",
              "CREATE INDEX runs_by_experiment ON runs (experiment)",
              "CREATE TABLE run_tags (run_id {int} NOT NULL REFERENCES runs(id) ON DELETE CASCADE, tag {text} NOT NULL, "
              "PRIMARY KEY (run_id, tag))",
              // value NULL: a NaN (SQLite cannot store one).
              "CREATE TABLE run_metrics (run_id {int} NOT NULL REFERENCES runs(id) ON DELETE CASCADE, metric {text} NOT NULL, "
              "epoch {int} NOT NULL, value {real}, PRIMARY KEY (run_id, metric, epoch))",
          }};
}

// The versions of the schema parts above the store (Store::ensure_schema), by name.
SchemaMigration schema_parts() {
  return {5,
          {
              "CREATE TABLE loom_schema_parts (part {text} PRIMARY KEY, version {int} NOT NULL)",
          }};
}

// Lineage (store::Provenance): the task and run that produced a version (NULL: none).
SchemaMigration lineage() {
  return {6,
          {
              "ALTER TABLE models ADD COLUMN task_id {int}",
              "ALTER TABLE models ADD COLUMN run_id {int}",
              "ALTER TABLE datasets ADD COLUMN task_id {int}",
              "ALTER TABLE datasets ADD COLUMN run_id {int}",
          }};
}

// The wall-clock time each epoch's metrics were logged (Unix ms; NULL for older rows).
SchemaMigration metric_times() {
  return {7,
          {
              "ALTER TABLE run_metrics ADD COLUMN time_ms {int}",
          }};
}

// Named queries (store::Queries): a SampleQuery (JSON) over versions first..last of a
// dataset (last 0: up to the latest; both 0: the latest only).
SchemaMigration named_queries() {
  return {8,
          {
              "CREATE TABLE dataset_queries (name {text} PRIMARY KEY, dataset {text} NOT NULL, first_version {int} NOT NULL, "
              "last_version {int} NOT NULL, query {text} NOT NULL, created_ms {int} NOT NULL)",
          }};
}

// Each metric of a run in brief (Runs::summaries reads these instead of every epoch, so a
// table of 1,000 runs is quick): the epoch count, the last epoch and its value, the lowest
// and highest values (NULL: none but NaN). Runs::log_epoch keeps them in its transaction;
// an older store's are computed here from its epochs.
SchemaMigration run_metric_summaries() {
  return {9,
          {
              "CREATE TABLE run_metric_summaries (run_id {int} NOT NULL REFERENCES runs(id) ON DELETE CASCADE, metric {text} NOT NULL, "
              "epochs {int} NOT NULL, last_epoch {int} NOT NULL, final_value {real}, min_value {real}, max_value {real}, "
              "PRIMARY KEY (run_id, metric))",
              "INSERT INTO run_metric_summaries (run_id, metric, epochs, last_epoch, final_value, min_value, max_value) "
              "SELECT a.run_id, a.metric, a.n, a.last, f.value, a.lo, a.hi FROM (SELECT run_id, metric, COUNT(*) AS n, MAX(epoch) AS last, "
              "MIN(value) AS lo, MAX(value) AS hi FROM run_metrics GROUP BY run_id, metric) a "
              "JOIN run_metrics f ON f.run_id = a.run_id AND f.metric = a.metric AND f.epoch = a.last",
          }};
}

}  // namespace

// The store's own part, as the parts above it are (loom/store/schema_part.h), but with its
// version in loom_schema, where every store since the first keeps it. Append only: a released
// migration is never edited; a change of schema is a new entry (a function above, named for what
// it adds). The upgrade tests are generated from this list (tests/unit/store/store_upgrade_test.cpp):
// a store stopped at each version opens, migrates and reads.
const SchemaPart& store_schema() {
  static const SchemaPart part{kStorePart,
                               {models_and_blobs(), blob_bytes_in_database(), former_task_queue(), datasets_and_runs(),
                                schema_parts(), lineage(), metric_times(), named_queries(), run_metric_summaries()}};
  return part;
}

int64_t library_schema_version() { return store_schema().migrations.back().version; }

int64_t check_store(Connection& conn) {
  const std::vector<std::string> tables = conn.tables();
  if (std::find(tables.begin(), tables.end(), kSchemaTable) == tables.end()) {
    if (tables.empty()) return -1;
    std::string list;
    for (size_t i = 0; i < tables.size() && i < 5; ++i) list += (i ? ", " : "") + loom::detail::escape_text(tables[i], false, 64);  // another program's names
    throw NotAStoreError("store: " + conn.describe() + " is not a Loom store: it has tables (" + list + ") but no '" + kSchemaTable +
                         "' table (valid: a Loom store, or a new or empty database); nothing was changed");
  }
  const std::vector<Row> rows = conn.query("SELECT application, version FROM loom_schema");
  if (rows.size() != 1 || rows[0].is_null(0) || rows[0].text(0) != "loom.store")
    throw NotAStoreError("store: " + conn.describe() + " is not a Loom store: its '" + kSchemaTable +
                         "' table does not hold exactly one row of application 'loom.store'; nothing was changed");
  const int64_t current = rows[0].integer(1);
  if (current > library_schema_version())
    throw SchemaVersionError("store: " + conn.describe() + " has schema version " + std::to_string(current) +
                             ", newer than this library's " + std::to_string(library_schema_version()) +
                             ": open it with a newer Loom (nothing was changed)");
  if (current < 0) throw NotAStoreError("store: " + conn.describe() + " has an invalid schema version " + std::to_string(current));
  return current;
}

int64_t migrate(StoreImpl& impl) {
  Session session = open_session(impl, Access::Write);
  Connection& conn = connection(session);
  int64_t current = check_store(conn);
  if (current < 0) {
    // The application name tells a Loom store from another program's database of the same shape.
    conn.execute(conn.dialect().render("CREATE TABLE loom_schema (application {text} NOT NULL, version {int} NOT NULL)"));
    conn.execute("INSERT INTO loom_schema (application, version) VALUES ('loom.store', 0)");
    current = 0;
  }
  for (const SchemaMigration& m : store_schema().migrations) {
    if (m.version <= current) continue;
    for (const std::string& ddl : m.ddl) conn.execute(conn.dialect().render(ddl));
    conn.execute("UPDATE loom_schema SET version = ?", {m.version});
    current = m.version;
  }
  session.commit();
  return current;
}

namespace {

void check_part(const SchemaPart& part) {
  bool ok = !part.name.empty() && part.name.size() <= 64 && part.name != kStorePart;
  for (char c : part.name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.');
  if (!ok)
    throw ValueError("ensure_schema: invalid schema part name " + loom::detail::quote_text(part.name) +
                     " (valid: 1 to 64 characters of [a-z0-9_.], not '" + kStorePart + "')");
  if (part.migrations.empty()) throw ValueError("ensure_schema: schema part '" + part.name + "' has no migrations");
  for (size_t i = 0; i < part.migrations.size(); ++i)
    if (part.migrations[i].version != static_cast<int64_t>(i) + 1)
      throw ValueError("ensure_schema: migration " + std::to_string(i + 1) + " of schema part '" + part.name + "' has version " +
                       std::to_string(part.migrations[i].version) + " (valid: versions 1, 2, ... in order)");
}

// The version of `part` the database records, 0 when none; SchemaVersionError when newer than `latest`.
int64_t recorded_version(Connection& conn, const SchemaPart& part, int64_t latest) {
  const std::vector<Row> rows = conn.query("SELECT version FROM loom_schema_parts WHERE part = ?", {part.name});
  const int64_t version = rows.empty() ? 0 : rows[0].integer(0);
  if (version > latest)
    throw SchemaVersionError("store: " + conn.describe() + " has version " + std::to_string(version) + " of schema part '" +
                             part.name + "', newer than this program's " + std::to_string(latest) +
                             ": use it with a newer Loom (nothing was changed)");
  return version;
}

}  // namespace

int64_t ensure_part(StoreImpl& impl, const SchemaPart& part) {
  check_part(part);
  const int64_t latest = part.migrations.back().version;
  {
    Session read = open_session(impl, Access::Read);
    auto known = impl.current_parts.find(part.name);
    if (known != impl.current_parts.end() && known->second == latest) return latest;
    if (recorded_version(connection(read), part, latest) == latest) {
      impl.current_parts[part.name] = latest;
      read.commit();
      return latest;
    }
  }
  // Under the write lock, the version read again: a concurrent first use migrates once.
  Session write = open_session(impl, Access::Write);
  Connection& conn = connection(write);
  const int64_t current = recorded_version(conn, part, latest);
  for (const SchemaMigration& m : part.migrations) {
    if (m.version <= current) continue;
    for (const std::string& ddl : m.ddl) conn.execute(conn.dialect().render(ddl));
  }
  if (current < latest)
    conn.execute("INSERT INTO loom_schema_parts (part, version) VALUES (?, ?) ON CONFLICT (part) DO UPDATE SET version = excluded.version",
                 {part.name, latest});
  write.commit();
  std::lock_guard<std::mutex> lock(impl.mutex);  // the session's lock went with its commit
  impl.current_parts[part.name] = latest;
  return latest;
}

}  // namespace loom::store::detail
