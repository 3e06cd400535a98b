#include "core/utf8.h"

#include <cstdint>

namespace loom::detail {

size_t utf8_sequence_length(std::string_view s, size_t i) {
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};  // shortest form per length
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  if (n == 1) return 1;
  uint32_t cp = n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3f);
  }
  return cp >= kMin[n] && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff) ? n : 0;
}

bool is_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace loom::detail

namespace loom {

std::string escape_text(std::string_view s, bool keep_lines, size_t max_bytes) {
  using detail::utf8_sequence_length;
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() < 256 ? s.size() : 256);
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = utf8_sequence_length(s, i);
    if (n == 0) n = 1;  // a byte that is not UTF-8: escaped alone
    if (i + n > max_bytes) break;
    if (n == 1 && c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else if (n == 1 && keep_lines && (c == '\n' || c == '\t')) {
      out += static_cast<char>(c);
    } else if (n == 1 && (c == '\n' || c == '\t' || c == '\r')) {
      out += c == '\n' ? "\\n" : c == '\t' ? "\\t" : "\\r";
    } else if (n == 1) {  // C0, DEL or a byte that is not UTF-8
      out += {'\\', 'x', hex[c >> 4], hex[c & 15]};
    } else if (n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0) {  // C1: U+0080 to U+009F
      const auto cp = static_cast<unsigned char>(s[i + 1]);
      out += {'\\', 'u', '{', hex[cp >> 4], hex[cp & 15], '}'};
    } else {
      out.append(s.data() + i, n);
    }
    i += n;
  }
  if (i < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace loom

namespace loom::detail {

std::string quote_text(std::string_view s, size_t max_bytes) { return "'" + escape_text(s, false, max_bytes) + "'"; }

}  // namespace loom::detail
