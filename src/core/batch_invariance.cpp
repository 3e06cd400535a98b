#include "loom/core/batch_invariance.h"

namespace loom {

namespace {
thread_local bool tls_batch_invariant = false;
}

bool batch_invariant() { return tls_batch_invariant; }
BatchInvariantScope::BatchInvariantScope(bool enabled) : previous_(tls_batch_invariant) { tls_batch_invariant = enabled; }
BatchInvariantScope::~BatchInvariantScope() { tls_batch_invariant = previous_; }

}  // namespace loom
