// The dashboard's checked request parameters and response helpers (src/ui/api.h).
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/json_util.h"
#include "core/utf8.h"
#include "ui/api.h"

namespace loom::ui::detail {

using loom::detail::quote_text;

void only_params(const Request& r, std::initializer_list<const char*> allowed) {
  for (const auto& kv : r.query) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || kv.first == a;
    if (ok) continue;
    std::string valid;
    for (const char* a : allowed) valid += (valid.empty() ? "" : ", ") + std::string(a);
    throw HttpError(400, "unknown parameter " + quote_text(kv.first) + " for " + r.path + " (valid: " +
                             (valid.empty() ? "none" : valid) + ")");
  }
}

std::optional<std::string> param(const Request& r, const std::string& name) {
  const auto it = r.query.find(name);
  if (it == r.query.end()) return std::nullopt;
  return it->second;
}

namespace {

std::optional<int64_t> to_int(const std::string& s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::string short_number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

}  // namespace

int64_t int_param(const Request& r, const std::string& name, int64_t fallback, int64_t lo, int64_t hi) {
  const auto text = param(r, name);
  if (!text) return fallback;
  const auto v = to_int(*text);
  if (!v || *v < lo || *v > hi)
    throw HttpError(400, "parameter '" + name + "' is " + quote_text(*text) + " (valid: an integer from " + std::to_string(lo) +
                             " to " + std::to_string(hi) + ")");
  return *v;
}

double real_param(const Request& r, const std::string& name, double fallback, double lo, double hi) {
  const auto text = param(r, name);
  if (!text) return fallback;
  double v = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || text->empty() || !(v >= lo && v <= hi))
    throw HttpError(400, "parameter '" + name + "' is " + quote_text(*text) + " (valid: a number from " + short_number(lo) + " to " +
                             short_number(hi) + ")");
  return v;
}

std::string choice_param(const Request& r, const std::string& name, const std::vector<std::string>& choices) {
  const auto text = param(r, name);
  if (!text) return choices.front();
  for (const auto& c : choices)
    if (*text == c) return c;
  std::string valid;
  for (const auto& c : choices) valid += (valid.empty() ? "" : ", ") + c;
  throw HttpError(400, "parameter '" + name + "' is " + quote_text(*text) + " (valid: " + valid + ")");
}

std::vector<int64_t> ids_param(const Request& r, const std::string& name, size_t most) {
  const auto text = param(r, name);
  if (!text || text->empty()) throw HttpError(400, "parameter '" + name + "' is missing (valid: run ids separated by commas)");
  std::vector<int64_t> ids;
  size_t i = 0;
  while (i <= text->size()) {
    const size_t j = std::min(text->find(',', i), text->size());
    const auto v = to_int(text->substr(i, j - i));
    if (!v || *v < 1)
      throw HttpError(400, "parameter '" + name + "' is " + quote_text(*text) + " (valid: run ids, positive integers separated by commas)");
    ids.push_back(*v);
    i = j + 1;
  }
  if (ids.size() > most)
    throw HttpError(400, "parameter '" + name + "' names " + std::to_string(ids.size()) + " runs (valid: at most " + std::to_string(most) + ")");
  return ids;
}

Response json_response(const nlohmann::json& body, int status) {
  // stored names may hold bytes that are not UTF-8: replaced, where dump() would throw
  return {status, "application/json", body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), {}};
}

std::string xml_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return loom::detail::is_utf8(o) ? o : loom::detail::escape_text(o);
}

nlohmann::json json_number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json parse_object(const std::string& text) {
  std::string error;
  auto j = loom::detail::parse_json(text, &error);
  return j && j->is_object() ? *j : nlohmann::json::object();
}

}  // namespace loom::ui::detail
