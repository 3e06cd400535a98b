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
#include <poll.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>

#include "core/utf8.h"
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

// ---- URLs and their passwords. libpq quotes what it cannot parse (a token with a bad
// percent-encoding, the whole URL for some errors), and a password that is not percent-encoded
// where it must be is split by libpq's parser into a host, a port or a database name that its
// messages then show. So a URL is checked here first (check_url, quoting nothing of it), and
// every message of a connection is scrubbed of the password in all the forms it may take
// (url_secrets, scrubbed; PostgresConnection::fail) before it leaves this file.

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int hex_value(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

// libpq's rules for a percent-encoded value: each '%' followed by two hex digits, never %00.
bool percent_encoding_ok(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') continue;
    if (i + 2 >= s.size() || !is_hex(s[i + 1]) || !is_hex(s[i + 2]) || (s[i + 1] == '0' && s[i + 2] == '0')) return false;
    i += 2;
  }
  return true;
}

// %XX decoded where it is valid, anything else kept.
std::string percent_decoded(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && is_hex(s[i + 1]) && is_hex(s[i + 2])) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The parts of "scheme://[user[:password]@]host[:port][/db][?k=v&...]" as libpq's URI parser
// finds them: the user name and password end at the first '@' that comes before any '/'.
struct UrlParts {
  size_t start = std::string::npos;         // after "://"; npos: not a URL
  size_t userinfo_end = std::string::npos;  // the '@' that ends "user:password", or npos
  size_t query = std::string::npos;         // the '?' that starts the parameters, or npos
};

UrlParts url_parts(const std::string& url) {
  UrlParts p;
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return p;
  p.start = scheme + 3;
  const size_t i = url.find_first_of("@/", p.start);
  if (i != std::string::npos && url[i] == '@') p.userinfo_end = i;
  p.query = url.find('?', p.userinfo_end == std::string::npos ? p.start : p.userinfo_end + 1);
  return p;
}

// The query parameters "k=v" of a URL, undecoded (a parameter without '=' has an empty value).
std::vector<std::pair<std::string, std::string>> url_parameters(const std::string& url, const UrlParts& p) {
  std::vector<std::pair<std::string, std::string>> out;
  if (p.query == std::string::npos) return out;
  size_t at = p.query + 1;
  while (at <= url.size()) {
    const size_t end = std::min(url.find('&', at), url.size());
    const std::string param = url.substr(at, end - at);
    const size_t eq = param.find('=');
    out.emplace_back(param.substr(0, eq), eq == std::string::npos ? "" : param.substr(eq + 1));
    at = end + 1;
  }
  return out;
}

bool is_password_key(const std::string& key) {
  const std::string k = percent_decoded(key);
  return k == "password" || k == "sslpassword";
}

// Refuses (ValueError) a URL that libpq would read in a way that puts a part of a password
// where its messages show it, or whose password libpq would quote in its error: a '@' after
// the user name and password (a password holding a raw '@' or '/'), a '@' in a query
// parameter's name, a bad percent-encoding in the user name, password or a password parameter.
void check_url(const std::string& url) {
  const UrlParts p = url_parts(url);
  if (p.start == std::string::npos) return;
  auto refuse = [](const std::string& why) {
    throw ValueError("Store::open: the PostgreSQL URL " + why +
                     " (valid: postgresql://user:password@host:port/database?name=value, with '%', '@', '/' and '?' in a "
                     "user name, password or database name percent-encoded as %25, %40, %2F and %3F; the URL is not shown "
                     "since it may hold a password)");
  };
  const size_t host = p.userinfo_end == std::string::npos ? p.start : p.userinfo_end + 1;
  const size_t head_end = p.query == std::string::npos ? url.size() : p.query;
  if (url.find('@', host) < head_end)
    refuse("has a '@' after its user name and password, where its host, port and database name are");
  if (p.userinfo_end != std::string::npos && !percent_encoding_ok(std::string_view(url).substr(p.start, p.userinfo_end - p.start)))
    refuse("has a user name or password with a '%' that is not followed by two hex digits, or with %00");
  for (const auto& [key, value] : url_parameters(url, p)) {
    if (key.find('@') != std::string::npos) refuse("has a '@' in the name of a query parameter");
    if (is_password_key(key) && !percent_encoding_ok(value))
      refuse("has a password parameter with a '%' that is not followed by two hex digits, or with %00");
  }
}

// The forms a URL's password may take in a message: as written and percent-decoded, from the
// user information and from password parameters; longest first, so that a shorter one never
// leaves a longer one's rest.
std::vector<std::string> url_secrets(const std::string& url) {
  std::vector<std::string> out;
  auto add = [&](const std::string& raw) {
    for (const std::string& s : {raw, percent_decoded(raw)})
      if (!s.empty() && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  };
  const UrlParts p = url_parts(url);
  if (p.start == std::string::npos) return out;
  if (p.userinfo_end != std::string::npos) {
    const size_t colon = url.find(':', p.start);
    if (colon < p.userinfo_end) add(url.substr(colon + 1, p.userinfo_end - colon - 1));
  }
  for (const auto& [key, value] : url_parameters(url, p))
    if (is_password_key(key)) add(value);
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return out;
}

// `msg` with every occurrence of each secret replaced by "***".
std::string scrubbed(std::string msg, const std::vector<std::string>& secrets) {
  std::string mask = "***";
  for (const std::string& s : secrets)
    if (mask.find(s) != std::string::npos) mask = "<password>";  // a password of asterisks
  for (const std::string& s : secrets)
    for (size_t at = msg.find(s); at != std::string::npos; at = msg.find(s, at + mask.size())) msg.replace(at, s.size(), mask);
  return msg;
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
    check_url(url);  // before libpq parses it
    secrets_ = url_secrets(url);
    url_ = url;
    conn_ = PQconnectdb(url.c_str());
    if (conn_ && PQpass(conn_) && *PQpass(conn_) &&
        std::find(secrets_.begin(), secrets_.end(), std::string(PQpass(conn_))) == secrets_.end()) {
      secrets_.push_back(PQpass(conn_));  // also one of ~/.pgpass or $PGPASSWORD
      std::sort(secrets_.begin(), secrets_.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    }
    describe_ = scrubbed(describe_conn(conn_, url), secrets_);
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
      const std::string msg = conn_ ? trimmed(PQerrorMessage(conn_)) : "out of memory";
      PQfinish(conn_);
      conn_ = nullptr;
      fail("store: cannot connect to " + describe_ + ": " + msg);
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
      fail("store: " + describe_ + ": cannot begin a transaction inside another");
    notified_.clear();
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
      fail("store: " + describe_ + ": the transaction was rolled back (a statement in it failed)");
    }
  }

  void rollback() noexcept override {
    if (conn_ && PQtransactionStatus(conn_) != PQTRANS_IDLE) PQclear(PQexec(conn_, "ROLLBACK"));
  }

  // NOTIFY is transactional: PostgreSQL delivers it when (and only if) the transaction commits,
  // once per channel and payload; so one statement per channel a transaction (a plan of 1,000
  // tasks notifies its channel 1,000 times).
  void notify(const std::string& channel) override {
    if (notified_.insert(channel).second) query("SELECT pg_notify(?, '')", {channel});
  }
  std::unique_ptr<Waiter> listen(const std::string& channel) override;

 private:
  std::set<std::string> notified_;  // channels notified in the open transaction
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
      fail("store: " + describe_ + " stayed locked by another writer for " + std::to_string(kLockTimeoutS) + " s (" + msg + ") in: " + quoted_statement(sql));
    fail("store: " + describe_ + ": " + msg + " in: " + quoted_statement(sql));
  }

  Result run(const std::string& sql, const std::vector<Value>& params) {
    int count = 0;
    const std::string numbered = number_parameters(sql, &count);
    if (static_cast<size_t>(count) != params.size())
      throw StoreError("store: " + std::to_string(params.size()) + " parameters given for " + std::to_string(count) + " in: " + quoted_statement(sql));
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
          throw StoreError("store: parameter " + std::to_string(i + 1) + " is text holding a NUL byte (PostgreSQL text cannot) in: " + quoted_statement(sql));
        texts[i] = *s;
      } else if (auto* b = std::get_if<Bytes>(&v)) {
        ptrs[i] = b->data.data();
        lengths[i] = static_cast<int>(b->data.size());
        formats[i] = 1;
        if (b->data.size() > 0x7fffffffu) throw StoreError("store: a blob parameter of " + std::to_string(b->data.size()) + " bytes is over 2 GiB in: " + quoted_statement(sql));
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
        if (!raw) fail("store: " + describe_ + ": cannot decode a bytea value (out of memory) in: " + quoted_statement(sql));
        return Bytes{std::string(reinterpret_cast<const char*>(raw.get()), n)};
      }
      default: return std::string(s, len);
    }
    fail("store: " + describe_ + ": result column " + std::to_string(c) + " holds " + loom::detail::quote_text(std::string_view(s, len)) +
         ", not a number of its type, in: " + quoted_statement(sql));
  }

  // Every error of this connection: its message without the password.
  [[noreturn]] void fail(const std::string& msg) const { throw StoreError(scrubbed(msg, secrets_)); }

  std::vector<std::string> secrets_;  // the password's forms (url_secrets), scrubbed from messages
  std::string url_;                   // for the connections of listeners
  std::string describe_;
  Dialect dialect_;
  PGconn* conn_ = nullptr;
  std::map<std::string, std::string> statements_;  // sql + parameter types -> prepared name
};

}  // namespace

// A LISTEN on a connection of its own, waited for on its socket: woken by the server's
// notification, with no query in between.
class PgWaiter final : public Waiter {
 public:
  PgWaiter(const std::string& url, const std::string& channel, std::vector<std::string> secrets)
      : channel_(channel), secrets_(std::move(secrets)), conn_(PQconnectdb(url.c_str())) {
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
      const std::string msg = conn_ ? trimmed(PQerrorMessage(conn_)) : "out of memory";
      PQfinish(conn_);
      throw StoreError(scrubbed("store: cannot connect a listener to " + redact_password(url) + ": " + msg, secrets_));
    }
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
    listen();
  }
  ~PgWaiter() override { PQfinish(conn_); }

  bool wait(int64_t timeout_ms) override {
    if (PQstatus(conn_) != CONNECTION_OK) {
      // The server went away: reconnect and report a wake, so that the caller re-reads what it
      // may have missed meanwhile.
      PQreset(conn_);
      if (PQstatus(conn_) == CONNECTION_OK) listen();
      return true;
    }
    if (drain()) return true;
    pollfd p{PQsocket(conn_), POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(timeout_ms, 0, 1 << 30)));
    if (n <= 0) return false;
    return drain() || PQstatus(conn_) != CONNECTION_OK;
  }

 private:
  void listen() {
    // the channel is a checked name ([a-z0-9_]): quoting it as an identifier is enough
    PGresult* r = PQexec(conn_, ("LISTEN \"" + channel_ + "\"").c_str());
    const bool ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok) throw StoreError(scrubbed("store: LISTEN " + channel_ + " failed: " + trimmed(PQerrorMessage(conn_)), secrets_));
  }
  bool drain() {
    if (!PQconsumeInput(conn_)) return false;
    bool any = false;
    while (PGnotify* n = PQnotifies(conn_)) {
      PQfreemem(n);
      any = true;
    }
    return any;
  }
  std::string channel_;
  std::vector<std::string> secrets_;
  PGconn* conn_;
};

std::unique_ptr<Waiter> PostgresConnection::listen(const std::string& channel) {
  return std::make_unique<PgWaiter>(url_, channel, secrets_);
}

std::unique_ptr<Connection> open_postgresql(const std::string& url) { return std::make_unique<PostgresConnection>(url); }

std::string redact_password(const std::string& url) {
  // scheme://user:password@host... -> scheme://user:***@host... (the user information as libpq
  // reads it; open_postgresql refuses a URL that could be read otherwise); the values of
  // password=... and sslpassword=... among the parameters too.
  const UrlParts p = url_parts(url);
  if (p.start == std::string::npos) return url;
  std::string out;
  size_t at = 0;  // url[at...] is still to copy
  if (p.userinfo_end != std::string::npos) {
    const size_t colon = url.find(':', p.start);
    if (colon < p.userinfo_end) {
      out = url.substr(0, colon + 1) + "***";
      at = p.userinfo_end;
    }
  }
  if (p.query == std::string::npos) return out + url.substr(at);
  out += url.substr(at, p.query + 1 - at);
  for (size_t i = p.query + 1;;) {
    const size_t end = std::min(url.find('&', i), url.size());
    const std::string param = url.substr(i, end - i);
    const size_t eq = param.find('=');
    out += eq != std::string::npos && is_password_key(param.substr(0, eq)) ? param.substr(0, eq + 1) + "***" : param;
    if (end == url.size()) break;
    out += '&';
    i = end + 1;
  }
  return out;
}

}  // namespace loom::store::detail
