// oneDNN convolution plans (conv_onednn.h): the layouts asked for, the Winograd choice, building a
// primitive and its reorders, the process-wide plan cache, prepared inference weights and
// running a plan on the caller's buffers.
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

namespace loom::cpu::dnnl_conv {

bool plain_layouts() {
  static const bool plain = [] {
    const char* e = std::getenv("LOOM_DNNL_LAYOUT");
    return e && std::string(e) == "plain";
  }();
  return plain;
}

ConvDims conv_dims(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p) {
  ConvDims d;
  d.src = {x[0], x[1], x[2], x[3]};
  d.dst = {y[0], y[1], y[2], y[3]};
  if (p.groups == 1)
    d.wei = {w[0], w[1], w[2], w[3]};
  else
    d.wei = {p.groups, w[0] / p.groups, w[1], w[2], w[3]};
  d.strides = {p.stride[0], p.stride[1]};
  d.dilates = {p.dilation[0] - 1, p.dilation[1] - 1};  // oneDNN counts the gaps
  d.pad_l = {p.pad_l[0], p.pad_l[1]};
  d.pad_r = {p.pad_r[0], p.pad_r[1]};
  return d;
}

mdesc plain_md(const mdims& d) {
  switch (d.size()) {
    case 1: return mdesc(d, f32, ftag::a);
    case 4: return mdesc(d, f32, ftag::abcd);
    default: return mdesc(d, f32, ftag::abcde);
  }
}

// A plain operand as the caller holds it: dense, or strided (a row range of NCHW memory).
mdesc user_md(const mdims& d, const mdims& strides) { return strides.empty() ? plain_md(d) : mdesc(d, f32, strides); }

// Inference plans built on Winograd kernels, oneDNN's or Loom's (for tests).
std::atomic<int64_t> winograd_plans{0};

// Whether Winograd kernels may be used at all (LOOM_CONV_WINOGRAD=0 turns them off).
bool winograd_allowed() {
  static const bool on = [] {
    const char* e = std::getenv("LOOM_CONV_WINOGRAD");
    return !plain_layouts() && !(e && std::string(e) == "0");
  }();
  return on;
}
// Whether inference plans run 3x3, stride-1 convolutions on blocked activations with oneDNN's
// Winograd kernels (F(2x2, 3x3) and F(4x4, 3x3), AVX-512 only in oneDNN 2.6): about twice as
// fast as the direct kernels on ResNet's 3x3 layers, outputs within ~1e-6 of the largest
// (docs/kernels.md). Those kernels take nChw16c, so the activation layout becomes nChw16c where
// they exist.
bool winograd() {
  static const bool on = [] {
    if (!winograd_allowed()) return false;
    try {
      const mdims a{1, 64, 14, 14};
      const mdesc src(a, f32, ftag::any), wei({64, 64, 3, 3}, f32, ftag::any), dst = src;
      const dnnl::convolution_forward::primitive_desc pd(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd, src,
                                          wei, dst, {1, 1}, {1, 1}, {1, 1}),
          engine());
      return pd.dst_desc() == mdesc(a, f32, ftag::nChw16c);
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return on;
}

// The channel block of the activation layout the primitives pick (format "any") on this CPU:
// 8 or 16 when it is nChw8c / nChw16c, 1 when it is NHWC (oneDNN 2.6's brgconv kernels on
// AVX-512 pick it), 0 when it is something else, none, or layouts are plain.
int64_t blocked_channels() {
  static const int64_t block = []() -> int64_t {
    if (plain_layouts()) return 0;
    if (winograd()) return 16;
    try {
      const mdesc src({1, 64, 14, 14}, f32, ftag::any), wei({64, 64, 3, 3}, f32, ftag::any), dst = src;
      const dnnl::convolution_forward::primitive_desc pd(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                          wei, dst, {1, 1}, {0, 0}, {1, 1}, {1, 1}),
          engine());
      for (int64_t b : {8, 16})
        if (pd.dst_desc() == mdesc({1, 64, 14, 14}, f32, b == 8 ? ftag::nChw8c : ftag::nChw16c)) return b;
      if (pd.dst_desc() == mdesc({1, 64, 14, 14}, f32, ftag::nhwc)) return 1;
    } catch (const dnnl::error&) {
    }
    return 0;
  }();
  return block;
}

mdesc blocked_md(const mdims& d) {
  const int64_t b = blocked_channels();
  return mdesc(d, f32, b == 16 ? ftag::nChw16c : b == 8 ? ftag::nChw8c : ftag::nhwc);
}

// An inference convolution a Winograd kernel can take: between blocked activations, 3x3,
// stride 1, undilated, one group.
bool winograd_geometry(const ConvDims& d, const Epilogue& epi) {
  return epi.src_blocked && epi.dst_blocked && d.wei.size() == 4 && d.wei[2] == 3 && d.wei[3] == 3 &&
         d.strides == mdims{1, 1} && d.dilates == mdims{0, 0};
}

// The output tile of Loom's own Winograd kernels for this convolution, or 0 where the direct
// kernel is faster: F(4x4, 3x3) where it has enough 4x4 tiles to fill its 36 GEMMs' rows, else
// F(2x2, 3x3); neither where its transformed weights ((m+2)² x C x K floats, read from memory on
// every call) come to more than kMaxWeightBytesPerTile per output tile, since then the GEMMs
// stream weights for too few rows (one sample's 7x7 512-channel layers: 16.8 MB for 16 tiles,
// 4.6 ms against the direct kernel's 2.6 ms on a 2-core Intel Xeon capped to AVX2, 1 thread).
// LOOM_CONV_WINOGRAD_TILE=2 or 4 forces one (to compare, and to test the kernels on any
// geometry; docs/kernels.md).
int own_winograd_tile(const ConvDims& d) {
  static const int forced = [] {
    const char* e = std::getenv("LOOM_CONV_WINOGRAD_TILE");
    return e && std::string(e) == "2" ? 2 : e && std::string(e) == "4" ? 4 : 0;
  }();
  if (forced) return forced;
  // ResNet-18 capped to AVX2 (docs/kernels.md): from 49 tiles (one sample's 28x28 layers) F(4x4)
  // is faster; below (14x14 and 7x7 at batch 1) its GEMMs of 4 to 16 rows are not
  constexpr int64_t kMinTiles = 49;
  constexpr int64_t kMaxWeightBytesPerTile = 512 << 10;  // the break-even measured at 7x7, 512 channels
  auto tiles = [&](int64_t m) { return d.src[0] * ((d.dst[2] + m - 1) / m) * ((d.dst[3] + m - 1) / m); };
  auto weights_fit = [&](int64_t m) {
    return (m + 2) * (m + 2) * d.src[1] * d.dst[1] * 4 < kMaxWeightBytesPerTile * tiles(m);
  };
  if (tiles(4) >= kMinTiles && weights_fit(4)) return 4;
  return weights_fit(2) ? 2 : 0;
}

// Loom's own Winograd kernels (conv_winograd.cpp) where oneDNN has none (nChw8c, AVX2).
bool own_winograd(const ConvDims& d, const Epilogue& epi) {
  return winograd_geometry(d, epi) && winograd_allowed() && !winograd() && blocked_channels() == 8 &&
         d.src[1] % 8 == 0 && d.dst[1] % 8 == 0 && own_winograd_tile(d) != 0;
}

Layouts layouts(const mdims& src, bool inference) {
  if (plain_layouts()) return {true, true};
  if (src[1] >= 8) return {false, false};
  return {true, !inference || src[1] < 3};
}

mdesc want_md(const mdims& d, bool plain) { return plain ? plain_md(d) : mdesc(d, f32, ftag::any); }

Operand make_operand(int arg, const mdesc& user, const mdesc& prim, bool is_output) {
  Operand o;
  o.arg = arg;
  o.user = user;
  o.prim = prim;
  o.reorder = user != prim;
  if (o.reorder) {
    const auto pd = is_output ? dnnl::reorder::primitive_desc(engine(), prim, engine(), user, onednn::user_scratchpad())
                              : dnnl::reorder::primitive_desc(engine(), user, engine(), prim, onednn::user_scratchpad());
    o.convert = dnnl::reorder(pd);
    o.convert_scratch = pd.scratchpad_desc();
  }
  return o;
}

// forward_training for the training forward and as the backward passes' hint (a convolution
// keeps no workspace, so the backward needs nothing from the forward primitive itself);
// forward_inference, with the epilogue's post-ops, when no gradient will be taken.
dnnl::convolution_forward::primitive_desc forward_pd(const ConvDims& d, bool bias, bool inference, Epilogue epi) {
  const Layouts l = layouts(d.src, inference);
  // a few-channel image into an NHWC output is read as NHWC too: oneDNN 2.6 has only its
  // reference kernel for NCHW -> NHWC, while NHWC -> NHWC takes brgconv (as fast as the jit
  // kernel into nChw16c), and converting the image costs less than converting the output
  const bool nhwc_image = inference && l.src && !l.rest && epi.dst_blocked && blocked_channels() == 1;
  const mdesc src = epi.src_blocked || nhwc_image ? blocked_md(d.src) : want_md(d.src, l.src), wei = want_md(d.wei, l.rest),
              dst = epi.dst_blocked ? blocked_md(d.dst) : want_md(d.dst, l.rest);
  const bool wino = inference && winograd() && winograd_geometry(d, epi);
  const auto prop = inference ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training;
  dnnl::primitive_attr attr;  // a new one: attributes are shared handles, user_scratchpad() stays as it is
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (epi.sum || epi.relu) {
    dnnl::post_ops po;
    if (epi.sum) po.append_sum(1.0f);
    if (epi.relu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(po);
  }
  auto make = [&](dnnl::algorithm alg) -> dnnl::convolution_forward::primitive_desc {
    if (bias) {
      const mdesc b = plain_md({d.dst[1]});
      return {dnnl::convolution_forward::desc(prop, alg, src, wei, b, dst, d.strides, d.dilates, d.pad_l, d.pad_r),
              attr, engine()};
    }
    return {dnnl::convolution_forward::desc(prop, alg, src, wei, dst, d.strides, d.dilates, d.pad_l, d.pad_r), attr,
            engine()};
  };
  if (wino) try {
      auto pd = make(dnnl::algorithm::convolution_winograd);
      winograd_plans.fetch_add(1, std::memory_order_relaxed);
      return pd;
    } catch (const dnnl::error&) {  // not for this geometry or epilogue: the direct kernels
    }
  return make(dnnl::algorithm::convolution_direct);
}

std::shared_ptr<Plan> build(Kind kind, const ConvDims& d, bool bias, Epilogue epi) {
  auto plan = std::make_shared<Plan>();
  const bool plain = layouts(d.src, false).src;
  try {
    const bool forward = kind == Kind::Forward || kind == Kind::Inference;
    auto fwd = forward_pd(d, bias && forward, kind == Kind::Inference, kind == Kind::Inference ? epi : Epilogue{});
    const auto alg = dnnl::algorithm::convolution_direct;
    switch (kind) {
      case Kind::Forward:
      case Kind::Inference:
        plan->prim = dnnl::convolution_forward(fwd);
        plan->scratch = fwd.scratchpad_desc();
      {
        const mdesc src = epi.src_blocked ? blocked_md(d.src) : user_md(d.src, d.src_user_strides);
        const mdesc dst = epi.dst_blocked ? blocked_md(d.dst) : user_md(d.dst, d.dst_user_strides);
        plan->in[0] = make_operand(DNNL_ARG_SRC, src, fwd.src_desc(), false);
        plan->in[1] = make_operand(DNNL_ARG_WEIGHTS, plain_md(d.wei), fwd.weights_desc(), false);
        plan->out = make_operand(DNNL_ARG_DST, dst, fwd.dst_desc(), true);
        if (epi.sum && plan->out.reorder) plan->out_load = make_operand(DNNL_ARG_DST, dst, fwd.dst_desc(), false);
        plan->has_bias = bias;
        break;
      }
      case Kind::BackwardData: {
        dnnl::convolution_backward_data::primitive_desc pd(
            dnnl::convolution_backward_data::desc(alg, want_md(d.src, plain), want_md(d.wei, plain),
                                                  want_md(d.dst, plain), d.strides,
                                                  d.dilates, d.pad_l, d.pad_r),
            onednn::user_scratchpad(), engine(), fwd);
        plan->prim = dnnl::convolution_backward_data(pd);
        plan->scratch = pd.scratchpad_desc();
        plan->in[0] = make_operand(DNNL_ARG_DIFF_DST, plain_md(d.dst), pd.diff_dst_desc(), false);
        plan->in[1] = make_operand(DNNL_ARG_WEIGHTS, plain_md(d.wei), pd.weights_desc(), false);
        plan->out = make_operand(DNNL_ARG_DIFF_SRC, plain_md(d.src), pd.diff_src_desc(), true);
        break;
      }
      case Kind::BackwardWeights: {
        dnnl::convolution_backward_weights::primitive_desc pd(
            dnnl::convolution_backward_weights::desc(alg, want_md(d.src, plain), want_md(d.wei, plain),
                                                     want_md(d.dst, plain), d.strides,
                                                     d.dilates, d.pad_l, d.pad_r),
            onednn::user_scratchpad(), engine(), fwd);
        plan->prim = dnnl::convolution_backward_weights(pd);
        plan->scratch = pd.scratchpad_desc();
        plan->in[0] = make_operand(DNNL_ARG_DIFF_DST, plain_md(d.dst), pd.diff_dst_desc(), false);
        plan->in[1] = make_operand(DNNL_ARG_SRC, plain_md(d.src), pd.src_desc(), false);
        plan->out = make_operand(DNNL_ARG_DIFF_WEIGHTS, plain_md(d.wei), pd.diff_weights_desc(), true);
        break;
      }
    }
    plan->ok = true;
  } catch (const dnnl::error&) {
    plan->ok = false;  // no implementation: the caller falls back to the reference kernels
  }
  return plan;
}

std::string key_of(Kind kind, const ConvDims& d, bool bias, Epilogue epi, int threads) {
  std::string k = std::to_string(static_cast<int>(kind)) + (bias ? "b" : "n") + (epi.sum ? "s" : "") +
                  (epi.relu ? "r" : "") + (epi.src_blocked ? "B" : "") + (epi.dst_blocked ? "D" : "") + std::to_string(threads) + (plain_layouts() ? "p" : "a");
  for (const mdims* v : {&d.src, &d.wei, &d.dst, &d.strides, &d.dilates, &d.pad_l, &d.pad_r, &d.src_user_strides,
                         &d.dst_user_strides}) {
    k += '|';
    for (auto x : *v) k += std::to_string(x) + ',';
  }
  return k;
}

std::shared_ptr<const Plan> plan_for(const std::string& key, Kind kind, const ConvDims& d, bool bias, Epilogue epi) {
  static onednn::PlanCache<Plan> cache;
  return cache.get(key, [&] { return build(kind, d, bias, epi); });
}

// What prepared weights depend on besides their sources: the layout they are reordered to (not
// the batch size or thread count of the plan that asks, so batch slices and batch sizes share
// them), whether batch norm is folded in, and `part` (0 for a whole call, 1 + the first output
// channel for a part of run_by_channels). Layouts other than blocked fall back to the plan's key.
std::string weights_tag(const mdesc& md, const std::string& plan_key, bool folded, int64_t part) {
  const dnnl_memory_desc_t& m = md.data;
  std::string k = std::string(folded ? "f" : "u") + std::to_string(part) + '|';
  if (m.format_kind != dnnl_blocked || m.extra.flags != 0) return k + plan_key;
  const dnnl_blocking_desc_t& b = m.format_desc.blocking;
  for (int i = 0; i < m.ndims; ++i)
    k += std::to_string(m.dims[i]) + ':' + std::to_string(m.padded_dims[i]) + ':' + std::to_string(b.strides[i]) + ',';
  k += '/';
  for (int i = 0; i < b.inner_nblks; ++i) k += std::to_string(b.inner_blks[i]) + 'x' + std::to_string(b.inner_idxs[i]) + ',';
  return k;
}

// The weights (and, when folded, the bias) an inference plan runs with, in the primitive's
// layout: prepared once per layout and sources (onednn::prepared_weights), not on every call.
std::vector<Tensor> prepared(const Plan& plan, const std::string& plan_key, const WeightsIn& wi, int64_t part) {
  if (!plan.in[1].reorder && !wi.folded) return wi.plain();  // nothing to prepare
  return onednn::prepared_weights().get(weights_tag(plan.in[1].prim, plan_key, wi.folded, part), wi.sources, [&] {
    std::vector<Tensor> v = wi.plain();
    if (!wi.folded) v.resize(1);  // the caller's bias is passed on every call, not kept here
    const Operand& o = plan.in[1];
    if (o.reorder) {
      Tensor buf = detail::alloc({static_cast<int64_t>(o.prim.get_size())}, DType::UInt8, Device::cpu());
      std::vector<Tensor> keep;
      dnnl::stream& s = thread_stream();
      o.convert.execute(s, {{DNNL_ARG_FROM, dnnl::memory(o.user, engine(), v[0].data_ptr())},
                            {DNNL_ARG_TO, dnnl::memory(o.prim, engine(), buf.data_ptr())},
                            {DNNL_ARG_SCRATCHPAD, staging(o.convert_scratch, keep)}});
      s.wait();
      v[0] = buf;
    }
    return v;
  });
}

// Runs a plan on plain user buffers: reorders inputs in (in1 not when `in1_ready`: already in
// the primitive's layout), runs, reorders the output back.
void execute(const Plan& plan, void* in0, void* in1, void* out, void* bias, bool in1_ready) {
  dnnl::stream& s = thread_stream();
  std::unordered_map<int, dnnl::memory> args;
  std::vector<Tensor> keep;
  void* ins[2] = {in0, in1};
  for (int i = 0; i < 2; ++i) {
    const Operand& o = plan.in[i];
    if (i == 1 && in1_ready) {
      args.emplace(o.arg, dnnl::memory(o.prim, engine(), in1));
    } else if (o.reorder) {
      dnnl::memory m = staging(o.prim, keep);
      o.convert.execute(s, {{DNNL_ARG_FROM, dnnl::memory(o.user, engine(), ins[i])}, {DNNL_ARG_TO, m},
                            {DNNL_ARG_SCRATCHPAD, staging(o.convert_scratch, keep)}});
      args.emplace(o.arg, m);
    } else {
      args.emplace(o.arg, dnnl::memory(o.user, engine(), ins[i]));
    }
  }
  dnnl::memory user_out(plan.out.user, engine(), out);
  dnnl::memory prim_out = plan.out.reorder ? staging(plan.out.prim, keep) : user_out;
  if (plan.out_load.reorder)  // the sum post-op adds to what dst holds: the residual
    plan.out_load.convert.execute(s, {{DNNL_ARG_FROM, user_out}, {DNNL_ARG_TO, prim_out},
                                      {DNNL_ARG_SCRATCHPAD, staging(plan.out_load.convert_scratch, keep)}});
  args.emplace(plan.out.arg, prim_out);
  if (plan.has_bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(plain_md({plan.out.user.dims()[1]}), engine(), bias));
  args.emplace(DNNL_ARG_SCRATCHPAD, staging(plan.scratch, keep));
  plan.prim.execute(s, args);
  if (plan.out.reorder)
    plan.out.convert.execute(s, {{DNNL_ARG_FROM, prim_out}, {DNNL_ARG_TO, user_out},
                                 {DNNL_ARG_SCRATCHPAD, staging(plan.out.convert_scratch, keep)}});
  s.wait();
}

}  // namespace loom::cpu::dnnl_conv
