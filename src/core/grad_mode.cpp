#include "loom/core/grad_mode.h"

namespace loom {

namespace {
thread_local bool tls_grad_enabled = true;
}

bool grad_enabled() { return tls_grad_enabled; }
void set_grad_enabled(bool enabled) { tls_grad_enabled = enabled; }
GradModeScope::GradModeScope(bool enabled) : previous_(tls_grad_enabled) { tls_grad_enabled = enabled; }
GradModeScope::~GradModeScope() { tls_grad_enabled = previous_; }

}  // namespace loom
