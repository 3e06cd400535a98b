#pragma once
// What the store's registries (models, datasets, runs, blobs) share: one rule for names, tags
// and keys, one table of the comparison operators of their query filters, one clock.
#include <cstddef>
#include <cstdint>
#include <string>

namespace loom::store::detail {

// Names, tags, metric names and metadata keys: 1 to `most` bytes of well-formed UTF-8 without
// control characters (C0, DEL, C1).
// Otherwise a ValueError "<op>: invalid <what> '<s>' (valid: ...)", `s` escaped (quote_text).
void check_label(const char* op, const char* what, const std::string& s, size_t most = 256);

// The SQL operator of a filter's comparison `cmp` (one of < <= == != >= >). Otherwise a
// ValueError "<op>: invalid <what> '<cmp>' for <subject> (valid: <, <=, ==, !=, >=, >)".
const char* sql_comparison(const char* op, const char* what, const std::string& cmp, const std::string& subject);

// Unix time in milliseconds: the rows' created/started/ended times.
int64_t now_ms();

}  // namespace loom::store::detail
