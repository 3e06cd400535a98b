#pragma once
// The store's database layer: a connection with prepared statements and bound parameters,
// typed rows and transactions (begun, committed and rolled back by store::Session only,
// loom/store/session.h), behind which each backend (SQLite, PostgreSQL)
// hides its dialect (src/store/sqlite.cpp, src/store/postgresql.cpp). The store's SQL is written once:
//   - parameters are '?' (a PostgreSQL backend numbers them $1, $2, ... when preparing);
//   - DDL names column types through placeholders that Dialect::render fills: {id} (an
//     auto-incrementing 64-bit primary key), {int} (64-bit integer), {real} (double), {text},
//     {blob};
//   - upserts are "INSERT ... ON CONFLICT (cols) DO UPDATE SET c = excluded.c" and new ids come
//     from "RETURNING", which both SQLite (>= 3.35) and PostgreSQL accept as written.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/store/session.h"
#include "loom/store/sql.h"

namespace loom::store::detail {

using Bytes = SqlBytes;
using Value = SqlValue;
using Row = SqlRow;

struct LOOM_INTERNAL Dialect {
  std::string name;  // "sqlite", "postgresql"
  std::string id, integer, real, text, blob;
  // Replaces {id} {int} {real} {text} {blob} in a DDL template.
  std::string render(const std::string& ddl) const;
};

using TxMode = Access;

// ValueError unless `channel` is 1 to 63 characters of [a-z0-9_] (a notification channel).
LOOM_INTERNAL void check_channel(const std::string& channel);

// Waits for the notifications of one channel (store::Notifications), on a connection or a file
// watch of its own.
class Waiter {
 public:
  virtual ~Waiter() = default;
  // True when at least one notification arrived (every one pending is consumed), false after
  // `timeout_ms` without one.
  virtual bool wait(int64_t timeout_ms) = 0;
};  // Read, Write or RowWrite: loom/store/session.h says what each locks

class Connection {
 public:
  virtual ~Connection() = default;
  virtual const Dialect& dialect() const = 0;
  // "SQLite database '<path>'", for messages.
  virtual const std::string& describe() const = 0;
  // Runs one statement (prepared once and cached) with `params` bound in order; returns its
  // rows. Errors throw StoreError naming the database, the reason and the statement.
  virtual std::vector<Row> query(const std::string& sql, const std::vector<Value>& params = {}) = 0;
  // The same for a statement without rows; returns the number of rows it changed.
  virtual int64_t execute(const std::string& sql, const std::vector<Value>& params = {}) = 0;
  // The names of the user tables (not the backend's own catalogue).
  virtual std::vector<std::string> tables() = 0;

  // Settings that change the database itself (SQLite: journal_mode=WAL, which rewrites the
  // file's header), made once the database is known to be a store or a new one: until then a
  // connection only reads (Store::open checks with check_store first).
  virtual void prepare_for_writing() {}

  // Makes the commit of the open transaction wake the waiters of `channel` (a checked name;
  // store::Session::notify). Nothing is sent if the transaction rolls back.
  virtual void notify(const std::string& channel) = 0;
  // A waiter on `channel` (store::Notifications).
  virtual std::unique_ptr<Waiter> listen(const std::string& channel) = 0;

  virtual void begin(TxMode mode) = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;
};

// Opens an SQLite database file (created when absent) with a busy timeout, foreign keys on and
// synchronous=FULL, writing nothing to it; prepare_for_writing() then switches it to WAL mode
// (src/store/sqlite.cpp says why).
LOOM_INTERNAL std::unique_ptr<Connection> open_sqlite(const std::string& path);

// Connects to a PostgreSQL database by a libpq connection string or URL
// ("postgresql://user@host/db", "postgresql://user@/db?host=/socket/dir"). Notes on the
// dialect, values and transactions: src/store/postgresql.cpp. Unlike SQLite, a failed statement
// aborts the whole transaction it is in.
LOOM_INTERNAL std::unique_ptr<Connection> open_postgresql(const std::string& url);

// A statement as error messages quote it: its first 400 bytes (cut at a character), then how
// long it was; a statement over thousands of ids would otherwise fill a screen with "?, ".
LOOM_INTERNAL std::string quoted_statement(const std::string& sql);

// `url` with its password (user:password@ or password=...) replaced by "***", for messages.
LOOM_INTERNAL std::string redact_password(const std::string& url);

}  // namespace loom::store::detail
