#pragma once
// What the dashboard's handlers share (src/ui/*.cpp): the typed refusal every handler throws
// for a bad request, checked parameters, and JSON and SVG text helpers.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "loom/store/store.h"
#include "loom/ui/dashboard.h"

namespace loom::ui::detail {

// A request the dashboard refuses: the HTTP status and a message naming what would be valid.
class HttpError : public std::runtime_error {
 public:
  HttpError(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// 400 naming the parameters the route takes when the request has another one.
void only_params(const Request& r, std::initializer_list<const char*> allowed);
std::optional<std::string> param(const Request& r, const std::string& name);
// An integer parameter in [lo, hi] (400 otherwise), `fallback` when absent.
int64_t int_param(const Request& r, const std::string& name, int64_t fallback, int64_t lo, int64_t hi);
// A number parameter in [lo, hi].
double real_param(const Request& r, const std::string& name, double fallback, double lo, double hi);
// One of `choices`, the first when absent.
std::string choice_param(const Request& r, const std::string& name, const std::vector<std::string>& choices);
// A comma-separated list of run ids (1 to `most`).
std::vector<int64_t> ids_param(const Request& r, const std::string& name, size_t most);

Response json_response(const nlohmann::json& body, int status = 200);
std::string xml_escape(const std::string& s);  // text and attribute values in HTML and SVG
nlohmann::json json_number(double v);          // null for NaN and infinities
nlohmann::json parse_object(const std::string& text);  // a stored JSON object ({} if unreadable)

// The handlers of each page's API; `p` is the path split at '/', after "api".
Response runs_api(store::Store& store, const Request& r, const std::vector<std::string>& p);
Response models_api(store::Store& store, const Request& r, const std::vector<std::string>& p, bool write);
Response datasets_api(store::Store& store, const Request& r, const std::vector<std::string>& p);
Response tasks_api(store::Store& store, const Request& r, const std::vector<std::string>& p, bool write);

// The embedded pages (src/ui/assets, compiled into assets.cpp by CMake): nullptr if none.
struct Asset {
  const char* content_type;
  const char* body;
};
const Asset* find_asset(const std::string& path);

}  // namespace loom::ui::detail
