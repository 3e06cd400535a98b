#pragma once
// LOOM_API marks what Loom's libraries export: the public classes and functions declared under
// include/loom. The libraries are built with -fvisibility=hidden, so everything else (kernels,
// private helpers) stays inside them: a smaller symbol table, calls bound inside the library,
// and no program reaching what is not promised.
#define LOOM_API __attribute__((visibility("default")))
// LOOM_INTERNAL marks the few private declarations (src/ headers, not installed, no promise)
// that Loom's own other libraries and white-box tests reach: kernel counters, the oneDNN
// weight cache, the store's database layer. Exported like LOOM_API, listed by
// tests/visibility/check_exports.py.
#define LOOM_INTERNAL __attribute__((visibility("default")))
