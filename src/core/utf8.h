#pragma once
// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF), the
// text PostgreSQL and JSON writers accept; and text made safe to show on a terminal.
#include <cstddef>
#include <string>
#include <string_view>

#include "loom/core/api.h"
#include "loom/core/text.h"

namespace loom::detail {

// The length (1 to 4) of the well-formed sequence starting at s[i], or 0 if none does.
LOOM_INTERNAL size_t utf8_sequence_length(std::string_view s, size_t i);
LOOM_INTERNAL bool is_utf8(std::string_view s);

// escape_text (loom/core/text.h, public: the command line prints through it) by the name the
// library's files use.
using loom::escape_text;

// "'<escape_text(s)>'" with at most `max_bytes` of `s`: a value quoted in an error message.
LOOM_INTERNAL std::string quote_text(std::string_view s, size_t max_bytes = 100);

}  // namespace loom::detail
