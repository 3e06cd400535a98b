// The store's foundation: the database layer (parameters, typed rows, transactions), opening
// by URL, schema versions and migrations, content-addressed blobs and gc (docs/store.md), on
// both backends (SQLite and a throwaway PostgreSQL server, tests/unit/store/pg_server.h).
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/graph/graph.h>
#include <loom/store/error.h>
#include <loom/store/model_registry.h>
#include <loom/store/session.h>
#include <loom/store/sql.h>
#include <loom/store/store.h>
#include <sys/stat.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "store/blobs.h"
#include "store/db.h"
#include "store/store_impl.h"
#include "unit/common/core_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::raw_sql;
using loom_test::TempDir;
using loom_test::StoreBackendTest;
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

// A transaction on a bare connection, begun, committed and rolled back as store::Session does
// it (the tests of the database layer run below sessions).
class BareTransaction {
 public:
  BareTransaction(sd::Connection& conn, sd::TxMode mode) : conn_(conn) { conn_.begin(mode); }
  ~BareTransaction() {
    if (!done_) conn_.rollback();
  }
  BareTransaction(const BareTransaction&) = delete;
  BareTransaction& operator=(const BareTransaction&) = delete;
  void commit() {
    done_ = true;
    conn_.commit();
  }

 private:
  sd::Connection& conn_;
  bool done_ = false;
};

class StoreDb : public StoreBackendTest {
 protected:
  std::unique_ptr<sd::Connection> connect() {
    auto conn = pg() ? sd::open_postgresql(url()) : sd::open_sqlite(url());
    conn->prepare_for_writing();  // as Store::open does once the database is known to be a store or new
    return conn;
  }
};
class StoreOpen : public StoreBackendTest {};
class StoreBlobs : public StoreBackendTest {};

}  // namespace

INSTANTIATE_STORE_BACKENDS(StoreDb);
INSTANTIATE_STORE_BACKENDS(StoreOpen);
INSTANTIATE_STORE_BACKENDS(StoreBlobs);

TEST_P(StoreDb, ParametersAndTypedRows) {
  auto conn = connect();
  conn->execute(conn->dialect().render("CREATE TABLE t (i {int}, r {real}, s {text}, b {blob}, n {int})"));
  const std::string blob("\0\1\2zero\xff", 8);
  conn->execute("INSERT INTO t VALUES (?, ?, ?, ?, ?)", {int64_t{-5}, 2.5, std::string("héllo"), sd::Bytes{blob}, std::monostate{}});
  conn->execute("INSERT INTO t VALUES (?, ?, ?, ?, ?)", {int64_t{INT64_MAX}, 0.1, std::string("it's '?'"), sd::Bytes{}, int64_t{1}});
  conn->execute("INSERT INTO t (i, r) VALUES (?, ?)", {int64_t{INT64_MIN}, -INFINITY});
  const auto rows = conn->query("SELECT i, r, s, b, n FROM t WHERE i = ?", {int64_t{-5}});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].integer(0), -5);
  EXPECT_EQ(rows[0].real(1), 2.5);
  EXPECT_EQ(rows[0].real(0), -5.0);  // integers read as reals
  EXPECT_EQ(rows[0].text(2), "héllo");
  EXPECT_EQ(rows[0].blob(3), blob);
  EXPECT_TRUE(rows[0].is_null(4));
  // Extremes round-trip exactly; '?' inside a string literal is not a parameter.
  const auto more = conn->query("SELECT i, r, s, b, 'a ''?'' literal' FROM t WHERE i <> ? ORDER BY i DESC", {int64_t{-5}});
  ASSERT_EQ(more.size(), 2u);
  EXPECT_EQ(more[0].integer(0), INT64_MAX);
  EXPECT_EQ(more[0].real(1), 0.1);
  EXPECT_EQ(more[0].text(2), "it's '?'");
  EXPECT_EQ(more[0].blob(3), "");
  EXPECT_EQ(more[0].text(4), "a '?' literal");
  EXPECT_EQ(more[1].integer(0), INT64_MIN);
  EXPECT_EQ(more[1].real(1), -INFINITY);
  EXPECT_EQ(conn->query("SELECT COUNT(*) FROM t WHERE r > ?", {0.05})[0].integer(0), 2);
  // A type mismatch or a missing column is a typed error, not undefined behaviour.
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { rows[0].integer(2); }), {"column 2", "text", "integer"}));
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { rows[0].text(9); }), {"column 9"}));
  // Wrong parameter counts and bad SQL name the statement and the database.
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { conn->query("SELECT ? + ?", {int64_t{1}}); }), {"1 parameters", "2"}));
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { conn->query("SELEC 1"); }), {"SELEC 1", conn->describe()}));
  // Statements are cached: the same SQL again, with other values, gives their rows.
  EXPECT_EQ(conn->query("SELECT s FROM t WHERE i = ?", {int64_t{-5}})[0].text(0), "héllo");
  EXPECT_EQ(conn->query("SELECT s FROM t WHERE i = ?", {int64_t{INT64_MAX}})[0].text(0), "it's '?'");
  EXPECT_EQ(conn->execute("UPDATE t SET n = ? WHERE i <> ?", {int64_t{7}, int64_t{0}}), 3);
}

TEST_P(StoreDb, TransactionsRollBackUnlessCommitted) {
  auto conn = connect();
  conn->execute(conn->dialect().render("CREATE TABLE t (k {int} PRIMARY KEY)"));
  const std::string msg = error_message<store::StoreError>([&] {
    BareTransaction tx(*conn, sd::TxMode::Write);
    conn->execute("INSERT INTO t VALUES (1)");
    conn->execute("INSERT INTO t VALUES (1)");  // a constraint violation midway
    tx.commit();
  });
  EXPECT_TRUE(contains_all(msg, {"INSERT INTO t VALUES (1)"}));
  EXPECT_TRUE(conn->query("SELECT k FROM t").empty());
  {
    BareTransaction tx(*conn, sd::TxMode::Write);
    conn->execute("INSERT INTO t VALUES (2)");
  }  // not committed
  EXPECT_TRUE(conn->query("SELECT k FROM t").empty());
  {
    BareTransaction tx(*conn, sd::TxMode::Write);
    conn->execute("INSERT INTO t VALUES (3)");
    tx.commit();
  }
  EXPECT_EQ(conn->query("SELECT k FROM t").size(), 1u);
  // A second connection sees the commit.
  auto other = connect();
  EXPECT_EQ(other->query("SELECT k FROM t")[0].integer(0), 3);
  // A read transaction sees one snapshot.
  {
    BareTransaction read(*other, sd::TxMode::Read);
    EXPECT_EQ(other->query("SELECT COUNT(*) FROM t")[0].integer(0), 1);
    conn->execute("INSERT INTO t VALUES (4)");
    EXPECT_EQ(other->query("SELECT COUNT(*) FROM t")[0].integer(0), 1);
    read.commit();
  }
  EXPECT_EQ(other->query("SELECT COUNT(*) FROM t")[0].integer(0), 2);
  // Transactions do not nest.
  BareTransaction outer(*conn, sd::TxMode::Write);
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { BareTransaction inner(*conn, sd::TxMode::Read); }), {"transaction"}));
}

TEST_P(StoreDb, WriteTransactionsSerialiseFromTheirStart) {
  // A second writer waits at BEGIN for the first one's commit (no lock upgrade can fail half
  // way), then reads what it committed.
  auto conn = connect();
  conn->execute(conn->dialect().render("CREATE TABLE t (k {int} PRIMARY KEY)"));
  auto other = connect();
  std::atomic<bool> committed{false}, second_began{false};
  int64_t seen = -1;
  BareTransaction tx(*conn, sd::TxMode::Write);
  conn->execute("INSERT INTO t VALUES (1)");
  std::thread second([&] {
    BareTransaction tx2(*other, sd::TxMode::Write);
    second_began = true;
    EXPECT_TRUE(committed.load());
    seen = other->query("SELECT COUNT(*) FROM t")[0].integer(0);
    other->execute("INSERT INTO t VALUES (2)");
    tx2.commit();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(second_began.load());
  committed = true;
  tx.commit();
  second.join();
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(conn->query("SELECT COUNT(*) FROM t")[0].integer(0), 2);
}

// A writer that holds the lock past the wait (10 s, SQLite's busy handler and PostgreSQL's
// lock_timeout) makes the waiting transaction fail with a StoreError saying so; nothing is lost:
// the holder commits, and the next transaction of the one that gave up works.
TEST_P(StoreDb, ALockHeldPastTheWaitIsAStoreErrorAndLosesNothing) {
  auto conn = connect();
  conn->execute(conn->dialect().render("CREATE TABLE t (k {int} PRIMARY KEY)"));
  auto other = connect();
  BareTransaction holder(*conn, sd::TxMode::Write);
  conn->execute("INSERT INTO t VALUES (1)");
  const auto start = std::chrono::steady_clock::now();
  const std::string e = error_message<store::StoreError>([&] {
    BareTransaction waiter(*other, sd::TxMode::Write);
    other->execute("INSERT INTO t VALUES (2)");
    waiter.commit();
  });
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(contains_all(e, {"stayed locked by another writer for 10 s"})) << e;
  EXPECT_GE(waited, 9.9) << "gave up before the wait was over";
  holder.commit();
  BareTransaction again(*other, sd::TxMode::Write);
  other->execute("INSERT INTO t VALUES (3)");
  again.commit();
  EXPECT_EQ(conn->query("SELECT k FROM t ORDER BY k").size(), 2u) << "the holder's row and the one after the failure";
}

// A failed statement is quoted in its error, cut to 400 bytes: one over 20,000 ids would
// otherwise be a message of 60 KB.
TEST_P(StoreDb, AnErrorQuotesALongStatementCut) {
  auto conn = connect();
  std::string sql = "SELECT no_such_column FROM loom_schema WHERE 1 IN (";
  for (int i = 0; i < 20000; ++i) sql += i ? ", 1" : "1";
  sql += ")";
  const std::string e = error_message<store::StoreError>([&] { conn->query(sql); });
  EXPECT_LT(e.size(), 1200u) << e.substr(0, 2000);
  EXPECT_TRUE(contains_all(e, {"no_such_column", "SELECT no_such_column FROM loom_schema", "(" + std::to_string(sql.size()) + " bytes)"}))
      << e;
}

TEST_P(StoreDb, SettingsAndDialect) {
  auto conn = connect();
  const std::string ddl = "CREATE TABLE x (id {id}, n {int}, r {real}, s {text}, b {blob}, {other})";
  if (pg()) {
    EXPECT_EQ(conn->dialect().name, "postgresql");
    EXPECT_EQ(conn->dialect().render(ddl), "CREATE TABLE x (id BIGSERIAL PRIMARY KEY, n BIGINT, r DOUBLE PRECISION, s TEXT, b BYTEA, {other})");
    EXPECT_EQ(conn->query("SHOW lock_timeout")[0].text(0), "10s");
    EXPECT_EQ(conn->query("SHOW client_encoding")[0].text(0), "UTF8");
    // The description names the database and its server, not a password.
    const std::string d = conn->describe();
    EXPECT_TRUE(contains_all(d, {"PostgreSQL database 'loom_test_", loom_test::pg_server_dir(), "'loom'"})) << d;
    // A read transaction refuses writes (they would not be serialised with the writers').
    conn->execute("CREATE TABLE y (k BIGINT)");
    BareTransaction tx(*conn, sd::TxMode::Read);
    EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { conn->execute("INSERT INTO y VALUES (1)"); }), {"read-only"}));
  } else {
    EXPECT_EQ(conn->dialect().name, "sqlite");
    EXPECT_EQ(conn->query("PRAGMA journal_mode")[0].text(0), "wal");
    EXPECT_EQ(conn->query("PRAGMA foreign_keys")[0].integer(0), 1);
    EXPECT_EQ(conn->query("PRAGMA synchronous")[0].integer(0), 2);  // FULL
    // A busy lock is waited for by a busy handler of the connection's own (short steps, 10 s in
    // all; WriteTransactionsSerialiseFromTheirStart shows the wait), so SQLite's own timeout is 0.
    EXPECT_EQ(conn->query("PRAGMA busy_timeout")[0].integer(0), 0);
    EXPECT_EQ(conn->dialect().render(ddl), "CREATE TABLE x (id INTEGER PRIMARY KEY, n INTEGER, r REAL, s TEXT, b BLOB, {other})");
  }
}

TEST_P(StoreOpen, CreatesTheSchemaOnceAndReopens) {
  const std::string url = this->url();
  {
    store::Store s = store::Store::open(url);
    EXPECT_EQ(s.schema_version(), store::Store::library_schema_version());
    EXPECT_EQ(s.path(), url);
    if (pg()) {
      EXPECT_EQ(s.blob_dir(), "");  // blobs in the database
    } else {
      EXPECT_EQ(s.blob_dir(), url + ".blobs");
      EXPECT_TRUE(fs::is_directory(s.blob_dir()));
    }
  }
  EXPECT_EQ(raw_sql(url, "SELECT version FROM loom_schema"), std::vector<std::string>{std::to_string(store::Store::library_schema_version())});
  store::Store again = store::Store::open(pg() ? url : "sqlite://" + url);  // the URL form, absolute path
  EXPECT_EQ(again.schema_version(), store::Store::library_schema_version());
  EXPECT_EQ(raw_sql(url, "SELECT COUNT(*) FROM loom_schema"), std::vector<std::string>{"1"});
  if (!pg()) {  // An empty file is a new database.
    write_bytes(tmp / "empty.db", "");
    EXPECT_NO_THROW(store::Store::open(tmp / "empty.db"));
  }
}

TEST(StoreUrl, UrlForms) {
  TempDir tmp;
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { store::Store::open("ftp://host/x"); }), {"ftp", "sqlite:///path"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { store::Store::open(":memory:"); }), {":memory:"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { store::Store::open("sqlite://"); }), {"names no database"}));
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { store::Store::open(tmp / "no/such/dir/s.db"); }), {"cannot open"}));
  // An unreachable PostgreSQL server: the error names the database and server, not the password.
  const std::string nowhere = tmp / "no-server";
  for (const std::string& url : {"postgresql://alice:s3cret@/db1?host=" + nowhere, "postgres://alice@/db1?host=" + nowhere + "&password=s3cret"}) {
    const std::string msg = error_message<store::StoreError>([&] { store::Store::open(url); });
    EXPECT_TRUE(contains_all(msg, {"cannot connect", "'db1'", nowhere, "alice"})) << msg;
    EXPECT_EQ(msg.find("s3cret"), std::string::npos) << msg;
  }
  EXPECT_EQ(sd::redact_password("postgresql://u:pw@h:5432/db?sslmode=require&password=x"), "postgresql://u:***@h:5432/db?sslmode=require&password=***");
  EXPECT_EQ(sd::redact_password("postgresql://u@/db?host=/tmp"), "postgresql://u@/db?host=/tmp");
}

// A password never reaches a message, whatever the URL holds: libpq quotes what it cannot parse
// (a bad percent-encoding, the whole URL for some errors), and a raw '@' or '/' in a password
// makes it read a part of it as a host, port or database name. Each URL's password holds a
// marker; neither it nor any other part of the password (the part after a '%', after a raw '@')
// may appear. Servers are absent (a socket folder that does not exist), so connecting fails.
TEST(StoreUrl, PasswordsNeverInMessages) {
  TempDir tmp;
  const std::string nowhere = tmp / "no-server";
  struct Case {
    std::string url;
    std::vector<std::string> secret;  // the password and its recognisable parts
    bool refused;                     // a ValueError before libpq sees it (else libpq's StoreError)
  };
  const std::string q = "/db1?host=" + nowhere;
  const std::vector<Case> cases = {
      {"postgresql://alice:50%off-Secret@" + q, {"50%off-Secret", "off-Secret", "Secret"}, true},
      {"postgresql://alice:ab%00cdSecret@" + q, {"ab%00cd", "cdSecret", "Secret"}, true},
      {"postgresql://alice:pw%zzSecret@" + q, {"pw%zz", "zzSecret", "Secret"}, true},
      {"postgresql://alice:pw%4Secret@" + q, {"pw%4", "Secret"}, true},
      {"postgresql://alice:p@ssSecret@" + q, {"p@ss", "ssSecret", "Secret"}, true},
      {"postgresql://alice:pa/ssSecret@localhost:1/db1", {"pa/ss", "ssSecret", "Secret"}, true},
      {"postgresql://alice:a/b?c@Secret/db1", {"a/b?c", "Secret"}, true},
      {"postgresql://alice@" + q + "&password=50%offSecret", {"50%off", "offSecret", "Secret"}, true},
      {"postgresql://alice@" + q + "&sslpassword=k%0Secret", {"k%0", "Secret"}, true},
      {"postgresql://alice:pa:ssSecret@" + q, {"pa:ss", "ssSecret", "Secret"}, false},
      {"postgresql://alice:pa?ssSecret@" + q, {"pa?ss", "ssSecret", "Secret"}, false},
      {"postgresql://alice:pa#ssSecret@" + q, {"pa#ss", "ssSecret", "Secret"}, false},
      {"postgresql://alice:%41Secret%42@" + q, {"%41Secret", "ASecretB", "Secret"}, false},
      {"postgresql://alice:" + std::string(3000, 'S') + "ecret@" + q, {"SSSSSSecret"}, false},
      {"postgresql://alice:connection@" + q, {"connection"}, false},  // words of libpq's own messages
      {"postgresql://alice:socket@" + q, {"socket"}, false},
      {"postgresql://alice:db1@" + q, {"db1"}, false},
      {"postgresql://alice:Secret42@[::1/db1", {"Secret42"}, false},  // libpq quotes the whole URL
      {"postgresql://alice@" + q + "&password=Secret7&sslmode=bogus", {"Secret7"}, false},
      {"postgresq://alice:Secret9@host/db1", {"Secret9"}, true},  // a mistyped scheme
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.url.substr(0, 120));
    const std::string msg = error_message<Error>([&] { store::Store::open(c.url); });
    EXPECT_FALSE(msg.empty());
    for (const std::string& part : c.secret) EXPECT_EQ(msg.find(part), std::string::npos) << "'" << part << "' in: " << msg;
    if (c.refused) {
      EXPECT_THROW(store::Store::open(c.url), ValueError);
      if (c.url.rfind("postgresql://", 0) == 0) EXPECT_TRUE(contains_all(msg, {"PostgreSQL URL", "percent-encoded", "not shown"})) << msg;
    } else {
      EXPECT_THROW(store::Store::open(c.url), store::StoreError);
    }
  }
  // what libpq reads as the password, libpq's way: up to the first '@' before any '/'
  EXPECT_EQ(sd::redact_password("postgresql://alice:pa?ss@/db?host=/x"), "postgresql://alice:***@/db?host=/x");
  EXPECT_EQ(sd::redact_password("postgresql://u@/db?host=/x&sslpassword=k&password=p"), "postgresql://u@/db?host=/x&sslpassword=***&password=***");
  EXPECT_EQ(sd::redact_password("postgresql://u:p@h/db?user=a@b"), "postgresql://u:***@h/db?user=a@b");
}

TEST_P(StoreOpen, NewerSchemaIsRefusedNamingBothVersions) {
  const std::string path = url();
  store::Store::open(path);
  raw_sql(path, "UPDATE loom_schema SET version = 99");
  const std::string msg = error_message<store::SchemaVersionError>([&] { store::Store::open(path); });
  EXPECT_TRUE(contains_all(msg, {"99", "newer than this library's " + std::to_string(store::Store::library_schema_version())}));
  EXPECT_EQ(raw_sql(path, "SELECT version FROM loom_schema"), std::vector<std::string>{"99"});  // untouched
}

TEST_P(StoreOpen, MigratesAnOlderSchema) {
  // A database stopped at version 0 (the schema table alone): opening applies the migrations.
  const std::string path = url();
  raw_sql(path, "CREATE TABLE loom_schema (application TEXT NOT NULL, version INTEGER NOT NULL);"
                "INSERT INTO loom_schema VALUES ('loom.store', 0)");
  store::Store s = store::Store::open(path);
  EXPECT_EQ(s.schema_version(), store::Store::library_schema_version());
  EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM models"), std::vector<std::string>{"0"});
  EXPECT_EQ(raw_sql(path, "SELECT COUNT(*) FROM blob_data"), std::vector<std::string>{"0"});
}

TEST_P(StoreOpen, NotAStoreIsATypedError) {
  if (!pg()) {
    write_bytes(tmp / "text.db", std::string(4096, 'x'));
    EXPECT_TRUE(contains_all(error_message<store::NotAStoreError>([&] { store::Store::open(tmp / "text.db"); }), {"text.db", "not a Loom store"}));
    EXPECT_EQ(file_bytes(tmp / "text.db"), std::string(4096, 'x'));  // not modified
    fs::create_directories(tmp / "dir.db");
    EXPECT_THROW(store::Store::open(tmp / "dir.db"), store::StoreError);
  }
  raw_sql(url("other"), "CREATE TABLE customers (id INTEGER)");
  EXPECT_TRUE(contains_all(error_message<store::NotAStoreError>([&] { store::Store::open(url("other")); }), {"customers", "loom_schema"}));
  EXPECT_EQ(raw_sql(url("other"), "SELECT COUNT(*) FROM customers"), std::vector<std::string>{"0"});  // untouched
  raw_sql(url("fake"), "CREATE TABLE loom_schema (application TEXT, version INTEGER); INSERT INTO loom_schema VALUES ('other', 1)");
  EXPECT_TRUE(contains_all(error_message<store::NotAStoreError>([&] { store::Store::open(url("fake")); }), {"loom.store"}));
}

// Another program's database is refused without a byte of it changed: the schema is read
// before anything is written (SQLite's journal_mode=WAL would rewrite the file's header and
// leave -wal/-shm files). On PostgreSQL: no table is created in it.
TEST_P(StoreOpen, AnotherProgramsDatabaseIsLeftAsItWas) {
  if (!pg()) {
    const std::string path = tmp / "foreign.db";
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA journal_mode = DELETE; CREATE TABLE customers (id INTEGER, name TEXT);"
                               "INSERT INTO customers VALUES (1, 'ada')", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    const std::string bytes = file_bytes(path);
    ASSERT_EQ(bytes.substr(0, 16), std::string("SQLite format 3\0", 16));
    ASSERT_EQ(bytes[18], 1) << "a rollback-journal database (file format 1)";
    struct stat before {};
    ASSERT_EQ(::stat(path.c_str(), &before), 0);
    EXPECT_TRUE(contains_all(error_message<store::NotAStoreError>([&] { store::Store::open(path); }), {"customers", "not a Loom store"}));
    EXPECT_TRUE(file_bytes(path) == bytes) << "the file changed (file format byte 18: " << int(file_bytes(path)[18]) << ")";
    struct stat after {};
    ASSERT_EQ(::stat(path.c_str(), &after), 0);
    EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
    EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
    for (const char* suffix : {"-wal", "-shm", "-journal", ".blobs"}) EXPECT_FALSE(fs::exists(path + suffix)) << suffix;

    // a file that is not SQLite at all (random bytes) is not changed either
    const std::string junk_path = tmp / "junk.db";
    std::string junk(8192, '\0');
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (char& c : junk) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      c = static_cast<char>(x);
    }
    write_bytes(junk_path, junk);
    EXPECT_THROW(store::Store::open(junk_path), store::NotAStoreError);
    EXPECT_TRUE(file_bytes(junk_path) == junk) << "the file changed";
    for (const char* suffix : {"-wal", "-shm", "-journal", ".blobs"}) EXPECT_FALSE(fs::exists(junk_path + suffix)) << suffix;
  }
  const std::string other = url("other");
  raw_sql(other, "CREATE TABLE customers (id INTEGER, name TEXT); INSERT INTO customers VALUES (1, 'ada')");
  const std::string tables = pg() ? "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
                                  : "SELECT name FROM sqlite_master ORDER BY 1";
  const auto before = raw_sql(other, tables);
  EXPECT_THROW(store::Store::open(other), store::NotAStoreError);
  EXPECT_EQ(raw_sql(other, tables), before);
  EXPECT_EQ(raw_sql(other, "SELECT name FROM customers"), std::vector<std::string>{"ada"});
}

TEST(StoreBlobs, HashesAreSha256) {
  // Known SHA-256 values (FIPS 180-2 examples).
  EXPECT_EQ(sd::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sd::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_P(StoreBlobs, CompressDeduplicateAndVerify) {
  store::Store s = store::Store::open(url());
  const sd::BlobStore& blobs = *sd::SessionAccess::impl(s).blobs;
  auto conn = pg() ? sd::open_postgresql(url()) : sd::open_sqlite(url());
  const std::string data(100000, 'a');
  const sd::PreparedBlob p = sd::prepare_blob(data);
  EXPECT_EQ(p.sha256, sd::sha256_hex(data));
  EXPECT_LT(p.compressed.size(), 1000u);  // compressed
  {
    BareTransaction tx(*conn, sd::TxMode::Write);
    blobs.add_ref(*conn, p);
    blobs.add_ref(*conn, p);  // deduplicated: stored once, two references
    tx.commit();
  }
  EXPECT_EQ(loom_test::stored_blob_count(s), 1u);
  EXPECT_EQ(loom_test::stored_blob(s, p.sha256), p.compressed);
  if (!pg())
    EXPECT_EQ(static_cast<const sd::FileBlobStore&>(blobs).path_of(p.sha256),
              s.blob_dir() + "/" + p.sha256.substr(0, 2) + "/" + p.sha256.substr(2));
  EXPECT_EQ(conn->query("SELECT refcount FROM blobs")[0].integer(0), 2);
  const sd::BlobRef ref = blobs.ref(*conn, p.sha256, "test");
  EXPECT_EQ(blobs.read(*conn, ref, "test"), data);
  // A row claiming a smaller size: never more than that is decompressed.
  sd::BlobRef small = ref;
  small.size = 10;
  EXPECT_TRUE(contains_all(error_message<store::BlobError>([&] { blobs.read(*conn, small, "test"); }), {"more than the 10 bytes"}));
  // Damaged bytes of the same length: a zstd error or a hash mismatch, both BlobError.
  std::string bytes = loom_test::stored_blob(s, p.sha256);
  bytes[bytes.size() / 2] ^= 0x55;
  loom_test::set_stored_blob(s, p.sha256, bytes);
  EXPECT_TRUE(contains_all(error_message<store::BlobError>([&] { blobs.read(*conn, ref, "what-it-was"); }), {"what-it-was", p.sha256}));
  // Releasing: the row goes with the last reference; SQLite's file after the commit,
  // PostgreSQL's bytes with the row.
  {
    BareTransaction tx(*conn, sd::TxMode::Write);
    EXPECT_FALSE(blobs.release(*conn, p.sha256));
    EXPECT_TRUE(blobs.release(*conn, p.sha256));
    tx.commit();
  }
  EXPECT_EQ(loom_test::blob_stored(s, p.sha256), !pg());
  blobs.remove_unreferenced(*conn, {p.sha256});
  EXPECT_FALSE(loom_test::blob_stored(s, p.sha256));
  EXPECT_EQ(raw_sql(url(), "SELECT COUNT(*) FROM blobs"), std::vector<std::string>{"0"});
}

TEST_P(StoreBlobs, GcRemovesOnlyUnreferencedFilesAndTemporaries) {
  store::Store s = store::Store::open(url());
  const store::ModelInfo kept = s.models().save("m", loom_test::small_mlp(1));
  if (pg()) {
    // Nothing can be left unreferenced: bytes live and die with their rows.
    EXPECT_EQ(s.gc().files_removed, 0);
    EXPECT_EQ(loom_test::stored_blob_count(s), 1u);
    EXPECT_NO_THROW(s.models().load("m", kept.version));
    return;
  }
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
