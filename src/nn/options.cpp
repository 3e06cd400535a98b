#include "loom/nn/options.h"

#include "core/json_util.h"
#include "loom/core/dtype.h"
#include "loom/core/error.h"
#include "nn/options_json.h"

namespace loom::nn {

using json = nlohmann::json;

namespace {
std::string range_str(int64_t lo, int64_t hi) { return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]"; }
}  // namespace

std::string json_brief(const json& v) {
  if (v.is_structured()) return std::string("an ") + v.type_name();
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

Options options_from(const json& value, const std::string& where) {
  if (!value.is_object()) throw ValueError(where + " has options " + json_brief(value) + " (valid: a JSON object)");
  Options o;
  o.impl().value = value;
  o.impl().where = where;
  return o;
}

Options::Options() : impl_(std::make_unique<Impl>()) {}
Options::~Options() = default;
Options::Options(const Options& o) : impl_(std::make_unique<Impl>(*o.impl_)) {}
Options& Options::operator=(const Options& o) {
  if (this != &o) impl_ = std::make_unique<Impl>(*o.impl_);
  return *this;
}
Options::Options(Options&& o) noexcept : impl_(std::make_unique<Impl>()) { impl_.swap(o.impl_); }
Options& Options::operator=(Options&& o) noexcept {
  impl_.swap(o.impl_);
  return *this;
}

Options& Options::set_int(const std::string& k, int64_t v) { return impl_->value[k] = v, *this; }
Options& Options::set_uint(const std::string& k, uint64_t v) { return impl_->value[k] = v, *this; }
Options& Options::set_float(const std::string& k, double v) { return impl_->value[k] = loom::detail::json_float(v), *this; }
Options& Options::set_bool(const std::string& k, bool v) { return impl_->value[k] = v, *this; }
Options& Options::set_string(const std::string& k, const std::string& v) { return impl_->value[k] = v, *this; }
Options& Options::set_ints(const std::string& k, const std::vector<int64_t>& v) { return impl_->value[k] = v, *this; }
Options& Options::set_object(const std::string& k, const Options& v) { return impl_->value[k] = v.impl_->value, *this; }

const std::string& Options::where() const { return impl_->where; }
void Options::fail(const std::string& what) const { throw ValueError(impl_->where + " " + what); }

bool Options::has(const std::string& k) const { return impl_->value.contains(k); }
bool Options::is_string(const std::string& k) const { return has(k) && impl_->value.at(k).is_string(); }

namespace {
const json& member(const Options& o, const std::string& k) {
  const json& j = json_of(o);
  auto it = j.find(k);
  if (it == j.end()) o.fail("lacks the field '" + k + "'");
  return *it;
}
[[noreturn]] void wrong(const Options& o, const std::string& k, const json& v, const std::string& valid) {
  o.fail("field '" + k + "' is " + json_brief(v) + " (valid: " + valid + ")");
}
int64_t int_value(const Options& o, const std::string& k, const json& v, int64_t lo, int64_t hi) {
  const auto r = loom::detail::json_to_int(v, lo, hi);
  if (!r) wrong(o, k, v, "an integer in " + range_str(lo, hi));
  return *r;
}
}  // namespace

int64_t Options::get_int(const std::string& k, int64_t lo, int64_t hi) const { return int_value(*this, k, member(*this, k), lo, hi); }

uint64_t Options::get_uint(const std::string& k) const {
  const json& v = member(*this, k);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) wrong(*this, k, v, "an integer in [0, 2^64)");
  return v.get<uint64_t>();
}

double Options::get_float(const std::string& k) const {
  const json& v = member(*this, k);
  const auto r = loom::detail::json_to_float(v);
  if (!r) wrong(*this, k, v, loom::detail::json_float_help());
  return *r;
}

bool Options::get_bool(const std::string& k) const {
  const json& v = member(*this, k);
  if (!v.is_boolean()) wrong(*this, k, v, "true or false");
  return v.get<bool>();
}

std::string Options::get_string(const std::string& k) const {
  const json& v = member(*this, k);
  if (!v.is_string()) wrong(*this, k, v, "a string");
  return v.get<std::string>();
}

std::vector<int64_t> Options::get_ints(const std::string& k, int64_t lo, int64_t hi) const {
  const json& v = member(*this, k);
  if (!v.is_array()) wrong(*this, k, v, "a JSON array of integers in " + range_str(lo, hi));
  std::vector<int64_t> out;
  for (const json& x : v) out.push_back(int_value(*this, k, x, lo, hi));
  return out;
}

Options Options::get_object(const std::string& k) const {
  const json& v = member(*this, k);
  if (!v.is_object()) wrong(*this, k, v, "a JSON object");
  return options_from(v, impl_->where);
}

DType dtype_option(const Options& o, const std::string& key) {
  const std::string name = o.get_string(key);
  std::string valid;
  for (DType d : {Bool, UInt8, Int32, Int64, Float16, BFloat16, Float32, Float64}) {
    if (name == dtype_name(d)) return d;
    valid += (valid.empty() ? "" : ", ") + std::string(dtype_name(d));
  }
  o.fail("has unknown dtype '" + name + "' (valid: " + valid + ")");
}

std::string Options::to_json() const { return impl_->value.dump(); }

Options Options::from_json(const std::string& text, const std::string& where) {
  std::string error;
  const std::optional<json> j = detail::parse_json(text, &error);
  if (!j) throw ValueError(where + ": the options are not JSON Loom can read (" + error + ")");
  return options_from(*j, where);
}

}  // namespace loom::nn
