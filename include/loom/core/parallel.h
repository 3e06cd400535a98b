#pragma once
// One thread pool for all of Loom's CPU work. After a job, workers poll for ~100 us and then
// sleep on a condition variable (an idle pool uses no CPU); GEMM runs inside this pool.
#include <cstdint>
#include <functional>

#include "loom/core/api.h"

namespace loom {

LOOM_API void set_num_threads(int n);
LOOM_API int get_num_threads();
// For `processes` processes on one machine (dist::Context calls it with its local size): the
// pool takes the machine's cores divided among them, at least one, so that they do not
// oversubscribe the cores. No effect when the count was chosen (set_num_threads or
// LOOM_NUM_THREADS).
LOOM_API void share_cores(int processes);

// Splits [begin, end) into at most get_num_threads() chunks of at least `grain` items and runs
// fn(chunk_begin, chunk_end) on them; runs inline when the range is small or when called from
// inside a parallel region.
LOOM_API void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);
// Whether this thread is running chunks of a parallel_for split over the pool (the calling
// thread while it takes its share included).
LOOM_API bool in_parallel_region();

}  // namespace loom
