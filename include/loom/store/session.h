#pragma once
// A session on a store: its one way to the database. A session takes the Store's lock (its
// operations share one connection), begins a transaction, runs statements with bound
// parameters and commits on commit(); destroyed without commit() (an exception midway), it
// rolls back, so nothing is half applied. Every operation of the store and of flow runs in one.
//
//   store::Session s(store, store::Access::Write);
//   s.execute("UPDATE my_table SET n = n + 1 WHERE id = ?", {id});
//   for (const store::SqlRow& r : s.query("SELECT id, n FROM my_table WHERE n > ?", {int64_t(3)})) ...
//   s.commit();
//
// The SQL is written once for both backends (docs/store.md, "Sessions and the SQL seam"):
// '?' parameters, "RETURNING" for new ids, "ON CONFLICT ... DO UPDATE" for upserts, and DDL
// column types as {id} {int} {real} {text} {blob} (render() fills them). A part above the
// store that keeps tables of its own registers them with Store::ensure_schema
// (loom/store/schema_part.h) and reaches them only through a session.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/store/sql.h"

namespace loom::store {

class Store;
namespace detail {
struct StoreImpl;
class Connection;
struct SessionAccess;
}  // namespace detail

enum class Access {
  Read,      // one consistent snapshot, for reading only (PostgreSQL refuses writes in it)
  Write,     // takes the database's write lock when it begins (SQLite: BEGIN IMMEDIATE;
             // PostgreSQL: an advisory lock every writer takes), so a read-then-write session
             // never fails half way on a lock upgrade
  RowWrite,  // writes that lock only the rows they touch (PostgreSQL: READ COMMITTED, no
             // advisory lock, e.g. flow's claims with "FOR UPDATE SKIP LOCKED" side by side);
             // SQLite has no row locks and takes its write lock as for Write
};

class LOOM_API Session {
 public:
  // Takes the store's lock and begins a transaction of `access`. Throws StoreError when the
  // database cannot begin one (a write lock held past the timeout, a lost connection).
  Session(const Store& store, Access access);
  ~Session();  // rolls back unless committed
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs one statement (prepared once per connection) with `params` bound to its '?' in order
  // and returns its rows. Errors throw StoreError naming the database, the reason and the
  // statement; on PostgreSQL a failed statement aborts the transaction, so the session is then
  // only good for being destroyed (it rolls back).
  std::vector<SqlRow> query(const std::string& sql, const std::vector<SqlValue>& params = {});
  // The same for a statement without rows; returns the number of rows it changed.
  int64_t execute(const std::string& sql, const std::vector<SqlValue>& params = {});

  // "sqlite" or "postgresql": for the few clauses only one backend has (FOR UPDATE SKIP LOCKED).
  const std::string& backend() const;
  // `ddl` with {id} (an auto-incrementing 64-bit primary key), {int}, {real}, {text} and {blob}
  // replaced by the backend's column types.
  std::string render(const std::string& ddl) const;

  // Makes this session's commit wake the store::Notifications(s) of `channel` (1 to 63 characters of
  // [a-z0-9_]; ValueError otherwise), in every process on the store: PostgreSQL NOTIFY, sent on
  // commit; SQLite: a file beside the database that waiters on this machine watch
  // (loom/store/notifications.h). Nothing is sent if the session rolls back.
  void notify(const std::string& channel);

  // Commits and releases the lock. A second commit, or a statement after it, is a StoreError.
  void commit();

 private:
  friend struct detail::SessionAccess;
  Session(detail::StoreImpl& impl, Access access);
  detail::Connection& connection();

  std::unique_lock<std::mutex> lock_;
  detail::StoreImpl& impl_;
  bool open_ = false;  // a transaction is open: commit() or the destructor ends it
};

}  // namespace loom::store
