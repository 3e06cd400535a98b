#pragma once
// The throwaway PostgreSQL server of the store tests (docs/store.md, "Tests").
//
// Under ctest, one server serves the whole run: the fixture tests pg_server_start and
// pg_server_stop (tests/CMakeLists.txt) start and stop it with tests/unit/store/pg_server.sh, and
// LOOM_TEST_PG_SERVER_FILE names the file holding its socket folder. Run directly, the test
// binary starts its own server with the same script on first use and stops it when the tests
// end (a GoogleTest environment), also when tests fail. A server that cannot start is a failure
// with the script's reason, never a skip.
#include <string>
#include <vector>

namespace loom_test {

// The socket folder of the test server (started when needed). Throws std::runtime_error with
// the reason when there is none.
const std::string& pg_server_dir();

// A new, empty database on the test server; returns its URL
// ("postgresql://loom@/<name>?host=<socket folder>").
std::string pg_create_database();
// Drops the database of a URL pg_create_database returned (connections to it are ended).
void pg_drop_database(const std::string& url);

// Runs `sql` (one or more statements) on the database at `url` through libpq and returns the
// first column of each row of the last statement as text ("NULL" for NULL). A failure is a
// test failure naming the statement.
std::vector<std::string> pg_sql(const std::string& url, const std::string& sql);

}  // namespace loom_test
