#pragma once
// A store record's fields, listed once (docs/architecture.md, "Records"), as a layer kind's
// attributes are (loom/nn/attributes.h):
//
//   struct RunInfo {
//     int64_t id = 0;
//     RunStatus status = RunStatus::Running;
//     std::string hyper_parameters;      // JSON text
//     std::vector<std::string> tags;     // another table's rows
//     std::string checkpoint_sha256;
//     template <class Visit> void fields(Visit&& visit) {
//       visit("id", id);
//       visit("status", status);
//       visit("hyper_parameters", hyper_parameters, RecordField::json());
//       visit("tags", tags, RecordField::not_stored());
//       visit("checkpoint_sha256", checkpoint_sha256, RecordField::in_column("checkpoint"));
//     }
//   };
//
// From that one list come the record's SQL column list (column_list), its reader from result
// rows by column name (RowReader), and its JSON with one key set (record_json,
// record_from_json), which the command line, the dashboard and the server all print. A field
// is an int64_t, uint64_t, double, bool, std::string, an enum with spellings (below), a vector
// of integers, numbers, strings or records, a map from names to records, a record (its columns
// flattened into the table's, its JSON a nested object) or a value kept as JSON text in one
// column (below); in a record's JSON only (no column holds them), a DType (its name, "float32")
// and a Shape (an array of integers), and a std::optional of any of these (null when empty: a
// search's ASHA, a trial's value).
//
// A value kept as JSON text (a named query's SampleQuery) is declared by two functions found by
// argument-dependent lookup, its one codec:
//
//   std::string record_text(const SampleQuery& q);                              // its JSON text
//   SampleQuery record_from_text(const std::string& text, const SampleQuery*);  // ValueError if malformed
//
// Its column holds the text; its JSON is the value the text holds, so its keys are the codec's.
// Empty text (or a NULL column) stands for no value: null in the JSON, and null reads back as T{}.
//
// A state (a run's or a task's status) is an enum with one spelling per value, declared once
// by a function found by argument-dependent lookup:
//
//   enum class RunStatus { Running, Finished, Failed };
//   constexpr store::Spellings<3> spellings(RunStatus) { return {"run status", {"running", "finished", "failed"}}; }
//
// store::to_string(s) and store::parse_state<RunStatus>(text) are then the only ways between the
// two; the stored text is the spelling.
//
// The JSON functions are templates over a JSON type with nlohmann::json's interface (the
// library's headers include no JSON library): record_json<nlohmann::ordered_json>(task).
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/dtype.h"
#include "loom/core/error.h"
#include "loom/core/shape.h"
#include "loom/store/error.h"
#include "loom/store/sql.h"

namespace loom::store {

// How a field is kept and shown. By default a field is the column of its key's name.
struct LOOM_API RecordField {
  const char* column = nullptr;  // its column when not its key ("checkpoint" for "checkpoint_sha256")
  bool stored = true;            // false: not a column of the record's table (filled from another table)
  bool json_text = false;        // a std::string holding JSON: a JSON value in the record's JSON ("" is null)
  static constexpr RecordField not_stored() { return {nullptr, false, false}; }
  static constexpr RecordField json() { return {nullptr, true, true}; }
  static constexpr RecordField in_column(const char* name) { return {name, true, false}; }
};

// The spellings of a state enum's values, in the values' order, and what the state is called in
// messages ("task status").
template <size_t N>
struct Spellings {
  const char* what;
  std::array<const char*, N> names;
};

// A stored state that is none of its enum's spellings (a database written by something else,
// or tampered with): the message names the column, the text and the valid states.
class LOOM_API BadStateError : public StoreError { using StoreError::StoreError; };

namespace detail {

// What the templates below need from the library (their messages, with untrusted text quoted
// and clipped).
[[noreturn]] LOOM_API void unknown_state(const char* what, std::string_view text, const char* const* names, size_t n);
[[noreturn]] LOOM_API void bad_stored_state(const char* column, const char* what, std::string_view text, const char* const* names,
                                            size_t n);
[[noreturn]] LOOM_API void record_key_error(const std::string& where, const char* problem, std::string_view key,
                                            const std::vector<std::string>& valid);
[[noreturn]] LOOM_API void record_type_error(const std::string& where, const char* key, const char* wanted, const char* found);
[[noreturn]] LOOM_API void column_not_selected(const char* column, const std::vector<std::string>& selected);
[[noreturn]] LOOM_API void column_error(const char* column, const std::exception& e);
// The dtype named `text` (dtype_name's spelling); ValueError prefixed by `where` and the key,
// naming the valid names, otherwise.
LOOM_API DType dtype_from_json(const std::string& where, const char* key, std::string_view text);

// A visitor that accepts any field: for recognising records and spelled enums.
struct FieldProbe {
  template <class T>
  void operator()(const char*, T&, RecordField = {}) const {}
};

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};
template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_map : std::false_type {};
template <class T>
struct is_map<std::map<std::string, T>> : std::true_type {};

}  // namespace detail

// A field type kept as JSON text in one column (above).
template <class T>
concept TextCoded = requires(const T& v, const std::string& text) {
  { record_text(v) } -> std::convertible_to<std::string>;
  { record_from_text(text, static_cast<const T*>(nullptr)) } -> std::same_as<T>;
};

namespace detail {

// The field types a column can hold.
template <class T>
constexpr bool is_column_type = std::is_same_v<T, std::string> || std::is_same_v<T, bool> || std::is_same_v<T, int64_t> ||
                                std::is_same_v<T, uint64_t> || std::is_same_v<T, double> ||
                                (std::is_enum_v<T> && requires(T e) { spellings(e).names; }) || TextCoded<T>;

[[noreturn]] LOOM_API void not_a_column_type(const char* key);

// Visits a const record's fields: `fields` is one member template for reading and writing, and
// the visitors given here only read.
template <class R, class Visit>
void visit_fields(const R& r, Visit&& visit) {
  const_cast<R&>(r).fields(visit);
}

}  // namespace detail

template <class T>
concept Record = std::is_class_v<T> && requires(T& t, detail::FieldProbe p) { t.fields(p); };

template <class E>
concept SpelledEnum = std::is_enum_v<E> && requires(E e) { spellings(e).names; };

template <SpelledEnum E>
const char* to_string(E e) {
  constexpr auto s = spellings(E{});
  const auto i = static_cast<size_t>(e);
  return i < s.names.size() ? s.names[i] : "?";
}

// The state spelled `text`; ValueError naming the valid spellings otherwise.
template <SpelledEnum E>
E parse_state(std::string_view text) {
  constexpr auto s = spellings(E{});
  for (size_t i = 0; i < s.names.size(); ++i)
    if (text == s.names[i]) return static_cast<E>(i);
  detail::unknown_state(s.what, text, s.names.data(), s.names.size());
}

// Every spelling of E, in order.
template <SpelledEnum E>
std::vector<std::string> state_names() {
  constexpr auto s = spellings(E{});
  return {s.names.begin(), s.names.end()};
}

// The record's stored columns in field order (a nested record's in its place).
template <Record R>
std::vector<std::string> column_names() {
  std::vector<std::string> out;
  detail::visit_fields(R{}, [&](const char* key, const auto& v, RecordField f = {}) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (Record<T>) {
      for (std::string& c : column_names<T>()) out.push_back(std::move(c));
    } else if constexpr (detail::is_column_type<T>) {
      if (f.stored) out.emplace_back(f.column ? f.column : key);
    } else {
      if (f.stored) detail::not_a_column_type(key);  // a list or map is another table's rows
    }
  });
  return out;
}

// The column list of a SELECT: "id, kind, ..." or, with `alias`, "t.id, t.kind, ...".
template <Record R>
std::string column_list(const std::string& alias = "") {
  std::string out;
  for (const std::string& c : column_names<R>()) out += (out.empty() ? "" : ", ") + (alias.empty() ? "" : alias + ".") + c;
  return out;
}

// Reads records from result rows by column name: built once for the names of the columns a
// query selected (in order), it finds each stored field's column among them, so a query may
// select more columns, or in another order. A NULL column reads as the field's zero ("" or 0);
// a column of the wrong type is a StoreError naming it, an unknown state a BadStateError.
template <Record R>
class RowReader {
 public:
  // For rows of exactly column_list<R>().
  RowReader() : RowReader(column_names<R>()) {}
  // StoreError naming a field's column that is not among `selected`.
  explicit RowReader(const std::vector<std::string>& selected) {
    for (const std::string& c : column_names<R>()) {
      size_t i = 0;
      while (i < selected.size() && selected[i] != c) ++i;
      if (i == selected.size()) detail::column_not_selected(c.c_str(), selected);
      at_.push_back(i);
    }
  }

  R read(const SqlRow& row) const {
    R r{};
    size_t next = 0;
    read_into(row, r, next);
    return r;
  }

 private:
  template <class Rec>
  void read_into(const SqlRow& row, Rec& r, size_t& next) const {
    r.fields([&](const char* key, auto& v, RecordField f = {}) {
      using T = std::decay_t<decltype(v)>;
      if constexpr (Record<T>) {
        read_into(row, v, next);
      } else if constexpr (detail::is_column_type<T>) {
        if (!f.stored) return;
        const char* column = f.column ? f.column : key;
        const size_t i = at_[next++];
        if (row.is_null(i)) return;
        try {
          read_value(row, i, column, v);
        } catch (const BadStateError&) {
          throw;
        } catch (const StoreError& e) {
          detail::column_error(column, e);
        }
      }
    });
  }

  template <class T>
  static void read_value(const SqlRow& row, size_t i, const char* column, T& v) {
    if constexpr (std::is_same_v<T, std::string>) {
      v = row.text(i);
    } else if constexpr (std::is_same_v<T, bool>) {
      v = row.integer(i) != 0;
    } else if constexpr (std::is_same_v<T, int64_t>) {
      v = row.integer(i);
    } else if constexpr (std::is_same_v<T, uint64_t>) {
      const int64_t n = row.integer(i);
      if (n < 0) throw StoreError("a negative value " + std::to_string(n) + " where a size was stored");
      v = static_cast<uint64_t>(n);
    } else if constexpr (std::is_same_v<T, double>) {
      v = row.real(i);
    } else if constexpr (TextCoded<T>) {
      const std::string& text = row.text(i);
      if (text.empty()) return;  // no value, as NULL
      try {
        v = record_from_text(text, static_cast<const T*>(nullptr));
      } catch (const ValueError& e) {
        throw StoreError(std::string("holds text its record cannot read: ") + e.what());
      }
    } else if constexpr (SpelledEnum<T>) {
      constexpr auto s = spellings(T{});
      const std::string& text = row.text(i);
      for (size_t k = 0; k < s.names.size(); ++k)
        if (text == s.names[k]) {
          v = static_cast<T>(k);
          return;
        }
      detail::bad_stored_state(column, s.what, text, s.names.data(), s.names.size());
    } else {
      static_assert(sizeof(T) == 0, "a column is an integer, a number, text, a spelled enum or a value kept as JSON text");
    }
  }

  std::vector<size_t> at_;  // the selected column of each stored field, in field order
};

template <class Json, Record R>
Json record_json(const R& r);

namespace detail {

// One field's JSON (a nested record an object; a JSON-text field the JSON value it holds, null
// when empty; NaN null).
template <class Json, class T>
Json value_json(const T& v, RecordField f) {
  if constexpr (is_optional<T>::value) {
    return v ? value_json<Json>(*v, f) : Json(nullptr);
  } else if constexpr (Record<T>) {
    return record_json<Json>(v);
  } else if constexpr (TextCoded<T>) {
    const std::string text = record_text(v);
    if (text.empty()) return Json(nullptr);
    Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    return parsed.is_discarded() ? Json(text) : parsed;
  } else if constexpr (is_map<T>::value) {
    Json m = Json::object();
    for (const auto& [name, item] : v) m[name] = value_json<Json>(item, RecordField{});
    return m;
  } else if constexpr (is_vector<T>::value) {
    Json a = Json::array();
    for (const auto& item : v) a.push_back(value_json<Json>(item, RecordField{}));
    return a;
  } else if constexpr (SpelledEnum<T>) {
    return Json(store::to_string(v));
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!f.json_text) return Json(v);
    if (v.empty()) return Json(nullptr);
    // the store keeps only valid JSON; anything else is shown as the text it is
    Json parsed = Json::parse(v, nullptr, /*allow_exceptions=*/false);
    return parsed.is_discarded() ? Json(v) : parsed;
  } else if constexpr (std::is_same_v<T, double>) {
    return std::isfinite(v) ? Json(v) : Json(nullptr);
  } else if constexpr (std::is_same_v<T, DType>) {
    return Json(dtype_name(v));
  } else if constexpr (std::is_same_v<T, Shape>) {
    Json a = Json::array();
    for (int64_t d : v) a.push_back(d);
    return a;
  } else {
    return Json(v);
  }
}

}  // namespace detail

// The record's JSON: one key per field, in field order.
template <class Json, Record R>
Json record_json(const R& r) {
  Json j = Json::object();
  detail::visit_fields(r, [&](const char* key, const auto& v, RecordField f = {}) { j[key] = detail::value_json<Json>(v, f); });
  return j;
}

namespace detail {

template <Record R, class Json>
R record_from_json_impl(const Json& j, const std::string& where);

template <class Json>
const char* json_type(const Json& v) {
  return v.type_name();
}

template <class Json, class T>
void field_from_json(const Json& v, T& out, RecordField f, const std::string& where, const char* key);

// An optional field: null is none, anything else its value's JSON.
template <class Json, class T>
void optional_from_json(const Json& v, std::optional<T>& out, RecordField f, const std::string& where, const char* key) {
  if (v.is_null()) {
    out.reset();
    return;
  }
  T x{};
  field_from_json(v, x, f, where, key);
  out = std::move(x);
}

template <class Json, class T>
void field_from_json(const Json& v, T& out, RecordField f, const std::string& where, const char* key) {
  if constexpr (is_optional<T>::value) {
    optional_from_json(v, out, f, where, key);
  } else if constexpr (Record<T>) {
    out = record_from_json_impl<T>(v, where + "." + key);
  } else if constexpr (TextCoded<T>) {
    if (v.is_null()) {
      out = T{};
      return;
    }
    try {
      out = record_from_text(v.dump(), static_cast<const T*>(nullptr));
    } catch (const ValueError& e) {
      throw ValueError(where + ": key '" + key + "': " + e.what());
    }
  } else if constexpr (is_map<T>::value) {
    if (!v.is_object()) record_type_error(where, key, "an object", json_type(v));
    out.clear();
    for (auto it = v.begin(); it != v.end(); ++it) {
      typename T::mapped_type x{};
      field_from_json(*it, x, RecordField{}, where + "." + key, it.key().c_str());
      out[it.key()] = std::move(x);
    }
  } else if constexpr (SpelledEnum<T>) {
    if (!v.is_string()) record_type_error(where, key, "a string", json_type(v));
    try {
      out = parse_state<T>(v.template get<std::string>());
    } catch (const ValueError& e) {
      throw ValueError(where + ": key '" + key + "': " + e.what());
    }
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (f.json_text) {
      out = v.is_null() ? std::string() : v.dump();
    } else {
      if (!v.is_string()) record_type_error(where, key, "a string", json_type(v));
      out = v.template get<std::string>();
    }
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) record_type_error(where, key, "true or false", json_type(v));
    out = v.template get<bool>();
  } else if constexpr (std::is_same_v<T, int64_t>) {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.template get<uint64_t>() > uint64_t(INT64_MAX)))
      record_type_error(where, key, "an integer", json_type(v));
    out = v.template get<int64_t>();
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    if (!v.is_number_unsigned()) record_type_error(where, key, "a non-negative integer", json_type(v));
    out = v.template get<uint64_t>();
  } else if constexpr (std::is_same_v<T, double>) {
    if (v.is_null()) {
      out = std::numeric_limits<double>::quiet_NaN();
    } else {
      if (!v.is_number()) record_type_error(where, key, "a number or null", json_type(v));
      out = v.template get<double>();
    }
  } else if constexpr (std::is_same_v<T, DType>) {
    if (!v.is_string()) record_type_error(where, key, "a string", json_type(v));
    out = dtype_from_json(where, key, v.template get<std::string>());
  } else if constexpr (std::is_same_v<T, Shape>) {
    if (!v.is_array()) record_type_error(where, key, "an array of integers", json_type(v));
    out.clear();
    for (const auto& d : v) {
      if (!d.is_number_integer()) record_type_error(where, key, "an array of integers", json_type(d));
      out.push_back(d.template get<int64_t>());
    }
  } else if constexpr (is_vector<T>::value) {
    if (!v.is_array()) record_type_error(where, key, "an array", json_type(v));
    out.clear();
    out.reserve(v.size());
    for (const auto& item : v) {
      typename T::value_type x{};
      field_from_json(item, x, RecordField{}, where, key);
      out.push_back(std::move(x));
    }
  } else {
    static_assert(sizeof(T) == 0, "unsupported record field type");
  }
}

template <Record R, class Json>
R record_from_json_impl(const Json& j, const std::string& where) {
  std::vector<std::string> keys;
  detail::visit_fields(R{}, [&](const char* key, const auto&, RecordField = {}) { keys.emplace_back(key); });
  if (!j.is_object()) throw ValueError(where + ": must be a JSON object, not " + std::string(j.type_name()));
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const std::string& k : keys) known = known || k == it.key();
    if (!known) record_key_error(where, "unknown key", it.key(), keys);
  }
  R r{};
  r.fields([&](const char* key, auto& v, RecordField f = {}) {
    const auto it = j.find(key);
    if (it == j.end()) record_key_error(where, "missing key", key, keys);
    field_from_json(*it, v, f, where, key);
  });
  return r;
}

}  // namespace detail

// The record read back from its JSON (record_json's): every key must be there and no other
// (ValueError prefixed by `where`, naming the key and the valid ones), each of its field's type.
template <Record R, class Json>
R record_from_json(const Json& j, const std::string& where) {
  return detail::record_from_json_impl<R>(j, where);
}

}  // namespace loom::store
