#pragma once
// A layer kind's attributes: everything besides its inputs, name and state that defines the
// layer (sizes, strides, flags), as a typed struct whose fields are listed once:
//
//   struct ConvAttributes {
//     int64_t filters = 0;
//     std::vector<int64_t> kernel_size;
//     bool bias = true;
//     template <class Visit> void fields(Visit&& visit) {
//       visit("filters", filters, Field::sizes(1));
//       visit("kernel_size", kernel_size, Field::sizes(1));
//       visit("bias", bias);
//     }
//   };
//
// From that one list come the kind's options (the JSON it is saved as: write_attributes), its
// registered factory's reads (read_attributes), and the equality the graph compiler's merging
// of common subexpressions uses (same_attributes). A kind built on KindBase<Impl, Attributes>
// (nn/layer.h) gets all three, and the compiler and exporters read the struct by its type
// (attributes_of<ConvAttributes>(layer)), never by the kind's name or an option's key.
#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/dtype.h"
#include "loom/nn/options.h"

namespace loom {
class ConvPadding;
}

namespace loom::nn {

struct Init;
struct ActivationFn;

// How a field is read back: integer bounds (for integers and lists of them) and whether a file
// may lack it (then the struct's default stays: a field added after files were written).
struct LOOM_API Field {
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  bool optional = false;
  // A size or count read from a file: in [lo, 2^40], so no file asks for an absurd allocation.
  static constexpr int64_t kMaxSize = int64_t{1} << 40;
  static constexpr Field sizes(int64_t lo) { return {lo, kMaxSize, false}; }
  static constexpr Field range(int64_t lo, int64_t hi) { return {lo, hi, false}; }
  static constexpr Field may_be_absent() { return {INT64_MIN, INT64_MAX, true}; }
  constexpr Field absent_ok() const { return {lo, hi, true}; }
};

namespace detail {
// One overload per field type. A user-defined kind's attributes use these types.
LOOM_API void write_field(Options& o, const char* key, bool v);
LOOM_API void write_field(Options& o, const char* key, int64_t v);
LOOM_API void write_field(Options& o, const char* key, uint64_t v);
LOOM_API void write_field(Options& o, const char* key, double v);
LOOM_API void write_field(Options& o, const char* key, const std::string& v);
LOOM_API void write_field(Options& o, const char* key, const std::vector<int64_t>& v);
LOOM_API void write_field(Options& o, const char* key, DType v);
LOOM_API void write_field(Options& o, const char* key, const ConvPadding& v);  // integers, or "same" / "valid"
LOOM_API void write_field(Options& o, const char* key, const Init& v);         // {"kind", "a", "b"}
LOOM_API void write_field(Options& o, const char* key, const ActivationFn& v);  // its name

LOOM_API void read_field(const Options& o, const char* key, bool& v, const Field& f);
LOOM_API void read_field(const Options& o, const char* key, int64_t& v, const Field& f);
LOOM_API void read_field(const Options& o, const char* key, uint64_t& v, const Field& f);
LOOM_API void read_field(const Options& o, const char* key, double& v, const Field& f);
LOOM_API void read_field(const Options& o, const char* key, std::string& v, const Field& f);
LOOM_API void read_field(const Options& o, const char* key, std::vector<int64_t>& v, const Field& f);
LOOM_API void read_field(const Options& o, const char* key, DType& v, const Field& f);
LOOM_API void read_field(const Options& o, const char* key, ConvPadding& v, const Field& f);
LOOM_API void read_field(const Options& o, const char* key, Init& v, const Field& f);
LOOM_API void read_field(const Options& o, const char* key, ActivationFn& v, const Field& f);

LOOM_API bool same_field(bool a, bool b);
LOOM_API bool same_field(int64_t a, int64_t b);
LOOM_API bool same_field(uint64_t a, uint64_t b);
LOOM_API bool same_field(double a, double b);  // bitwise: NaN equals NaN, -0 differs from 0
LOOM_API bool same_field(const std::string& a, const std::string& b);
LOOM_API bool same_field(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
LOOM_API bool same_field(DType a, DType b);
LOOM_API bool same_field(const ConvPadding& a, const ConvPadding& b);
LOOM_API bool same_field(const Init& a, const Init& b);
LOOM_API bool same_field(const ActivationFn& a, const ActivationFn& b);  // the same function (ActivationFn::is)

// Visits a const struct's fields: `fields` is one member template for reading and writing, and
// the visitors given here only read.
template <class A, class Visit>
void visit_fields(const A& a, Visit&& visit) {
  const_cast<A&>(a).fields(visit);
}
}  // namespace detail

// The options a struct of attributes is saved as.
template <class A>
Options write_attributes(const A& a) {
  Options o;
  detail::visit_fields(a, [&](const char* key, const auto& v, Field = {}) { detail::write_field(o, key, v); });
  return o;
}

// The struct read back from options (ValueError, prefixed by the options' where(), naming the
// field and what would be valid); fields the options lack keep `defaults`' values when optional.
template <class A>
A read_attributes(const Options& o, A defaults = {}) {
  defaults.fields([&](const char* key, auto& v, Field f = {}) {
    if (f.optional && !o.has(key)) return;
    detail::read_field(o, key, v, f);
  });
  return defaults;
}

// Field by field equality.
template <class A>
bool same_attributes(const A& a, const A& b) {
  bool same = true;
  std::vector<const void*> theirs;
  detail::visit_fields(b, [&](const char*, const auto& v, Field = {}) { theirs.push_back(&v); });
  size_t i = 0;
  detail::visit_fields(a, [&](const char*, const auto& v, Field = {}) {
    using T = std::decay_t<decltype(v)>;
    same = same && detail::same_field(v, *static_cast<const T*>(theirs[i++]));
  });
  return same;
}

}  // namespace loom::nn
