// The store's foundation: the database layer (parameters, typed rows, transactions), opening
// by URL, schema versions and migrations, content-addressed blobs and gc (docs/store.md).
#include <gtest/gtest.h>
#include <loom/loom.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "store/blobs.h"
#include "store/db.h"
#include "unit/core_test_util.h"
#include "unit/store_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::raw_sql;
using loom_test::TempDir;
namespace fs = std::filesystem;
namespace sd = loom::store::detail;

namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

}  // namespace

TEST(StoreDb, ParametersAndTypedRows) {
  TempDir tmp;
  auto conn = sd::open_sqlite(tmp / "db.sqlite");
  conn->execute("CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB, n INTEGER)");
  const std::string blob("\0\1\2zero", 7);
  conn->execute("INSERT INTO t VALUES (?, ?, ?, ?, ?)", {int64_t{-5}, 2.5, std::string("héllo"), sd::Bytes{blob}, std::monostate{}});
  const auto rows = conn->query("SELECT i, r, s, b, n FROM t WHERE i = ?", {int64_t{-5}});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].integer(0), -5);
  EXPECT_EQ(rows[0].real(1), 2.5);
  EXPECT_EQ(rows[0].real(0), -5.0);  // integers read as reals
  EXPECT_EQ(rows[0].text(2), "héllo");
  EXPECT_EQ(rows[0].blob(3), blob);
  EXPECT_TRUE(rows[0].is_null(4));
  // A type mismatch or a missing column is a typed error, not undefined behaviour.
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { rows[0].integer(2); }), {"column 2", "text", "integer"}));
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { rows[0].text(9); }), {"column 9"}));
  // Wrong parameter counts and bad SQL name the statement.
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { conn->query("SELECT ? + ?", {int64_t{1}}); }), {"1 parameters", "2"}));
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { conn->query("SELEC 1"); }), {"SELEC 1"}));
}

TEST(StoreDb, TransactionsRollBackUnlessCommitted) {
  TempDir tmp;
  auto conn = sd::open_sqlite(tmp / "db.sqlite");
  conn->execute("CREATE TABLE t (k INTEGER PRIMARY KEY)");
  try {
    sd::Transaction tx(*conn, sd::TxMode::Write);
    conn->execute("INSERT INTO t VALUES (1)");
    conn->execute("INSERT INTO t VALUES (1)");  // a constraint violation midway
    tx.commit();
  } catch (const store::StoreError&) {
  }
  EXPECT_TRUE(conn->query("SELECT k FROM t").empty());
  {
    sd::Transaction tx(*conn, sd::TxMode::Write);
    conn->execute("INSERT INTO t VALUES (2)");
  }  // not committed
  EXPECT_TRUE(conn->query("SELECT k FROM t").empty());
  {
    sd::Transaction tx(*conn, sd::TxMode::Write);
    conn->execute("INSERT INTO t VALUES (3)");
    tx.commit();
  }
  EXPECT_EQ(conn->query("SELECT k FROM t").size(), 1u);
  // A second connection sees the commit; its write transaction waits for ours, then proceeds.
  auto other = sd::open_sqlite(tmp / "db.sqlite");
  EXPECT_EQ(other->query("SELECT k FROM t")[0].integer(0), 3);
}

TEST(StoreDb, SettingsAndDialect) {
  TempDir tmp;
  auto conn = sd::open_sqlite(tmp / "db.sqlite");
  EXPECT_EQ(conn->query("PRAGMA journal_mode")[0].text(0), "wal");
  EXPECT_EQ(conn->query("PRAGMA foreign_keys")[0].integer(0), 1);
  EXPECT_EQ(conn->query("PRAGMA synchronous")[0].integer(0), 2);  // FULL
  EXPECT_GE(conn->query("PRAGMA busy_timeout")[0].integer(0), 1000);
  EXPECT_EQ(conn->dialect().render("CREATE TABLE x (id {id}, n {int}, r {real}, s {text}, b {blob}, {other})"),
            "CREATE TABLE x (id INTEGER PRIMARY KEY, n INTEGER, r REAL, s TEXT, b BLOB, {other})");
}

TEST(StoreOpen, CreatesTheSchemaOnceAndReopens) {
  TempDir tmp;
  const std::string path = tmp / "s.db";
  {
    store::Store s = store::Store::open(path);
    EXPECT_EQ(s.schema_version(), store::Store::library_schema_version());
    EXPECT_EQ(s.path(), path);
    EXPECT_EQ(s.blob_dir(), path + ".blobs");
    EXPECT_TRUE(fs::is_directory(s.blob_dir()));
  }
  EXPECT_EQ(raw_sql(path, "SELECT version FROM loom_schema"), std::vector<std::string>{std::to_string(store::Store::library_schema_version())});
  store::Store again = store::Store::open("sqlite://" + path);  // the URL form, absolute path
  EXPECT_EQ(again.schema_version(), store::Store::library_schema_version());
  EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM loom_schema"), std::vector<std::string>{"1"});
  // An empty file is a new database.
  write_bytes(tmp / "empty.db", "");
  EXPECT_NO_THROW(store::Store::open(tmp / "empty.db"));
}

TEST(StoreOpen, UrlForms) {
  TempDir tmp;
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([] { store::Store::open("postgresql://user@host/db"); }),
                           {"PostgreSQL", "not built yet"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { store::Store::open("ftp://host/x"); }), {"ftp", "sqlite:///path"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { store::Store::open(":memory:"); }), {":memory:"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { store::Store::open("sqlite://"); }), {"names no database"}));
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { store::Store::open(tmp / "no/such/dir/s.db"); }), {"cannot open"}));
}

TEST(StoreOpen, NewerSchemaIsRefusedNamingBothVersions) {
  TempDir tmp;
  const std::string path = tmp / "s.db";
  store::Store::open(path);
  raw_sql(path, "UPDATE loom_schema SET version = 99");
  const std::string msg = error_message<store::SchemaVersionError>([&] { store::Store::open(path); });
  EXPECT_TRUE(contains_all(msg, {"99", "newer than this library's " + std::to_string(store::Store::library_schema_version())}));
  EXPECT_EQ(raw_sql(path, "SELECT version FROM loom_schema"), std::vector<std::string>{"99"});  // untouched
}

TEST(StoreOpen, MigratesAnOlderSchema) {
  // A database stopped at version 0 (the schema table alone): opening applies the migrations.
  TempDir tmp;
  const std::string path = tmp / "s.db";
  raw_sql(path, "CREATE TABLE loom_schema (application TEXT NOT NULL, version INTEGER NOT NULL);"
                "INSERT INTO loom_schema VALUES ('loom.store', 0)");
  store::Store s = store::Store::open(path);
  EXPECT_EQ(s.schema_version(), store::Store::library_schema_version());
  EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'models'"), std::vector<std::string>{"1"});
}

TEST(StoreOpen, NotAStoreIsATypedError) {
  TempDir tmp;
  write_bytes(tmp / "text.db", std::string(4096, 'x'));
  EXPECT_TRUE(contains_all(error_message<store::NotAStoreError>([&] { store::Store::open(tmp / "text.db"); }), {"text.db", "not a Loom store"}));
  EXPECT_EQ(file_bytes(tmp / "text.db"), std::string(4096, 'x'));  // not modified
  raw_sql(tmp / "other.db", "CREATE TABLE customers (id INTEGER)");
  EXPECT_TRUE(contains_all(error_message<store::NotAStoreError>([&] { store::Store::open(tmp / "other.db"); }), {"customers", "loom_schema"}));
  raw_sql(tmp / "fake.db", "CREATE TABLE loom_schema (application TEXT, version INTEGER); INSERT INTO loom_schema VALUES ('other', 1)");
  EXPECT_TRUE(contains_all(error_message<store::NotAStoreError>([&] { store::Store::open(tmp / "fake.db"); }), {"loom.store"}));
  fs::create_directories(tmp / "dir.db");
  EXPECT_THROW(store::Store::open(tmp / "dir.db"), store::StoreError);
}

TEST(StoreBlobs, HashCompressAndVerify) {
  // Known SHA-256 values (FIPS 180-2 examples).
  EXPECT_EQ(sd::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sd::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  TempDir tmp;
  sd::BlobStore blobs(tmp / "blobs");
  const std::string data(100000, 'a');
  const sd::PreparedBlob p = sd::prepare_blob(data);
  EXPECT_EQ(p.sha256, sd::sha256_hex(data));
  EXPECT_LT(p.compressed.size(), 1000u);  // compressed
  auto conn = sd::open_sqlite(tmp / "db.sqlite");
  store::Store::open(tmp / "db.sqlite");  // the schema
  {
    sd::Transaction tx(*conn, sd::TxMode::Write);
    blobs.add_ref(*conn, p);
    blobs.add_ref(*conn, p);  // deduplicated: one file, two references
    tx.commit();
  }
  EXPECT_TRUE(fs::exists(blobs.path_of(p.sha256)));
  EXPECT_EQ(blobs.path_of(p.sha256), tmp / ("blobs/" + p.sha256.substr(0, 2) + "/" + p.sha256.substr(2)));
  EXPECT_EQ(conn->query("SELECT refcount FROM blobs")[0].integer(0), 2);
  const sd::BlobRef ref = blobs.ref(*conn, p.sha256, "test");
  EXPECT_EQ(blobs.read(ref, "test"), data);
  // A row claiming a smaller size: never more than that is decompressed.
  sd::BlobRef small = ref;
  small.size = 10;
  EXPECT_TRUE(contains_all(error_message<store::BlobError>([&] { blobs.read(small, "test"); }), {"more than the 10 bytes"}));
  // Damaged bytes of the same length: a zstd error or a hash mismatch, both BlobError.
  std::string bytes = file_bytes(blobs.path_of(p.sha256));
  bytes[bytes.size() / 2] ^= 0x55;
  write_bytes(blobs.path_of(p.sha256), bytes);
  EXPECT_TRUE(contains_all(error_message<store::BlobError>([&] { blobs.read(ref, "what-it-was"); }), {"what-it-was", p.sha256}));
  // Releasing: the row goes with the last reference, the file after the commit.
  {
    sd::Transaction tx(*conn, sd::TxMode::Write);
    EXPECT_FALSE(blobs.release(*conn, p.sha256));
    EXPECT_TRUE(blobs.release(*conn, p.sha256));
    tx.commit();
  }
  EXPECT_TRUE(fs::exists(blobs.path_of(p.sha256)));
  blobs.remove_unreferenced(*conn, {p.sha256});
  EXPECT_FALSE(fs::exists(blobs.path_of(p.sha256)));
}

TEST(StoreBlobs, GcRemovesOnlyUnreferencedFilesAndTemporaries) {
  TempDir tmp;
  store::Store s = store::Store::open(tmp / "s.db");
  const store::ModelInfo kept = s.models().save("m", loom_test::small_mlp(1));
  // A blob file without a row (a writer killed before its commit) and a killed writer's temporary.
  const std::string orphan = std::string(64, 'a');
  fs::create_directories(s.blob_dir() + "/aa");
  write_bytes(s.blob_dir() + "/aa/" + orphan.substr(2), "orphan");
  write_bytes(s.blob_dir() + "/aa/" + orphan.substr(2) + ".tmp.999999.1", "partial");
  write_bytes(s.blob_dir() + "/aa/README", "not a blob: left alone");
  const store::GcReport r = s.gc();
  EXPECT_EQ(r.files_removed, 2);
  EXPECT_EQ(r.bytes_freed, 6u + 7u);
  EXPECT_TRUE(fs::exists(s.blob_dir() + "/aa/README"));
  EXPECT_NO_THROW(s.models().load("m", kept.version));
  EXPECT_EQ(s.gc().files_removed, 0);
}
