#include "loom/nn/mode.h"

namespace loom::nn {

namespace {
thread_local Mode tls_mode = Mode::Eval;
}

Mode current_mode() { return tls_mode; }
ModeScope::ModeScope(Mode mode) : previous_(tls_mode) { tls_mode = mode; }
ModeScope::~ModeScope() { tls_mode = previous_; }

}  // namespace loom::nn
