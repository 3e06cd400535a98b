#pragma once
// Text made safe to show on a terminal: what Loom's messages, the store's quoted values and the
// `loom` command line (docs/cli.md, "Text from the store") print of text they did not write.
#include <cstddef>
#include <string>
#include <string_view>

#include "loom/core/api.h"

namespace loom {

// `s` with everything that could act on a terminal, or is not UTF-8, written as an escape:
// C0 controls as \xNN (\n, \t and \r as such; newline and tab kept as they are when
// `keep_lines`), DEL as \x7f, C1 controls (U+0080 to U+009F) as \u{NN}, and each byte that
// starts no well-formed UTF-8 sequence as \xNN. Other text, backslashes included, is kept. At
// most `max_bytes` of `s` are shown (cut at a character), then "... (N bytes)".
LOOM_API std::string escape_text(std::string_view s, bool keep_lines = false, size_t max_bytes = std::string_view::npos);

}  // namespace loom
