#pragma once
// Helpers of the store tests: raw SQL on a store's database (to tamper with it as a crash, a
// bug or another program would) and small graphs to save.
#include <gtest/gtest.h>
#include <loom/loom.h>
#include <sqlite3.h>

#include <string>
#include <vector>

namespace loom_test {

// Runs `sql` on the SQLite file at `path` and returns the first column of each row as text.
inline std::vector<std::string> raw_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::vector<std::string> out;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << path;
    sqlite3_close(db);
    return out;
  }
  sqlite3_busy_timeout(db, 10000);
  char* err = nullptr;
  auto collect = [](void* p, int n, char** vals, char**) {
    if (n > 0) static_cast<std::vector<std::string>*>(p)->push_back(vals[0] ? vals[0] : "NULL");
    return 0;
  };
  if (sqlite3_exec(db, sql.c_str(), collect, &out, &err) != SQLITE_OK) {
    ADD_FAILURE() << "SQL failed: " << (err ? err : "?") << " in: " << sql;
    sqlite3_free(err);
  }
  sqlite3_close(db);
  return out;
}

// A small MLP whose weights depend on `seed` (hidden width `hidden`).
inline loom::Graph small_mlp(uint64_t seed, int64_t hidden = 8) {
  loom::manual_seed(seed);
  loom::nn::Input x(4, loom::Float32, "x");
  loom::nn::Linear l1(x, hidden, {}, "l1");
  loom::nn::Activation a(l1, loom::nn::relu, "a");
  loom::nn::Linear l2(a, 3, {}, "l2");
  return loom::Graph::build({l2}, {x});
}

}  // namespace loom_test
