#pragma once
// What every oneDNN call of the CPU backend shares (conv_onednn.cpp, pool_onednn.cpp): one
// engine, a stream per calling thread, oneDNN's OpenMP team sized to Loom's thread count, and
// scratch buffers from Loom's caching allocator. Internal: include only from src/ops/cpu.
#include <vector>
#include <oneapi/dnnl/dnnl.hpp>

#include "loom/core/tensor.h"

namespace loom::cpu::onednn {

dnnl::engine& engine();
dnnl::stream& thread_stream();

// Sets the calling thread's OpenMP thread count (oneDNN's team) to loom::get_num_threads();
// oneDNN may tune a primitive for that count, so plan caches key on it too.
void follow_loom_threads();

// A buffer for a memory descriptor from Loom's caching allocator (oneDNN would otherwise
// allocate, and page-fault in, fresh memory on every call); `keep` holds it alive.
dnnl::memory staging(const dnnl::memory::desc& md, std::vector<Tensor>& keep);

}  // namespace loom::cpu::onednn
