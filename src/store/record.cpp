// The messages of loom/store/record.h's templates, built here so that untrusted text (a stored
// state, a JSON key) is quoted and clipped one way.
#include "loom/store/record.h"

#include "core/utf8.h"

namespace loom::store::detail {

namespace {

std::string listed(const char* const* names, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += (i ? ", " : "") + std::string(names[i]);
  return out;
}

std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& s : names) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

void unknown_state(const char* what, std::string_view text, const char* const* names, size_t n) {
  throw ValueError(std::string("unknown ") + what + " " + loom::detail::quote_text(text) + " (valid: " + listed(names, n) + ")");
}

void bad_stored_state(const char* column, const char* what, std::string_view text, const char* const* names, size_t n) {
  throw BadStateError(std::string("store: column '") + column + "' holds " + loom::detail::quote_text(text) + ", which is no " +
                      what + " this library knows (valid: " + listed(names, n) +
                      "): the database was written by something else or changed by hand");
}

void record_key_error(const std::string& where, const char* problem, std::string_view key, const std::vector<std::string>& valid) {
  throw ValueError(where + ": " + problem + " " + loom::detail::quote_text(key, 64) + " (keys: " + listed(valid) + ")");
}

void record_type_error(const std::string& where, const char* key, const char* wanted, const char* found) {
  throw ValueError(where + ": key '" + key + "' must be " + wanted + ", not " + found);
}

void column_not_selected(const char* column, const std::vector<std::string>& selected) {
  throw StoreError(std::string("store: a record's column '") + column + "' is not among the query's columns (" + listed(selected) + ")");
}

void not_a_column_type(const char* key) {
  throw StoreError(std::string("store: record field '") + key +
                   "' is a list or a map, which no column holds: declare it RecordField::not_stored()");
}

DType dtype_from_json(const std::string& where, const char* key, std::string_view text) {
  static constexpr DType kAll[] = {Bool, UInt8, Int32, Int64, Float16, BFloat16, Float32, Float64};
  std::vector<std::string> names;
  for (DType d : kAll) {
    if (text == dtype_name(d)) return d;
    names.emplace_back(dtype_name(d));
  }
  throw ValueError(where + ": key '" + key + "': unknown dtype " + loom::detail::quote_text(text, 64) + " (valid: " + listed(names) + ")");
}

void column_error(const char* column, const std::exception& e) {
  throw StoreError(std::string("store: column '") + column + "': " + e.what());
}

}  // namespace loom::store::detail
