#pragma once
// Lets a backend (BLAS) follow the pool's thread count without core depending on it.
namespace loom::detail {
void set_thread_count_listener(void (*listener)(int));
}
