// The blocked activation layout of the oneDNN convolutions (conv_onednn.h): which layout a
// geometry gets, reorders between it and NCHW, and max pooling in it.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <oneapi/dnnl/dnnl.hpp>

#include "loom/core/parallel.h"
#include "ops/cpu/conv_winograd.h"
#include "ops/cpu/nn_kernels.h"
#include "ops/cpu/onednn.h"
#include "ops/cpu/simd/simd.h"
#include "ops/internal.h"
#include "ops/cpu/conv_onednn.h"
#include "ops/cpu/register.h"

namespace loom::cpu {

using namespace dnnl_conv;

int64_t conv2d_blocked_onednn(const Shape& x, const Shape& out, int64_t groups) {
  const int64_t b = blocked_channels();
  if (!b || groups != 1 || x.size() != 4 || out.size() != 4 || out[1] % b != 0) return 0;
  // NHWC with fewer samples than threads: one sample's output rows are split over the threads
  // (run_by_rows); any other such batch would run on an OpenMP team beside Loom's pool
  if (b == 1 && x[0] < get_num_threads() && (x[0] != 1 || out[2] < 2)) return 0;
  // an output the primitive would not block on its own (layouts(): few input channels) stays
  // plain; an NHWC one from a plain image reads the image as NHWC (forward_pd)
  return layouts({x[0], x[1], x[2], x[3]}, true).rest ? 0 : b;
}

// Over batch slices in Loom's pool, each on a one-thread OpenMP team, as the convolutions; a
// batch smaller than the thread count on one thread (a team of two would spin beside Loom's
// pool, as run_by_channels explains: ResNet-18 batch 1 at 2 threads took 68 ms of CPU, not 48.5).
void reorder_blocked_onednn(const Tensor& out, const Tensor& x, bool to_plain) {
  const Shape& s = x.shape();
  const int64_t bytes = s[1] * s[2] * s[3] * static_cast<int64_t>(sizeof(float));
  static onednn::PlanCache<Operand> cache;
  auto run = [&](int64_t n0, int64_t n1) {
    const mdims d{n1 - n0, s[1], s[2], s[3]};
    std::string key = to_plain ? "p" : "b";
    for (auto v : d) key += ',' + std::to_string(v);
    const auto r = cache.get(key, [&] {
      return std::make_shared<const Operand>(make_operand(DNNL_ARG_DST, plain_md(d), blocked_md(d), to_plain));
    });
    std::vector<Tensor> keep;
    dnnl::stream& st = thread_stream();
    void* from = static_cast<char*>(x.data_ptr()) + n0 * bytes;
    void* to = static_cast<char*>(out.data_ptr()) + n0 * bytes;
    if (!r->reorder) {  // the same memory either way (NHWC of a 1x1 image is NCHW)
      std::memcpy(to, from, static_cast<size_t>((n1 - n0) * bytes));
      return true;
    }
    r->convert.execute(st, {{DNNL_ARG_FROM, dnnl::memory(to_plain ? r->prim : r->user, engine(), from)},
                            {DNNL_ARG_TO, dnnl::memory(to_plain ? r->user : r->prim, engine(), to)},
                            {DNNL_ARG_SCRATCHPAD, staging(r->convert_scratch, keep)}});
    st.wait();
    return true;
  };
  if (onednn::batch_slices(s[0]) > 1) {
    onednn::for_each_batch_slice(s[0], [&](int, int64_t n0, int64_t n1, int) { return run(n0, n1); });
    return;
  }
  onednn::use_omp_threads(1);
  run(0, s[0]);
}

// Max pooling in the blocked layout, where every (sample, channel group) is an H x W image of
// vectors of `b` channels (b = C for NHWC): each output vector is the elementwise max of the
// window's input vectors; a window row is kw consecutive vectors, one max_rows_into call. Rows
// of output split over the pool. As max_pool2d: the first maximum in window order is kept, and
// a NaN, once taken, stays.
void max_pool2d_blocked(const Tensor& out, const Tensor& x, const Pool2dParams& p) {
  const Shape& s = x.shape();
  const int64_t c = s[1], h = s[2], w = s[3], oh = out.shape()[2], ow = out.shape()[3];
  const int64_t b = blocked_channels() == 1 ? c : blocked_channels();
  const int64_t groups = s[0] * (c / b);
  const float* xp = x.data<float>();
  float* yp = out.data<float>();
  const auto max_rows_into = simd::table().max_rows_into;
  parallel_for(0, groups * oh, std::max<int64_t>(1, 4096 / std::max<int64_t>(ow * b, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t g = r / oh, y = r % oh;
      const int64_t h0 = y * p.stride[0] - p.pad[0];
      for (int64_t xo = 0; xo < ow; ++xo) {
        float* o = yp + ((g * oh + y) * ow + xo) * b;
        std::fill(o, o + b, -std::numeric_limits<float>::infinity());
        const int64_t w0 = std::max<int64_t>(xo * p.stride[1] - p.pad[1], 0);
        const int64_t w1 = std::min(xo * p.stride[1] - p.pad[1] + p.kernel[1], w);
        for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(h0 + p.kernel[0], h); ++ih)
          max_rows_into(o, xp + ((g * h + ih) * w + w0) * b, w1 - w0, b, b);
      }
    }
  });
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/conv.cpp), with its signature, which the slot checks.
void add_conv_onednn_blocked_kernels(detail::Backend& b) {
  b.kernels.fill("conv.conv2d_blocked", &cpu::conv2d_blocked_onednn);
  b.kernels.fill("conv.reorder_blocked", &cpu::reorder_blocked_onednn);
  b.kernels.fill("conv.max_pool2d_blocked", &cpu::max_pool2d_blocked);
}

}  // namespace loom::cpu
