#pragma once
// Small JSON writers shared by the reference dumpers (loom_opcheck, loom_difftest) and the case
// table's attrs: the manifest format read by check_ops.py / check_difftest.py.
#include <loom/core/shape.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace loom::reftest {

inline std::string jl(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}
inline std::string jb(bool b) { return b ? "true" : "false"; }
inline std::string jd(double d) {
  std::ostringstream o;
  o.precision(17);
  o << d;
  std::string s = o.str();
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // keep it a JSON float
  return s;
}
inline std::string jopt(std::optional<int64_t> v) { return v ? std::to_string(*v) : "null"; }

inline std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) {
    switch (ch) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          o += buf;
        } else {
          o += ch;
        }
    }
  }
  return o + "\"";
}

inline std::string json_shape(const Shape& s) { return jl(std::vector<int64_t>(s.begin(), s.end())); }

}  // namespace loom::reftest
