#pragma once
// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF), the
// text PostgreSQL and JSON writers accept; and text made safe to show on a terminal.
#include <cstddef>
#include <string>
#include <string_view>

#include "loom/core/api.h"

namespace loom::detail {

// The length (1 to 4) of the well-formed sequence starting at s[i], or 0 if none does.
LOOM_API size_t utf8_sequence_length(std::string_view s, size_t i);
LOOM_API bool is_utf8(std::string_view s);

// `s` with everything that could act on a terminal, or is not UTF-8, written as an escape:
// C0 controls as \xNN (\n, \t and \r as such; newline and tab kept as they are when
// `keep_lines`), DEL as \x7f, C1 controls (U+0080 to U+009F) as \u{NN}, and each byte that
// starts no well-formed UTF-8 sequence as \xNN. Other text, backslashes included, is kept. At
// most `max_bytes` of `s` are shown (cut at a character), then "... (N bytes)".
LOOM_API std::string escape_text(std::string_view s, bool keep_lines = false, size_t max_bytes = std::string_view::npos);

// "'<escape_text(s)>'" with at most `max_bytes` of `s`: a value quoted in an error message.
LOOM_API std::string quote_text(std::string_view s, size_t max_bytes = 100);

}  // namespace loom::detail
