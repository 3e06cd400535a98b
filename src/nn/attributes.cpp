#include "loom/nn/attributes.h"

#include <cstring>

#include "loom/nn/layers.h"
#include "loom/ops/conv.h"
#include "nn/init_options.h"
#include "nn/options_json.h"

namespace loom::nn::detail {

void write_field(Options& o, const char* key, bool v) { o.set_bool(key, v); }
void write_field(Options& o, const char* key, int64_t v) { o.set_int(key, v); }
void write_field(Options& o, const char* key, uint64_t v) { o.set_uint(key, v); }
void write_field(Options& o, const char* key, double v) { o.set_float(key, v); }
void write_field(Options& o, const char* key, const std::string& v) { o.set_string(key, v); }
void write_field(Options& o, const char* key, const std::vector<int64_t>& v) { o.set_ints(key, v); }
void write_field(Options& o, const char* key, DType v) { o.set_string(key, dtype_name(v)); }
void write_field(Options& o, const char* key, const ConvPadding& v) {
  if (v.mode().empty()) o.set_ints(key, v.values());
  else o.set_string(key, v.mode());
}
void write_field(Options& o, const char* key, const Init& v) { o.set_object(key, init_options(v)); }
void write_field(Options& o, const char* key, const ActivationFn& v) { o.set_string(key, v.name); }

void read_field(const Options& o, const char* key, bool& v, const Field&) { v = o.get_bool(key); }
void read_field(const Options& o, const char* key, int64_t& v, const Field& f) { v = o.get_int(key, f.lo, f.hi); }
void read_field(const Options& o, const char* key, uint64_t& v, const Field&) { v = o.get_uint(key); }
void read_field(const Options& o, const char* key, double& v, const Field&) { v = o.get_float(key); }
void read_field(const Options& o, const char* key, std::string& v, const Field&) { v = o.get_string(key); }
void read_field(const Options& o, const char* key, std::vector<int64_t>& v, const Field& f) { v = o.get_ints(key, f.lo, f.hi); }
void read_field(const Options& o, const char* key, DType& v, const Field&) { v = dtype_option(o, key); }
void read_field(const Options& o, const char* key, ConvPadding& v, const Field& f) {
  if (o.is_string(key)) v = ConvPadding(o.get_string(key));
  else v = ConvPadding(o.get_ints(key, f.lo, f.hi));
}
void read_field(const Options& o, const char* key, Init& v, const Field&) { v = init_from(o, key); }
void read_field(const Options& o, const char* key, ActivationFn& v, const Field&) { v = activation_by_name(o.get_string(key)); }

bool same_field(bool a, bool b) { return a == b; }
bool same_field(int64_t a, int64_t b) { return a == b; }
bool same_field(uint64_t a, uint64_t b) { return a == b; }
bool same_field(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool same_field(const std::string& a, const std::string& b) { return a == b; }
bool same_field(const std::vector<int64_t>& a, const std::vector<int64_t>& b) { return a == b; }
bool same_field(DType a, DType b) { return a == b; }
bool same_field(const ConvPadding& a, const ConvPadding& b) { return a.mode() == b.mode() && a.values() == b.values(); }
bool same_field(const Init& a, const Init& b) { return a.kind == b.kind && same_field(a.a, b.a) && same_field(a.b, b.b); }
bool same_field(const ActivationFn& a, const ActivationFn& b) { return a.is(b); }

}  // namespace loom::nn::detail
