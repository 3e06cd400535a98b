#pragma once
// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF), the
// text PostgreSQL and JSON writers accept.
#include <cstddef>
#include <string_view>

namespace loom::detail {

// The length (1 to 4) of the well-formed sequence starting at s[i], or 0 if none does.
size_t utf8_sequence_length(std::string_view s, size_t i);
bool is_utf8(std::string_view s);

}  // namespace loom::detail
