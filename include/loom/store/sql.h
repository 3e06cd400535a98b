#pragma once
// The values and rows of the store's SQL, the same on every backend (SQLite, PostgreSQL): what
// a store::Session binds to a statement's '?' parameters and returns as its result rows.
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "loom/core/api.h"

namespace loom::store {

struct LOOM_API SqlBytes {  // a BLOB value (text is std::string)
  std::string data;
};

// NULL, a 64-bit integer, a double, UTF-8 text or bytes.
using SqlValue = std::variant<std::monostate, int64_t, double, std::string, SqlBytes>;

// One result row. Accessors check the column's type and throw StoreError naming the column
// (a mismatch is a schema bug or a tampered database, never undefined behaviour).
class LOOM_API SqlRow {
 public:
  explicit SqlRow(std::vector<SqlValue> values) : values_(std::move(values)) {}
  size_t size() const { return values_.size(); }
  bool is_null(size_t i) const;
  int64_t integer(size_t i) const;
  double real(size_t i) const;  // an integer column value is converted
  const std::string& text(size_t i) const;
  const std::string& blob(size_t i) const;

 private:
  const SqlValue& at(size_t i) const;
  std::vector<SqlValue> values_;
};

}  // namespace loom::store
