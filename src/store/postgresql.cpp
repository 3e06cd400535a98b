// The PostgreSQL backend of the store's database layer, on libpq.
//
// Choices, each for a reason:
//   statements         '?' is renumbered $1, $2, ... (outside quotes) and each statement is
//                      prepared once per parameter-type signature (int8, float8, text, bytea or
//                      unspecified for NULL), so the server never has to guess a type.
//   values             parameters in text format except blobs (binary bytea); doubles in their
//                      shortest exact decimal form, results parsed from the text format by the
//                      column's type (integers, floating point, booleans, bytea, text).
//   TxMode::Read       BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY: one snapshot for the
//                      whole transaction, like SQLite's read transaction in WAL mode.
//   TxMode::Write      BEGIN, then pg_advisory_xact_lock(kWriteLock): writers of one database
//                      queue on one lock taken first, as SQLite's BEGIN IMMEDIATE does, so a
//                      read-then-write transaction never fails half way on a serialisation
//                      conflict (no retry loop needed) and, READ COMMITTED, each statement sees
//                      every commit made before the lock was granted. The lock is released by
//                      COMMIT or ROLLBACK, also when the client dies (the server ends its session).
//   TxMode::RowWrite   BEGIN, READ COMMITTED, no advisory lock: the task queue's statements
//                      lock the rows they touch (FOR UPDATE SKIP LOCKED, conditional UPDATEs),
//                      so agents claim side by side; they touch no blob or reference count.
//   lock_timeout       10 s, as SQLite's busy timeout: a writer waits for another, then fails.
//   notices            dropped (libpq would print them on stderr).
#include <libpq-fe.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>

#include "loom/store/error.h"
#include "store/db.h"

namespace loom::store::detail {

namespace {

constexpr int kLockTimeoutS = 10;
constexpr int64_t kWriteLock = 0x6c6f6f6d73746f72;  // "loomstor": the writers' advisory lock
constexpr size_t kMaxCachedStatements = 512;        // beyond, statements run unnamed

// PostgreSQL type OIDs (src/include/catalog/pg_type.dat; stable across versions).
constexpr Oid kBool = 16, kBytea = 17, kInt8 = 20, kInt2 = 21, kInt4 = 23, kText = 25, kOid = 26, kFloat4 = 700, kFloat8 = 701,
              kNumeric = 1700;

// "$1, $2, ..." for '?' outside string literals and quoted identifiers; counts the parameters.
std::string number_parameters(const std::string& sql, int* count) {
  std::string out;
  out.reserve(sql.size() + 8);
  char quote = 0;
  *count = 0;
  for (char c : sql) {
    if (quote) {
      if (c == quote) quote = 0;  // a doubled quote closes and reopens: the same result
      out += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '?') {
      out += "$" + std::to_string(++*count);
    } else {
      out += c;
    }
  }
  return out;
}

Oid type_of(const Value& v) {
  switch (v.index()) {
    case 1: return kInt8;
    case 2: return kFloat8;
    case 3: return kText;
    case 4: return kBytea;
    default: return 0;  // NULL: the server infers the type from the context
  }
}

std::string double_text(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, d);  // shortest form that reads back exactly
  return std::string(buf, r.ptr);
}

// Where the database is, for messages: never the password.
std::string describe_conn(const PGconn* c, const std::string& url) {
  const char* db = c ? PQdb(c) : nullptr;
  const char* host = c ? PQhost(c) : nullptr;
  const char* port = c ? PQport(c) : nullptr;
  const char* user = c ? PQuser(c) : nullptr;
  if (!db || !*db) return "PostgreSQL database '" + redact_password(url) + "'";  // the URL did not parse
  std::string out = "PostgreSQL database '" + std::string(db) + "'";
  if (host && *host) out += std::string(" on ") + (host[0] == '/' ? "socket " : "") + host + (port && *port ? ":" + std::string(port) : "");
  if (user && *user) out += std::string(" as '") + user + "'";
  return out;
}

std::string trimmed(const char* msg) {
  std::string s = msg ? msg : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.empty() ? "unknown error" : s;
}

using Result = std::unique_ptr<PGresult, void (*)(PGresult*)>;

class PostgresConnection final : public Connection {
 public:
  explicit PostgresConnection(const std::string& url) {
    dialect_ = {"postgresql", "BIGSERIAL PRIMARY KEY", "BIGINT", "DOUBLE PRECISION", "TEXT", "BYTEA"};
    conn_ = PQconnectdb(url.c_str());
    describe_ = describe_conn(conn_, url);
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
      const std::string msg = conn_ ? trimmed(PQerrorMessage(conn_)) : "out of memory";
      PQfinish(conn_);
      conn_ = nullptr;
      throw StoreError("store: cannot connect to " + describe_ + ": " + msg);
    }
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
    try {
      run_simple("SET lock_timeout = '" + std::to_string(kLockTimeoutS) + "s'");
      run_simple("SET client_encoding = 'UTF8'");
    } catch (...) {
      PQfinish(conn_);
      conn_ = nullptr;
      throw;
    }
  }

  ~PostgresConnection() override { PQfinish(conn_); }

  const Dialect& dialect() const override { return dialect_; }
  const std::string& describe() const override { return describe_; }

  std::vector<Row> query(const std::string& sql, const std::vector<Value>& params = {}) override {
    Result res = run(sql, params);
    std::vector<Row> rows;
    const int n = PQntuples(res.get()), cols = PQnfields(res.get());
    rows.reserve(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      std::vector<Value> values;
      values.reserve(static_cast<size_t>(cols));
      for (int c = 0; c < cols; ++c) values.push_back(value(res.get(), r, c, sql));
      rows.emplace_back(std::move(values));
    }
    return rows;
  }

  int64_t execute(const std::string& sql, const std::vector<Value>& params = {}) override {
    Result res = run(sql, params);
    const char* n = PQcmdTuples(res.get());
    return n && *n ? std::strtoll(n, nullptr, 10) : 0;
  }

  std::vector<std::string> tables() override {
    std::vector<std::string> out;
    for (const Row& r : query("SELECT tablename::text FROM pg_catalog.pg_tables WHERE schemaname = current_schema() ORDER BY tablename"))
      out.push_back(r.text(0));
    return out;
  }

  void begin(TxMode mode) override {
    // PostgreSQL only warns about a nested BEGIN; SQLite refuses it, and so do we.
    if (PQtransactionStatus(conn_) != PQTRANS_IDLE)
      throw StoreError("store: " + describe_ + ": cannot begin a transaction inside another");
    if (mode == TxMode::Read) {
      run_simple("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY");
      return;
    }
    run_simple("BEGIN");
    if (mode == TxMode::RowWrite) return;
    try {
      query("SELECT pg_advisory_xact_lock(?)", {kWriteLock});
    } catch (...) {
      rollback();
      throw;
    }
  }

  void commit() override {
    // COMMIT of a transaction in which a statement failed answers ROLLBACK without an error.
    const bool failed = PQtransactionStatus(conn_) == PQTRANS_INERROR;
    std::string status;
    try {
      if (!failed) status = run_simple("COMMIT");
    } catch (...) {
      rollback();
      throw;
    }
    if (failed || status != "COMMIT") {
      rollback();
      throw StoreError("store: " + describe_ + ": the transaction was rolled back (a statement in it failed)");
    }
  }

  void rollback() noexcept override {
    if (conn_ && PQtransactionStatus(conn_) != PQTRANS_IDLE) PQclear(PQexec(conn_, "ROLLBACK"));
  }

 private:
  // A statement without parameters through the simple protocol; returns its command status.
  std::string run_simple(const std::string& sql) {
    Result res(PQexec(conn_, sql.c_str()), PQclear);
    check(res.get(), sql);
    return PQcmdStatus(res.get());
  }

  void check(const PGresult* res, const std::string& sql) const {
    const ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return;
    const std::string msg = trimmed(res ? PQresultErrorMessage(res) : PQerrorMessage(conn_));
    const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
    if (state && std::string(state) == "55P03")  // lock_not_available: lock_timeout expired
      throw StoreError("store: " + describe_ + " stayed locked by another writer for " + std::to_string(kLockTimeoutS) + " s (" +
                       msg + ") in: " + sql);
    throw StoreError("store: " + describe_ + ": " + msg + " in: " + sql);
  }

  Result run(const std::string& sql, const std::vector<Value>& params) {
    int count = 0;
    const std::string numbered = number_parameters(sql, &count);
    if (static_cast<size_t>(count) != params.size())
      throw StoreError("store: " + std::to_string(params.size()) + " parameters given for " + std::to_string(count) + " in: " + sql);
    std::vector<Oid> types;
    std::vector<std::string> texts(params.size());
    std::vector<const char*> ptrs(params.size(), nullptr);
    std::vector<int> lengths(params.size(), 0), formats(params.size(), 0);
    std::string key = sql + '\0';
    for (size_t i = 0; i < params.size(); ++i) {
      const Value& v = params[i];
      types.push_back(type_of(v));
      key += std::to_string(types.back()) + ',';
      if (auto* n = std::get_if<int64_t>(&v)) texts[i] = std::to_string(*n);
      else if (auto* d = std::get_if<double>(&v)) texts[i] = double_text(*d);
      else if (auto* s = std::get_if<std::string>(&v)) {
        if (s->find('\0') != std::string::npos)
          throw StoreError("store: parameter " + std::to_string(i + 1) + " is text holding a NUL byte (PostgreSQL text cannot) in: " + sql);
        texts[i] = *s;
      } else if (auto* b = std::get_if<Bytes>(&v)) {
        ptrs[i] = b->data.data();
        lengths[i] = static_cast<int>(b->data.size());
        formats[i] = 1;
        if (b->data.size() > 0x7fffffffu) throw StoreError("store: a blob parameter of " + std::to_string(b->data.size()) + " bytes is over 2 GiB in: " + sql);
        continue;
      } else {
        continue;  // NULL
      }
      ptrs[i] = texts[i].c_str();
      lengths[i] = static_cast<int>(texts[i].size());
    }
    const int n = static_cast<int>(params.size());
    std::string name;
    if (auto it = statements_.find(key); it != statements_.end()) {
      name = it->second;
    } else if (statements_.size() < kMaxCachedStatements) {
      name = "loom_" + std::to_string(statements_.size());
      Result prep(PQprepare(conn_, name.c_str(), numbered.c_str(), n, types.data()), PQclear);
      check(prep.get(), sql);
      statements_.emplace(key, name);
    }
    Result res(name.empty() ? PQexecParams(conn_, numbered.c_str(), n, types.data(), ptrs.data(), lengths.data(), formats.data(), 0)
                            : PQexecPrepared(conn_, name.c_str(), n, ptrs.data(), lengths.data(), formats.data(), 0),
               PQclear);
    check(res.get(), sql);
    return res;
  }

  Value value(const PGresult* res, int r, int c, const std::string& sql) const {
    if (PQgetisnull(res, r, c)) return std::monostate{};
    const char* s = PQgetvalue(res, r, c);
    const size_t len = static_cast<size_t>(PQgetlength(res, r, c));
    switch (PQftype(res, c)) {
      case kInt2:
      case kInt4:
      case kInt8:
      case kOid: {
        int64_t v = 0;
        const auto rc = std::from_chars(s, s + len, v);
        if (rc.ec != std::errc() || rc.ptr != s + len) break;
        return v;
      }
      case kFloat4:
      case kFloat8:
      case kNumeric: {
        char* end = nullptr;
        const double v = std::strtod(s, &end);  // also reads NaN, Infinity, -Infinity
        if (end != s + len) break;
        return v;
      }
      case kBool: return int64_t{s[0] == 't'};
      case kBytea: {
        size_t n = 0;
        std::unique_ptr<unsigned char, void (*)(void*)> raw(PQunescapeBytea(reinterpret_cast<const unsigned char*>(s), &n), PQfreemem);
        if (!raw) throw StoreError("store: " + describe_ + ": cannot decode a bytea value (out of memory) in: " + sql);
        return Bytes{std::string(reinterpret_cast<const char*>(raw.get()), n)};
      }
      default: return std::string(s, len);
    }
    throw StoreError("store: " + describe_ + ": result column " + std::to_string(c) + " holds '" + std::string(s, len) +
                     "', not a number of its type, in: " + sql);
  }

  std::string describe_;
  Dialect dialect_;
  PGconn* conn_ = nullptr;
  std::map<std::string, std::string> statements_;  // sql + parameter types -> prepared name
};

}  // namespace

std::unique_ptr<Connection> open_postgresql(const std::string& url) { return std::make_unique<PostgresConnection>(url); }

std::string redact_password(const std::string& url) {
  // scheme://user:password@host... -> scheme://user:***@host...; password=... in the query too.
  std::string out = url;
  const size_t scheme = out.find("://");
  if (scheme != std::string::npos) {
    const size_t start = scheme + 3;
    const size_t end = out.find_first_of("/?", start);
    const size_t at = out.rfind('@', end == std::string::npos ? out.size() : end);
    if (at != std::string::npos && at > start) {
      const size_t colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  for (size_t p = out.find("password="); p != std::string::npos; p = out.find("password=", p + 1)) {
    const size_t v = p + 9;
    const size_t e = out.find_first_of("& ", v);
    out.replace(v, (e == std::string::npos ? out.size() : e) - v, "***");
  }
  return out;
}

}  // namespace loom::store::detail
