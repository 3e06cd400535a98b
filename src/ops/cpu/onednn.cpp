// The oneDNN engine, streams and thread setting shared by the CPU backend's oneDNN paths.
#include "ops/cpu/onednn.h"

#include <omp.h>

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

dnnl::memory staging(const dnnl::memory::desc& md, std::vector<Tensor>& keep) {
  keep.push_back(detail::alloc({static_cast<int64_t>(md.get_size())}, DType::UInt8, Device::cpu()));
  return dnnl::memory(md, engine(), keep.back().data_ptr());
}

}  // namespace loom::cpu::onednn
