#pragma once
// Free text (an error text, an agent's name) as every backend of the store keeps it.
#include <string>

#include "loom/core/api.h"

namespace loom::store {

// `s` as every backend stores it as written: well-formed UTF-8 without NUL (PostgreSQL's text
// holds neither invalid bytes nor NUL; SQLite would keep them), each offending byte replaced
// by '?'.
LOOM_API std::string storable_text(const std::string& s);

}  // namespace loom::store
