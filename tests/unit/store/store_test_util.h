#pragma once
// Helpers of the store tests: the backends they run on (a fixture parameterised by "sqlite" and
// "postgresql"), raw SQL on a store's database and raw access to its stored blob bytes (to
// tamper with them as a crash, a bug or another program would), and small graphs to save.
#include <gtest/gtest.h>
#include <loom/core/dtype.h>
#include <loom/graph/graph.h>
#include <loom/nn/activation.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/ops/random.h>
#include <loom/store/store.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "unit/common/core_test_util.h"
#include "unit/store/pg_server.h"

namespace loom_test {

inline bool is_pg_url(const std::string& url) { return url.rfind("postgresql://", 0) == 0; }

// Two lowercase hex digits, for X'...' literals.
inline std::string hex_byte(unsigned char c) {
  static const char* digits = "0123456789abcdef";
  return {digits[c >> 4], digits[c & 15]};
}

// Runs `sql` on the store database at `url` (an SQLite file path or a PostgreSQL URL) and
// returns the first column of each row as text.
inline std::vector<std::string> raw_sql(const std::string& path, const std::string& sql) {
  if (is_pg_url(path)) return pg_sql(path, sql);
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

// A store test run on each backend: TEST_P(StoreXxx, ...) with INSTANTIATE_STORE_BACKENDS(StoreXxx).
class StoreBackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  bool pg() const { return GetParam() == "postgresql"; }
  // The URL of the store `name` of this test, empty until opened: a file in the test's
  // temporary folder, or a new database on the test server (a test failure when there is none).
  std::string url(const std::string& name = "s") {
    auto it = urls_.find(name);
    if (it != urls_.end()) return it->second;
    std::string u;
    if (pg()) {
      try {
        u = pg_create_database();
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        throw;
      }
    } else {
      u = tmp / (name + ".db");
    }
    return urls_[name] = u;
  }
  void TearDown() override {
    if (pg())
      for (const auto& [name, u] : urls_) pg_drop_database(u);
  }
  TempDir tmp;

 private:
  std::map<std::string, std::string> urls_;
};

#define INSTANTIATE_STORE_BACKENDS(suite)                                                        \
  INSTANTIATE_TEST_SUITE_P(Backends, suite, ::testing::Values(std::string("sqlite"), std::string("postgresql")), \
                           [](const ::testing::TestParamInfo<std::string>& i) { return i.param; })

// Raw access to a store's stored (compressed) blob bytes, wherever its backend keeps them: the
// files of an SQLite store's blob directory, the blob_data rows of a PostgreSQL store.
inline std::string blob_file(const loom::store::Store& s, const std::string& sha) {
  return s.blob_dir() + "/" + sha.substr(0, 2) + "/" + sha.substr(2);
}

inline size_t stored_blob_count(const loom::store::Store& s) {
  if (s.blob_dir().empty()) return std::stoul(raw_sql(s.path(), "SELECT COUNT(*) FROM blob_data").at(0));
  size_t n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(s.blob_dir())) n += e.is_regular_file();
  return n;
}

inline bool blob_stored(const loom::store::Store& s, const std::string& sha) {
  if (s.blob_dir().empty()) return raw_sql(s.path(), "SELECT COUNT(*) FROM blob_data WHERE sha256 = '" + sha + "'").at(0) == "1";
  return std::filesystem::exists(blob_file(s, sha));
}

inline std::string stored_blob(const loom::store::Store& s, const std::string& sha) {
  if (s.blob_dir().empty()) {
    const std::string hex = raw_sql(s.path(), "SELECT encode(data, 'hex') FROM blob_data WHERE sha256 = '" + sha + "'").at(0);
    std::string out;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    return out;
  }
  std::ifstream f(blob_file(s, sha), std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline void set_stored_blob(const loom::store::Store& s, const std::string& sha, const std::string& bytes) {
  if (s.blob_dir().empty()) {
    static const char* digits = "0123456789abcdef";
    std::string hex;
    for (unsigned char c : bytes) hex += std::string{digits[c >> 4], digits[c & 15]};
    raw_sql(s.path(), "UPDATE blob_data SET data = '\\x" + hex + "'::bytea WHERE sha256 = '" + sha + "'");
    return;
  }
  std::ofstream f(blob_file(s, sha), std::ios::binary | std::ios::trunc);
  f << bytes;
}

inline void remove_stored_blob(const loom::store::Store& s, const std::string& sha) {
  if (s.blob_dir().empty()) raw_sql(s.path(), "DELETE FROM blob_data WHERE sha256 = '" + sha + "'");
  else std::filesystem::remove(blob_file(s, sha));
}

}  // namespace loom_test
