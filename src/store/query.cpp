#include "store/query.h"

#include <chrono>

#include "core/utf8.h"
#include "loom/core/error.h"

namespace loom::store::detail {

const char* sql_comparison(const char* op, const char* what, const std::string& cmp, const std::string& subject) {
  static const char* const ops[] = {"<", "<=", "==", "!=", ">=", ">"};
  static const char* const sql_ops[] = {"<", "<=", "=", "<>", ">=", ">"};
  for (int i = 0; i < 6; ++i)
    if (cmp == ops[i]) return sql_ops[i];
  throw ValueError(std::string(op) + ": invalid " + what + " '" + cmp + "' for " + subject + " (valid: <, <=, ==, !=, >=, >)");
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace loom::store::detail
