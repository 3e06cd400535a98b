#include "unit/store/pg_server.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>

#include <unistd.h>

namespace loom_test {

namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// Runs the server script; returns its exit status and leaves its output in `out`.
int run_script(const std::string& cmd, const std::string& file, std::string* out) {
  const std::string line = "bash '" LOOM_PG_SERVER_SCRIPT "' " + cmd + " '" + file + "' 2>&1";
  FILE* p = ::popen(line.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  return ::pclose(p);
}

struct OwnServer {
  std::mutex mutex;
  std::string file;  // set when this process started a server
  std::string dir, error;
  bool tried = false;
};

OwnServer& own() {
  static OwnServer s;
  return s;
}

// Stops the server this process started, when the tests end.
class StopOwnServer : public ::testing::Environment {
 public:
  void TearDown() override {
    OwnServer& s = own();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.file.empty()) return;
    std::string out;
    if (run_script("stop", s.file, &out) != 0) std::fprintf(stderr, "pg_server: stopping the test server failed: %s\n", out.c_str());
    s.file.clear();
  }
};
[[maybe_unused]] ::testing::Environment* const stop_own_server = ::testing::AddGlobalTestEnvironment(new StopOwnServer);

std::string admin_url() { return "postgresql://loom@/postgres?host=" + pg_server_dir(); }

}  // namespace

const std::string& pg_server_dir() {
  OwnServer& s = own();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.dir.empty()) return s.dir;
  if (const char* shared = std::getenv("LOOM_TEST_PG_SERVER_FILE")) {
    s.dir = read_first_line(shared);
    if (s.dir.empty())
      throw std::runtime_error(std::string("the test PostgreSQL server is not running: '") + shared +
                               "' names none (did the ctest fixture pg_server_start fail? see its output)");
    return s.dir;
  }
  if (s.tried) throw std::runtime_error(s.error);
  s.tried = true;
  const std::string file = ::testing::TempDir() + "loom_pg_server_" + std::to_string(::getpid());
  std::string out;
  const int rc = run_script("start", file, &out);
  s.dir = rc == 0 ? read_first_line(file) : "";
  if (s.dir.empty()) {
    s.error = "the test PostgreSQL server did not start (tests/unit/store/pg_server.sh, status " + std::to_string(rc) + "): " + out;
    throw std::runtime_error(s.error);
  }
  s.file = file;
  return s.dir;
}

std::string pg_create_database() {
  static std::atomic<int> counter{0};
  const std::string name = "loom_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  const std::string admin = admin_url();
  pg_sql(admin, "DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");  // a reused pid's leftover
  pg_sql(admin, "CREATE DATABASE " + name);
  return "postgresql://loom@/" + name + "?host=" + pg_server_dir();
}

void pg_drop_database(const std::string& url) {
  const size_t start = url.find("@/") + 2, end = url.find('?');
  pg_sql(admin_url(), "DROP DATABASE IF EXISTS " + url.substr(start, end - start) + " WITH (FORCE)");
}

std::vector<std::string> pg_sql(const std::string& url, const std::string& sql) {
  std::vector<std::string> out;
  std::unique_ptr<PGconn, void (*)(PGconn*)> conn(PQconnectdb(url.c_str()), PQfinish);
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    ADD_FAILURE() << "cannot connect to " << url << ": " << PQerrorMessage(conn.get());
    return out;
  }
  PQsetNoticeProcessor(conn.get(), [](void*, const char*) {}, nullptr);
  std::unique_ptr<PGresult, void (*)(PGresult*)> res(PQexec(conn.get(), sql.c_str()), PQclear);
  const ExecStatusType st = PQresultStatus(res.get());
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    ADD_FAILURE() << "SQL failed: " << PQresultErrorMessage(res.get()) << " in: " << sql;
    return out;
  }
  for (int r = 0; r < PQntuples(res.get()); ++r)
    out.push_back(PQgetisnull(res.get(), r, 0) ? "NULL" : PQgetvalue(res.get(), r, 0));
  return out;
}

}  // namespace loom_test
