#include "loom/store/text.h"

#include "core/utf8.h"
#include "loom/core/error.h"

namespace loom::store {

std::string storable_text(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = s[i] == '\0' ? 0 : loom::detail::utf8_sequence_length(s, i);
    if (n > 0) {
      out.append(s, i, n);
      i += n;
    } else {
      out += '?';
      ++i;
    }
  }
  return out;
}

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

}  // namespace loom::store
