#pragma once
// The JSON conventions of every file Loom writes and reads (docs/io.md, "JSON in Loom files"):
// - nesting deeper than kMaxJsonDepth is refused before a DOM is built, so that a hostile file
//   cannot exhaust the stack (in parsing, in dump() for an error message, or in destruction);
// - a non-finite float is written as the string "NaN", "Infinity" or "-Infinity" (JSON has no
//   such numbers and nlohmann would write null, which reads back as no number at all);
// - an integer is read only from a JSON integer within the valid range, never from a float
//   (1e300 converted to int64 is undefined behaviour).
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "loom/core/api.h"

namespace loom::detail {

constexpr size_t kMaxJsonDepth = 128;

// True when arrays/objects in `text` nest deeper than `limit` (strings are skipped; the text
// need not be valid JSON). Linear, no recursion.
LOOM_INTERNAL bool json_too_deep(std::string_view text, size_t limit = kMaxJsonDepth);

// Parses `text` after the depth check; on failure returns nullopt and sets *error to the reason
// (which names the limit). Never throws for bad text.
LOOM_INTERNAL std::optional<nlohmann::json> parse_json(std::string_view text, std::string* error);

// A float as JSON under the convention above (finite values exactly, as numbers).
LOOM_INTERNAL nlohmann::json json_float(double v);
// The same as JSON text ("%.17g" for finite values), for writers that build JSON by hand.
LOOM_INTERNAL std::string json_float_text(double v);
// A JSON number or one of "NaN", "Infinity", "-Infinity"; nullopt for anything else.
LOOM_INTERNAL std::optional<double> json_to_float(const nlohmann::json& j);
// A JSON integer (never a float) within [lo, hi]; nullopt otherwise.
LOOM_INTERNAL std::optional<int64_t> json_to_int(const nlohmann::json& j, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX);
// What json_to_float accepts, for error messages.
inline const char* json_float_help() { return "a number, or \"NaN\", \"Infinity\", \"-Infinity\""; }

}  // namespace loom::detail
