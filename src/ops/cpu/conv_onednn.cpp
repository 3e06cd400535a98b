// float32 convolutions on oneDNN (overview: conv_onednn.h): runs over batch slices, and the
// entries of nn_kernels.h: forward, inference and the fused entry (batch norm folded in), backward
// data and backward weights.
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

namespace loom::cpu::dnnl_conv {

int64_t per_sample(const mdims& d) { return d[1] * d[2] * d[3] * static_cast<int64_t>(sizeof(float)); }

// Runs one kind over batch slices (onednn::for_each_batch_slice): the batch-major operands are
// sliced; backward weights sums the slices' partial gradients in slice order. Inference takes
// its weights (and bias) from `wi`.
bool run(Kind kind, const ConvDims& d, bool bias, void* in0, void* in1, void* out, void* b, Epilogue epi,
         const WeightsIn* wi) {
  const int64_t n = d.src[0];
  const int64_t src_bytes = per_sample(d.src), dst_bytes = per_sample(d.dst);
  // bytes per sample of in0, in1 and out (0: not batch-major)
  int64_t step[3] = {0, 0, 0};
  switch (kind) {
    case Kind::Forward:
    case Kind::Inference: step[0] = src_bytes, step[2] = dst_bytes; break;
    case Kind::BackwardData: step[0] = dst_bytes, step[2] = src_bytes; break;
    case Kind::BackwardWeights: step[0] = dst_bytes, step[1] = src_bytes; break;
  }
  if (wi && onednn::batch_slices(n) == 1 &&
      (run_by_rows(d, bias, in0, out, b, epi, *wi) || run_by_channels(d, bias, in0, out, epi, *wi)))
    return true;
  int64_t wei_numel = 1;
  for (auto v : d.wei) wei_numel *= v;
  std::vector<Tensor> partial;  // backward weights: one gradient per slice after the first
  const int slices = onednn::batch_slices(n);
  if (kind == Kind::BackwardWeights)
    for (int s = 1; s < slices; ++s) partial.push_back(detail::alloc({wei_numel}, DType::Float32, Device::cpu()));
  // every slice's plan first, so that a geometry oneDNN cannot run returns false having written
  // nothing (the fused entry may write into its residual's buffer)
  std::vector<std::pair<std::string, std::shared_ptr<const Plan>>> plans(static_cast<size_t>(slices));
  const int omp_threads = slices > 1 ? 1 : get_num_threads();
  onednn::use_omp_threads(omp_threads);  // as for_each_batch_slice will run them
  for (int s = 0; s < slices; ++s) {
    ConvDims ds = d;
    ds.src[0] = ds.dst[0] = n * (s + 1) / slices - n * s / slices;
    const std::string key = key_of(kind, ds, bias, epi, omp_threads);
    auto plan = plan_for(key, kind, ds, bias, epi);
    if (!plan->ok) return false;
    plans[static_cast<size_t>(s)] = {key, plan};
  }
  const bool ok = onednn::for_each_batch_slice(n, [&](int slice, int64_t n0, int64_t, int) {
    const auto& [key, plan] = plans[static_cast<size_t>(slice)];
    auto at = [n0](void* p, int64_t bytes) { return static_cast<void*>(static_cast<char*>(p) + n0 * bytes); };
    void* o = out;
    if (kind == Kind::BackwardWeights && slice > 0) o = partial[static_cast<size_t>(slice - 1)].data_ptr();
    try {
      void* w = in1;
      void* bb = b;
      std::vector<Tensor> ready;
      if (wi) {
        ready = prepared(*plan, key, *wi);
        w = ready[0].data_ptr();
        if (wi->folded) bb = ready[1].defined() ? ready[1].data_ptr() : nullptr;
      }
      execute(*plan, at(in0, step[0]), step[1] ? at(w, step[1]) : w, step[2] ? at(out, step[2]) : o, bb, wi != nullptr);
    } catch (const dnnl::error&) {
      return false;
    }
    return true;
  });
  if (!ok) throw Error("conv2d: oneDNN failed to run a convolution it had accepted (" + plans[0].first + ")");
  float* w = static_cast<float*>(out);
  for (const Tensor& t : partial) {
    const float* p = t.data<float>();
    for (int64_t i = 0; i < wei_numel; ++i) w[i] += p[i];
  }
  return true;
}

namespace {

// Batch norm with running statistics folded into the weights and bias of a convolution with
// `oc` output channels: w' = w * s, b' = (b - mean) * s + beta with s = gamma / sqrt(var + eps)
// per output channel (in double, rounded once).
std::vector<Tensor> fold_batch_norm(const Tensor& w, const Tensor& bias, const FusedConv& e) {
  const int64_t oc = w.shape()[0], per = w.numel() / std::max<int64_t>(oc, 1);
  Tensor wf = detail::alloc(w.shape(), DType::Float32, Device::cpu());
  Tensor bf = detail::alloc({oc}, DType::Float32, Device::cpu());
  const float* wp = w.data<float>();
  float* wo = wf.data<float>();
  float* bo = bf.data<float>();
  auto at = [](const Tensor& t, int64_t c, double dflt) { return t.defined() ? static_cast<double>(t.data<float>()[c]) : dflt; };
  for (int64_t c = 0; c < oc; ++c) {
    const double s = at(e.bn_weight, c, 1.0) / std::sqrt(at(e.bn_var, c, 1.0) + e.bn_eps);
    for (int64_t i = 0; i < per; ++i) wo[c * per + i] = static_cast<float>(wp[c * per + i] * s);
    bo[c] = static_cast<float>((at(bias, c, 0.0) - at(e.bn_mean, c, 0.0)) * s + at(e.bn_bias, c, 0.0));
  }
  return {wf, bf};
}

}  // namespace

}  // namespace loom::cpu::dnnl_conv

namespace loom::cpu {

using namespace dnnl_conv;

bool conv2d_onednn(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p) {
  if (x.numel() == 0 || w.numel() == 0) return false;
  const ConvDims d = conv_dims(x.shape(), w.shape(), out.shape(), p);
  void* b = bias.defined() ? bias.data_ptr() : nullptr;
  if (!p.inference) return run(Kind::Forward, d, bias.defined(), x.data_ptr(), w.data_ptr(), out.data_ptr(), b);
  const WeightsIn wi{{w, bias}, [&] { return std::vector<Tensor>{w, bias}; }, false};
  return run(Kind::Inference, d, bias.defined(), x.data_ptr(), w.data_ptr(), out.data_ptr(), b, {}, &wi);
}

bool conv2d_fused_onednn(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                         const FusedConv& e) {
  if (out.dtype() != DType::Float32 || x.numel() == 0 || w.numel() == 0 || out.numel() == 0) return false;
  const ConvDims d = conv_dims(x.shape(), w.shape(), out.shape(), p);
  const bool fold = e.bn_mean.defined();
  const WeightsIn wi{{w, bias, e.bn_weight, e.bn_bias, e.bn_mean, e.bn_var},
                     [&] { return fold ? fold_batch_norm(w, bias, e) : std::vector<Tensor>{w, bias}; }, fold};
  if ((e.x_blocked || e.out_blocked) && (p.groups != 1 || !blocked_channels())) return false;
  // the sum post-op adds to what out holds: the residual (already there when out is its buffer)
  if (e.residual.defined() && e.residual.data_ptr() != out.data_ptr())
    std::memcpy(out.data_ptr(), e.residual.data_ptr(), out.nbytes());
  const Epilogue epi{e.residual.defined(), e.relu, e.x_blocked, e.out_blocked};
  if (own_winograd(d, epi)) {
    // the transformed weights (and a folded bias), prepared once per weights' version
    const int m = own_winograd_tile(d);
    const std::string tag = "wino-f" + std::to_string(m) + (fold ? "f" : "u");
    const std::vector<Tensor> prep = onednn::prepared_weights().get(tag, wi.sources, [&] {
      std::vector<Tensor> v = wi.plain();
      winograd_plans.fetch_add(1, std::memory_order_relaxed);
      if (fold) return std::vector<Tensor>{winograd_weights(v[0], m), v[1].contiguous()};
      return std::vector<Tensor>{winograd_weights(v[0], m)};
    });
    const Tensor keep_bias = fold ? prep[1] : bias.defined() ? bias.contiguous() : Tensor();
    conv2d_winograd(out, x, prep[0], keep_bias.defined() ? keep_bias.data<float>() : nullptr, 8, m, d.pad_l[0],
                    d.pad_l[1], epi.sum, epi.relu);
    return true;
  }
  return run(Kind::Inference, d, fold || bias.defined(), x.data_ptr(), w.data_ptr(), out.data_ptr(),
             bias.defined() ? bias.data_ptr() : nullptr, epi, &wi);
}

bool conv2d_winograd() { return winograd() || (winograd_allowed() && blocked_channels() == 8); }
int64_t conv2d_winograd_plans() { return winograd_plans.load(std::memory_order_relaxed); }

bool conv2d_backward_data_onednn(const Tensor& gx, const Tensor& gy, const Tensor& w, const Conv2dParams& p) {
  const ConvDims d = conv_dims(gx.shape(), w.shape(), gy.shape(), p);
  return run(Kind::BackwardData, d, false, gy.data_ptr(), w.data_ptr(), gx.data_ptr(), nullptr);
}

bool conv2d_backward_weights_onednn(const Tensor& gw, const Tensor& gy, const Tensor& x, const Conv2dParams& p) {
  const ConvDims d = conv_dims(x.shape(), gw.shape(), gy.shape(), p);
  return run(Kind::BackwardWeights, d, false, gy.data_ptr(), x.data_ptr(), gw.data_ptr(), nullptr);
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/conv.cpp), with its signature, which the slot checks.
void add_conv_onednn_kernels(detail::Backend& b) {
  b.kernels.fill("conv.conv2d_fused", &cpu::conv2d_fused_onednn);
}

}  // namespace loom::cpu
