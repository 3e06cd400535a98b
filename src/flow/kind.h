#pragma once
// The rule for task kinds, shared by the queue and the agent.
#include <string>

namespace loom::flow::detail {

// ValueError unless `kind` is 1 to 128 characters of [A-Za-z0-9_.:/-]; `op` names the caller.
void check_kind(const char* op, const std::string& kind);

}  // namespace loom::flow::detail
