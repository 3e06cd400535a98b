#include "store/query.h"

#include <chrono>

#include "core/utf8.h"
#include "loom/core/error.h"

namespace loom::store::detail {

void check_label(const char* op, const char* what, const std::string& s, size_t most) {
  bool ok = !s.empty() && s.size() <= most && loom::detail::is_utf8(s);
  for (size_t i = 0; ok && i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const bool c1 = c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) < 0xa0;  // U+0080 to U+009F
    ok = c >= 0x20 && c != 0x7f && !c1;
  }
  if (!ok)
    throw ValueError(std::string(op) + ": invalid " + what + " " + loom::detail::quote_text(s) + " (valid: 1 to " +
                     std::to_string(most) + " bytes of UTF-8 text without control characters)");
}

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
