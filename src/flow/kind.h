#pragma once
// The rule for task kinds, shared by the queue and the agent.
#include <string>

namespace loom::flow::detail {

// The rule for a task's kind and for a task's name in a plan (both go on command lines and in
// file names): 1 to 128 characters of [A-Za-z0-9_.:/-], as kKindRule says it in messages.
bool follows_kind_rule(const std::string& text);
inline constexpr const char* kKindRule = "1 to 128 characters of [A-Za-z0-9_.:/-]";
// ValueError unless `kind` follows the rule; `op` names the caller.
void check_kind(const char* op, const std::string& kind);

}  // namespace loom::flow::detail
