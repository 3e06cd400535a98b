// float32 average pooling on oneDNN 2.x: forward and backward primitives on plain NCHW
// buffers (no reorders), cached by geometry and thread count, run over batch slices in
// Loom's pool like the convolutions.
//
// Max pooling stays on Loom's own kernel (pool.cpp and simd/kernels.inc): oneDNN's max
// pooling skips NaN (its compare never takes one) where PyTorch and Loom propagate it, and
// Loom's vector kernel is as fast (docs/benchmarks.md).
#include <memory>
#include <string>
#include <vector>

#include "ops/cpu/nn_kernels.h"
#include "ops/cpu/onednn.h"

namespace loom::cpu {

namespace {

using mdims = dnnl::memory::dims;
using mdesc = dnnl::memory::desc;

struct AvgPlan {
  bool ok = false;
  dnnl::pooling_forward forward;
  dnnl::pooling_backward backward;
  mdesc src, dst, forward_scratch, backward_scratch;
};

// PyTorch's avg_pool2d as oneDNN geometry: nullopt-like `false` when it does not map (a
// divisor override, or count_include_pad with a ceil_mode window reaching past the right
// padding, whose divisor PyTorch cuts at the padding and oneDNN does not).
bool geometry(const Shape& x, const Shape& y, const Pool2dParams& p, mdims& pad_r) {
  if (p.divisor > 0 || p.dilation[0] != 1 || p.dilation[1] != 1) return false;
  pad_r.assign(2, 0);
  for (int i = 0; i < 2; ++i) {
    const int64_t in = x[2 + i], out = y[2 + i], k = p.kernel[i], s = p.stride[i], pl = p.pad[i];
    // the symmetric padding gives PyTorch's floor-mode size; otherwise the last window needs more
    if ((in + 2 * pl - k) / s + 1 == out) {
      pad_r[i] = pl;
    } else {
      pad_r[i] = (out - 1) * s + k - in - pl;
      if (pad_r[i] < 0 || (p.count_include_pad && pad_r[i] > pl)) return false;
    }
  }
  return true;
}

std::shared_ptr<const AvgPlan> build(const Shape& x, const Shape& y, const Pool2dParams& p, const mdims& pad_r) {
  auto plan = std::make_shared<AvgPlan>();
  const auto f32 = dnnl::memory::data_type::f32;
  const auto nchw = dnnl::memory::format_tag::nchw;
  plan->src = mdesc(mdims(x.begin(), x.end()), f32, nchw);
  plan->dst = mdesc(mdims(y.begin(), y.end()), f32, nchw);
  const auto alg = p.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                       : dnnl::algorithm::pooling_avg_exclude_padding;
  const mdims strides{p.stride[0], p.stride[1]}, kernel{p.kernel[0], p.kernel[1]}, pad_l{p.pad[0], p.pad[1]};
  try {
    // forward_training: the backward primitive needs a training-form hint (avg keeps no workspace)
    dnnl::pooling_forward::primitive_desc fpd(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, alg, plan->src, plan->dst, strides, kernel,
                                    pad_l, pad_r),
        onednn::user_scratchpad(), onednn::engine());
    plan->forward = dnnl::pooling_forward(fpd);
    plan->forward_scratch = fpd.scratchpad_desc();
    dnnl::pooling_backward::primitive_desc bpd(
        dnnl::pooling_backward::desc(alg, plan->src, plan->dst, strides, kernel, pad_l, pad_r),
        onednn::user_scratchpad(), onednn::engine(), fpd);
    plan->backward = dnnl::pooling_backward(bpd);
    plan->backward_scratch = bpd.scratchpad_desc();
    plan->ok = true;
  } catch (const dnnl::error&) {
    plan->ok = false;  // no implementation: the caller runs Loom's loops
  }
  return plan;
}

std::shared_ptr<const AvgPlan> plan_for(const Shape& x, const Shape& y, const Pool2dParams& p, const mdims& pad_r,
                                        int omp_threads) {
  static onednn::PlanCache<AvgPlan> cache;
  std::string key = std::to_string(omp_threads) + (p.count_include_pad ? "i" : "e");
  for (const int64_t v : {x[0], x[1], x[2], x[3], y[2], y[3], p.kernel[0], p.kernel[1], p.stride[0], p.stride[1],
                          p.pad[0], p.pad[1], pad_r[0], pad_r[1]})
    key += ',' + std::to_string(v);
  return cache.get(key, [&] { return build(x, y, p, pad_r); });
}

// Runs over batch slices (onednn::for_each_batch_slice) on plain NCHW buffers.
bool run(bool backward, const Shape& x, const Shape& y, const Pool2dParams& p, void* src, void* dst) {
  if (x[0] * x[1] == 0) return false;
  mdims pad_r;
  if (!geometry(x, y, p, pad_r)) return false;
  const int64_t src_bytes = x[1] * x[2] * x[3] * static_cast<int64_t>(sizeof(float));
  const int64_t dst_bytes = y[1] * y[2] * y[3] * static_cast<int64_t>(sizeof(float));
  return onednn::for_each_batch_slice(x[0], [&](int, int64_t n0, int64_t n1, int omp_threads) {
    Shape xs = x, ys = y;
    xs[0] = ys[0] = n1 - n0;
    auto plan = plan_for(xs, ys, p, pad_r, omp_threads);
    if (!plan->ok) return false;
    try {
      dnnl::stream& s = onednn::thread_stream();
      std::vector<Tensor> keep;
      const dnnl::memory ms(plan->src, onednn::engine(), static_cast<char*>(src) + n0 * src_bytes);
      const dnnl::memory md(plan->dst, onednn::engine(), static_cast<char*>(dst) + n0 * dst_bytes);
      if (backward)
        plan->backward.execute(s, {{DNNL_ARG_DIFF_DST, md}, {DNNL_ARG_DIFF_SRC, ms},
                                   {DNNL_ARG_SCRATCHPAD, onednn::staging(plan->backward_scratch, keep)}});
      else
        plan->forward.execute(s, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_DST, md},
                                  {DNNL_ARG_SCRATCHPAD, onednn::staging(plan->forward_scratch, keep)}});
      s.wait();
    } catch (const dnnl::error&) {
      return false;
    }
    return true;
  });
}

}  // namespace

bool avg_pool2d_onednn(const Tensor& out, const Tensor& x, const Pool2dParams& p) {
  return run(false, x.shape(), out.shape(), p, x.data_ptr(), out.data_ptr());
}

bool avg_pool2d_backward_onednn(const Tensor& gx, const Tensor& gy, const Pool2dParams& p) {
  return run(true, gx.shape(), gy.shape(), p, gx.data_ptr(), gy.data_ptr());
}

}  // namespace loom::cpu
