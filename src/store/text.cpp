#include "loom/store/text.h"

#include "core/utf8.h"

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

}  // namespace loom::store
