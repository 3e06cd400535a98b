#pragma once
// Text as every backend of the store keeps it: free text (an error text, an agent's name), and
// the rule for the names, tags and keys of its registries, which flow's lineage holds names to.
#include <cstddef>
#include <string>

#include "loom/core/api.h"

namespace loom::store {

// `s` as every backend stores it as written: well-formed UTF-8 without NUL (PostgreSQL's text
// holds neither invalid bytes nor NUL; SQLite would keep them), each offending byte replaced
// by '?'.
LOOM_API std::string storable_text(const std::string& s);

// Names (of models, datasets, runs, experiments), tags, metric names and metadata keys: 1 to
// `most` bytes of well-formed UTF-8 without control characters (C0, DEL, C1). Otherwise a
// ValueError "<op>: invalid <what> '<s>' (valid: ...)", `s` escaped (quote_text).
LOOM_API void check_label(const char* op, const char* what, const std::string& s, size_t most = 256);

}  // namespace loom::store
