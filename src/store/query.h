#pragma once
// What the store's registries (models, datasets, runs, blobs) share: one rule for names, tags
// and keys (check_label, public in loom/store/text.h, as flow holds names to it too), one table
// of the comparison operators of their query filters, one clock.
#include <cstddef>
#include <cstdint>
#include <string>

#include "loom/store/text.h"  // check_label, the rule for names, tags and keys

namespace loom::store::detail {

// The SQL operator of a filter's comparison `cmp` (one of < <= == != >= >). Otherwise a
// ValueError "<op>: invalid <what> '<cmp>' for <subject> (valid: <, <=, ==, !=, >=, >)".
const char* sql_comparison(const char* op, const char* what, const std::string& cmp, const std::string& subject);

// Unix time in milliseconds: the rows' created/started/ended times.
int64_t now_ms();

}  // namespace loom::store::detail
