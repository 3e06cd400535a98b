#include "store/db.h"

#include "core/utf8.h"
#include "loom/store/error.h"

namespace loom::store {

using detail::Bytes;
using detail::Value;

namespace {
const char* kind(const Value& v) {
  switch (v.index()) {
    case 0: return "NULL";
    case 1: return "an integer";
    case 2: return "a real";
    case 3: return "text";
    default: return "a blob";
  }
}
}  // namespace

const Value& SqlRow::at(size_t i) const {
  if (i >= values_.size())
    throw StoreError("store: result column " + std::to_string(i) + " requested from a row of " + std::to_string(values_.size()));
  return values_[i];
}

bool SqlRow::is_null(size_t i) const { return std::holds_alternative<std::monostate>(at(i)); }

int64_t SqlRow::integer(size_t i) const {
  if (auto* v = std::get_if<int64_t>(&at(i))) return *v;
  throw StoreError("store: result column " + std::to_string(i) + " holds " + kind(at(i)) + ", expected an integer");
}

double SqlRow::real(size_t i) const {
  if (auto* v = std::get_if<double>(&at(i))) return *v;
  if (auto* v = std::get_if<int64_t>(&at(i))) return static_cast<double>(*v);
  throw StoreError("store: result column " + std::to_string(i) + " holds " + kind(at(i)) + ", expected a real");
}

const std::string& SqlRow::text(size_t i) const {
  if (auto* v = std::get_if<std::string>(&at(i))) return *v;
  throw StoreError("store: result column " + std::to_string(i) + " holds " + kind(at(i)) + ", expected text");
}

const std::string& SqlRow::blob(size_t i) const {
  if (auto* v = std::get_if<Bytes>(&at(i))) return v->data;
  throw StoreError("store: result column " + std::to_string(i) + " holds " + kind(at(i)) + ", expected a blob");
}

namespace detail {

std::string Dialect::render(const std::string& ddl) const {
  std::string out;
  for (size_t i = 0; i < ddl.size();) {
    if (ddl[i] == '{') {
      const size_t end = ddl.find('}', i);
      const std::string key = end == std::string::npos ? "" : ddl.substr(i + 1, end - i - 1);
      const std::string* rep = key == "id" ? &id : key == "int" ? &integer : key == "real" ? &real : key == "text" ? &text
                               : key == "blob" ? &blob : nullptr;
      if (rep) {
        out += *rep;
        i = end + 1;
        continue;
      }
    }
    out += ddl[i++];
  }
  return out;
}

}  // namespace detail

std::string detail::quoted_statement(const std::string& sql) { return loom::detail::escape_text(sql, true, 400); }

}  // namespace loom::store
