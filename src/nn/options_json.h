#pragma once
// Options' JSON value, for the library's own kinds that store more than flat fields (a
// Constant's values, a Module's inner graph).
#include <nlohmann/json.hpp>

#include <string>

#include "loom/core/dtype.h"
#include "loom/nn/options.h"

namespace loom::nn {

struct Options::Impl {
  nlohmann::json value = nlohmann::json::object();
  std::string where = "Options";
};

inline nlohmann::json& json_of(Options& o) { return o.impl().value; }
inline const nlohmann::json& json_of(const Options& o) { return o.impl().value; }
// Options over a JSON object read from a file; ValueError (prefixed by `where`) if not an object.
Options options_from(const nlohmann::json& value, const std::string& where);
// The dtype named by field `key` (dtype_name spelling); ValueError listing the dtypes otherwise.
DType dtype_option(const Options& o, const std::string& key);
// A short description of a JSON value for error messages.
std::string json_brief(const nlohmann::json& v);

}  // namespace loom::nn
