// The SQLite backend of the store's database layer.
//
// Settings, each for a reason:
//   journal_mode=WAL    readers do not block the writer nor it them; a killed writer's
//                       uncommitted frames are ignored on the next open. Set by
//                       prepare_for_writing, once Store::open has found the file to be a store
//                       or new: the setting is written into the file's header.
//   synchronous=FULL    a commit is on disk when COMMIT returns (WAL's NORMAL may lose the last
//                       commits on power loss; a save that reported success must survive, and
//                       the blob fsyncs dominate a save's cost anyway).
//   busy handler        another writer holding the lock is waited for (10 s), not an error, in
//                       steps of 50 us doubling to 1.6 ms: SQLite's own busy_timeout sleeps 1,
//                       2, 5, 10, ... ms, far longer than a task queue's transactions, so that
//                       a waiting agent would oversleep the lock's release.
//   foreign_keys=ON     rows cannot point at missing records (SQLite's default is off).
#include <fcntl.h>
#include <poll.h>
#include <sqlite3.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "loom/store/error.h"
#include "store/db.h"

namespace loom::store::detail {

namespace {

constexpr int kBusyTimeoutMs = 10000;

// Notifications between the processes of one machine: a channel is a file beside the database
// ("<db>.<channel>.notify"), which a committing writer opens for writing and closes, and which
// waiters watch with inotify (IN_CLOSE_WRITE): a wake takes as long as the kernel's delivery of
// the event, not a polling period. A file rather than a lock or a socket because it needs no
// process to own it and survives every writer's death.
std::string channel_file(const std::string& db, const std::string& channel) { return db + "." + channel + ".notify"; }

void touch(const std::string& file) noexcept {
  // Best effort: a waiter that misses a wake finds the news at its next re-read.
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) ::close(fd);
}

class FileWaiter final : public Waiter {
 public:
  explicit FileWaiter(const std::string& file) {
    touch(file);  // the watch needs the file
    fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd_ < 0 || ::inotify_add_watch(fd_, file.c_str(), IN_CLOSE_WRITE | IN_ATTRIB) < 0) {
      const std::string reason = std::strerror(errno);
      if (fd_ >= 0) ::close(fd_);
      throw StoreError("store: cannot watch '" + file + "' for notifications: " + reason);
    }
  }
  ~FileWaiter() override { ::close(fd_); }

  bool wait(int64_t timeout_ms) override {
    if (drain()) return true;
    pollfd p{fd_, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(timeout_ms, 0, 1 << 30)));
    return n > 0 && drain();
  }

 private:
  bool drain() {
    alignas(inotify_event) char buf[4096];
    bool any = false;
    while (::read(fd_, buf, sizeof buf) > 0) any = true;
    return any;
  }
  int fd_ = -1;
};

class SqliteConnection final : public Connection {
 public:
  explicit SqliteConnection(const std::string& path) : path_(path), describe_("SQLite database '" + path + "'") {
    dialect_ = {"sqlite", "INTEGER PRIMARY KEY", "INTEGER", "REAL", "TEXT", "BLOB"};
    // No SQLITE_OPEN_URI: the path is a file name, never "file:" URI syntax.
    const int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      const std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      sqlite3_close(db_);
      db_ = nullptr;
      throw StoreError("store: cannot open " + describe_ + ": " + msg);
    }
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_handler(db_, &SqliteConnection::busy_wait, this);
    try {
      // Settings of this connection only: nothing is written to the file (another program's
      // database must be left as it is when it turns out not to be a store).
      query("PRAGMA foreign_keys = ON");
      query("PRAGMA synchronous = FULL");
    } catch (...) {
      close();
      throw;
    }
  }

  void prepare_for_writing() override {
    // Rewrites the file's header (its journal mode) unless it is in WAL mode already. A file
    // that is not SQLite has failed before: Store::open reads the schema first.
    const std::vector<Row> mode = query("PRAGMA journal_mode = WAL");
    if (mode.empty() || mode[0].text(0) != "wal")
      throw StoreError("store: " + describe_ + " cannot use write-ahead logging (journal_mode is '" +
                       (mode.empty() ? std::string("?") : mode[0].text(0)) + "')");
  }

  ~SqliteConnection() override { close(); }

  const Dialect& dialect() const override { return dialect_; }
  const std::string& describe() const override { return describe_; }

  std::vector<Row> query(const std::string& sql, const std::vector<Value>& params = {}) override {
    sqlite3_stmt* st = prepare(sql);
    Reset reset{st};
    bind(st, sql, params);
    std::vector<Row> rows;
    for (;;) {
      const int rc = sqlite3_step(st);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) fail(rc, sql);
      const int n = sqlite3_column_count(st);
      std::vector<Value> values;
      values.reserve(static_cast<size_t>(n));
      for (int c = 0; c < n; ++c) {
        switch (sqlite3_column_type(st, c)) {
          case SQLITE_INTEGER: values.emplace_back(static_cast<int64_t>(sqlite3_column_int64(st, c))); break;
          case SQLITE_FLOAT: values.emplace_back(sqlite3_column_double(st, c)); break;
          case SQLITE_TEXT: {
            const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st, c));
            values.emplace_back(std::string(p ? p : "", static_cast<size_t>(sqlite3_column_bytes(st, c))));
            break;
          }
          case SQLITE_BLOB: {
            const auto* p = static_cast<const char*>(sqlite3_column_blob(st, c));
            values.emplace_back(Bytes{std::string(p ? p : "", static_cast<size_t>(sqlite3_column_bytes(st, c)))});
            break;
          }
          default: values.emplace_back(std::monostate{});
        }
      }
      rows.emplace_back(std::move(values));
    }
    return rows;
  }

  int64_t execute(const std::string& sql, const std::vector<Value>& params = {}) override {
    query(sql, params);
    return sqlite3_changes64(db_);
  }

  std::vector<std::string> tables() override {
    std::vector<std::string> out;
    for (const Row& r : query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"))
      out.push_back(r.text(0));
    return out;
  }

  void begin(TxMode mode) override { execute(mode == TxMode::Read ? "BEGIN DEFERRED" : "BEGIN IMMEDIATE"); }
  void commit() override {
    try {
      execute("COMMIT");
    } catch (...) {
      rollback();
      throw;
    }
    // Once committed: a waiter woken before the commit would read nothing new.
    for (const std::string& channel : notify_) touch(channel_file(path_, channel));
    notify_.clear();
  }
  void rollback() noexcept override {
    notify_.clear();
    if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }

  void notify(const std::string& channel) override { notify_.insert(channel); }
  std::unique_ptr<Waiter> listen(const std::string& channel) override { return std::make_unique<FileWaiter>(channel_file(path_, channel)); }

 private:
  std::set<std::string> notify_;  // channels to notify when the open transaction commits

  void close() noexcept {
    for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
    cache_.clear();
    sqlite3_close(db_);
    db_ = nullptr;
  }

  // SQLite's busy handler: true (retry) until the lock was waited for kBusyTimeoutMs.
  static int busy_wait(void* self, int count) {
    auto* c = static_cast<SqliteConnection*>(self);
    const auto now = std::chrono::steady_clock::now();
    if (count == 0) c->busy_since_ = now;
    if (now - c->busy_since_ >= std::chrono::milliseconds(kBusyTimeoutMs)) return 0;
    std::this_thread::sleep_for(std::chrono::microseconds(50 << std::min(count, 5)));
    return 1;
  }

  struct Reset {
    sqlite3_stmt* st;
    ~Reset() {
      sqlite3_reset(st);
      sqlite3_clear_bindings(st);
    }
  };

  [[noreturn]] void fail(int rc, const std::string& sql) const {
    const std::string msg = sqlite3_errmsg(db_);
    const int primary = rc & 0xff;
    if (primary == SQLITE_NOTADB)
      throw NotAStoreError("store: '" + path_ + "' is not a Loom store: " + msg + " (valid: a Loom store, or a new or empty file)");
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED)
      throw StoreError("store: " + describe_ + " stayed locked by another writer for " + std::to_string(kBusyTimeoutMs / 1000) +
                       " s (" + msg + ") in: " + quoted_statement(sql));
    throw StoreError("store: " + describe_ + ": " + msg + " in: " + quoted_statement(sql));
  }

  sqlite3_stmt* prepare(const std::string& sql) {
    if (auto it = cache_.find(sql); it != cache_.end()) return it->second;
    sqlite3_stmt* st = nullptr;
    const int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &st, nullptr);
    if (rc != SQLITE_OK) fail(rc, sql);
    if (!st) throw StoreError("store: empty statement: '" + sql + "'");
    cache_.emplace(sql, st);
    return st;
  }

  void bind(sqlite3_stmt* st, const std::string& sql, const std::vector<Value>& params) {
    if (static_cast<int>(params.size()) != sqlite3_bind_parameter_count(st))
      throw StoreError("store: " + std::to_string(params.size()) + " parameters given for " +
                       std::to_string(sqlite3_bind_parameter_count(st)) + " in: " + quoted_statement(sql));
    for (size_t i = 0; i < params.size(); ++i) {
      const int at = static_cast<int>(i) + 1;
      const Value& v = params[i];
      int rc = SQLITE_OK;
      if (std::holds_alternative<std::monostate>(v)) rc = sqlite3_bind_null(st, at);
      else if (auto* n = std::get_if<int64_t>(&v)) rc = sqlite3_bind_int64(st, at, *n);
      else if (auto* d = std::get_if<double>(&v)) rc = sqlite3_bind_double(st, at, *d);
      else if (auto* s = std::get_if<std::string>(&v)) rc = sqlite3_bind_text64(st, at, s->data(), s->size(), SQLITE_TRANSIENT, SQLITE_UTF8);
      else {
        const std::string& b = std::get<Bytes>(v).data;
        rc = sqlite3_bind_blob64(st, at, b.data(), b.size(), SQLITE_TRANSIENT);
      }
      if (rc != SQLITE_OK) fail(rc, sql);
    }
  }

  std::string path_, describe_;
  Dialect dialect_;
  sqlite3* db_ = nullptr;
  std::map<std::string, sqlite3_stmt*> cache_;
  std::chrono::steady_clock::time_point busy_since_;  // when the lock wait in progress began
};

}  // namespace

std::unique_ptr<Connection> open_sqlite(const std::string& path) { return std::make_unique<SqliteConnection>(path); }

}  // namespace loom::store::detail
