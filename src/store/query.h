#pragma once
// Argument checks shared by the store's registries (models, datasets, runs): one rule for
// names, tags and keys, and one table of the comparison operators of their query filters.
#include <cstddef>
#include <string>

namespace loom::store::detail {

// Names, tags, metric names and metadata keys: 1 to `most` bytes of well-formed UTF-8 without
// control characters.
// Otherwise a ValueError "<op>: invalid <what> '<s>' (valid: ...)".
void check_label(const char* op, const char* what, const std::string& s, size_t most = 256);

// The SQL operator of a filter's comparison `cmp` (one of < <= == != >= >). Otherwise a
// ValueError "<op>: invalid <what> '<cmp>' for <subject> (valid: <, <=, ==, !=, >=, >)".
const char* sql_comparison(const char* op, const char* what, const std::string& cmp, const std::string& subject);

}  // namespace loom::store::detail
