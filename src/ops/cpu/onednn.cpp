// The oneDNN engine, streams and thread setting shared by the CPU backend's oneDNN paths.
#include "ops/cpu/onednn.h"

#include <omp.h>

#include <atomic>

#include "loom/core/parallel.h"
#include "ops/internal.h"

namespace loom::cpu::onednn {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

void follow_loom_threads() {
  const int n = get_num_threads();
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
}

const dnnl::primitive_attr& user_scratchpad() {
  static const dnnl::primitive_attr attr = [] {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
  }();
  return attr;
}

int batch_slices(int64_t n) {
  const int t = get_num_threads();
  return t > 1 && n >= t ? t : 1;
}

bool for_each_batch_slice(int64_t n, const std::function<bool(int, int64_t, int64_t, int)>& f) {
  const int t = batch_slices(n);
  if (t == 1) {
    follow_loom_threads();
    return f(0, 0, n, get_num_threads());
  }
  std::atomic<bool> ok{true};
  parallel_for(0, t, 1, [&](int64_t b, int64_t e) {
    if (omp_get_max_threads() != 1) omp_set_num_threads(1);
    for (int64_t s = b; s < e; ++s)
      if (!f(static_cast<int>(s), n * s / t, n * (s + 1) / t, 1)) ok = false;
  });
  return ok;
}

dnnl::memory staging(const dnnl::memory::desc& md, std::vector<Tensor>& keep) {
  if (md.get_size() == 0) return dnnl::memory(md, engine(), DNNL_MEMORY_NONE);  // e.g. no scratchpad
  keep.push_back(detail::alloc({static_cast<int64_t>(md.get_size())}, DType::UInt8, Device::cpu()));
  return dnnl::memory(md, engine(), keep.back().data_ptr());
}

}  // namespace loom::cpu::onednn
