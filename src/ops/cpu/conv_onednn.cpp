// float32 convolutions on oneDNN 2.x (Debian's libdnnl, OpenMP runtime).
//
// A Plan holds one primitive (forward, inference, backward-data or backward-weights) for one geometry,
// built once and kept in a process-wide cache keyed by the geometry, the kind and the thread
// count (oneDNN may tune a primitive for the thread count it was made with). The primitive
// chooses its own memory layouts (format tag "any", usually blocked nChw16c / OIhw16i16o);
// Loom's tensors stay plain NCHW / OIHW, so the plan also holds the reorders between the two.
// LOOM_DNNL_LAYOUT=plain asks oneDNN for plain layouts instead (no reorders; gemm-based
// implementations), for comparison.
//
// Blocked activations (FusedConv::x_blocked / out_blocked, for the graph compiler): the fused
// entry may read x and write out (with the residual) in the blocked layout the primitive picks
// for activations (nChw8c on AVX2, nChw16c or NHWC on AVX-512; blocked_channels()), held in a
// float32 tensor of the logical NCHW shape. Only for channel counts that are multiples of the
// block, so the buffer has no padding and batch slices and, for nChw8c / nChw16c,
// run_by_channels' channel parts (multiples of 16 channels) sit at the same offsets as in NCHW;
// NHWC is offered only where run_by_channels does not apply (conv2d_blocked_onednn).
//
// Inference (Conv2dParams::inference, and the fused entry conv2d_fused_onednn): a
// forward_inference primitive, optionally with post-ops (sum for a residual, ReLU), whose
// weights are reordered (and batch norm folded in) once and kept in onednn::prepared_weights()
// while the weight tensors' storage versions stay the same. Between blocked activations a 3x3
// stride-1 convolution runs on Winograd kernels: oneDNN's on AVX-512 (which then make the
// layout nChw16c), Loom's own (conv_winograd.cpp) on nChw8c.
//
// Threads: the batch is split over Loom's pool and each slice runs on a one-thread OpenMP team
// (onednn::for_each_batch_slice); a batch smaller than the thread count runs on an OpenMP team
// of loom::get_num_threads() instead, except inference on one sample, whose output is split
// over Loom's pool: by channels (run_by_channels), or by rows where the layout is NHWC
// (run_by_rows).
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

namespace loom::cpu {

namespace {

using onednn::engine;
using onednn::staging;
using onednn::thread_stream;
using mdims = dnnl::memory::dims;
using mdesc = dnnl::memory::desc;
using ftag = dnnl::memory::format_tag;
constexpr auto f32 = dnnl::memory::data_type::f32;

bool plain_layouts() {
  static const bool plain = [] {
    const char* e = std::getenv("LOOM_DNNL_LAYOUT");
    return e && std::string(e) == "plain";
  }();
  return plain;
}

struct ConvDims {
  mdims src, wei, dst, strides, dilates, pad_l, pad_r;
  // an inference call's plain (NCHW) src / dst that is a row range of a larger tensor
  // (run_by_rows): its memory strides; empty for a whole, dense tensor
  mdims src_user_strides, dst_user_strides;
};

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

enum class Kind { Forward, BackwardData, BackwardWeights, Inference };

// The post-ops of an inference plan: dst = relu(conv + dst) with the residual already in dst;
// and whether src / dst (with the residual) are in the blocked activation layout.
struct Epilogue {
  bool sum = false, relu = false, src_blocked = false, dst_blocked = false;
};

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

// Which operands ask oneDNN for plain layouts ({src, weights and dst}). Blocked layouts pad
// channels to multiples of 8 / 16: for inputs with few channels (a first layer on images) the
// padded backward passes cost more than they gain, so training geometries stay plain there
// (measured: N=128, C=1 -> 32, 28x28 forward+backward 3x faster plain). Inference has no
// backward pass: from 3 input channels only the input stays plain, and the weights and output
// may be blocked, which lets oneDNN take its jit kernel for a plain few-channel input (jit:avx2
// on the ResNet stem instead of gemm:jit). With 1 input channel (measured; 2 is untested) the
// output's reorder back from blocked costs more than the kernel gains, so it stays plain
// (timings in docs/kernels.md).
struct Layouts {
  bool src, rest;
};
Layouts layouts(const mdims& src, bool inference) {
  if (plain_layouts()) return {true, true};
  if (src[1] >= 8) return {false, false};
  return {true, !inference || src[1] < 3};
}

mdesc want_md(const mdims& d, bool plain) { return plain ? plain_md(d) : mdesc(d, f32, ftag::any); }

// One operand of a plan: its oneDNN argument id, the user's plain layout, the primitive's
// layout and (when they differ) the reorder between them.
struct Operand {
  int arg = 0;
  mdesc user, prim;
  bool reorder = false;
  dnnl::primitive convert;
  mdesc convert_scratch;
};

struct Plan {
  bool ok = false;
  dnnl::primitive prim;
  mdesc scratch;  // the primitive's scratchpad (user-managed: see onednn::user_scratchpad)
  Operand in[2], out;
  Operand out_load;  // a sum post-op on a reordered output: the residual into the primitive's layout
  bool has_bias = false;
};

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

// Where an inference plan's weights come from: plain() makes them ({weights OIHW, bias}) from
// `sources`; folded: plain() computes new tensors (batch norm folded in) rather than returning
// the caller's weights and bias as they are.
struct WeightsIn {
  std::vector<Tensor> sources;
  std::function<std::vector<Tensor>()> plain;
  bool folded = false;
};

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
std::vector<Tensor> prepared(const Plan& plan, const std::string& plan_key, const WeightsIn& wi, int64_t part = 0) {
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

// A copy of rows [r0, r1) of a contiguous float32 tensor (its first axis).
Tensor rows(const Tensor& t, int64_t r0, int64_t r1) {
  const int64_t per = t.numel() / t.shape()[0];
  Tensor out = detail::alloc({(r1 - r0) * per}, DType::Float32, Device::cpu());
  std::memcpy(out.data_ptr(), t.data<float>() + r0 * per, static_cast<size_t>((r1 - r0) * per) * sizeof(float));
  return out;
}

// One part of a single sample's inference call split over Loom's pool: its geometry, plan and
// key, where it reads and writes (offsets in floats) and, for a channel split, its output
// channels.
struct SplitPart {
  ConvDims d;
  std::string key;
  std::shared_ptr<const Plan> plan;
  int64_t src_at = 0, dst_at = 0, c0 = 0, c1 = 0;
  int64_t in_row = 0, out_row = 0;  // the part's first input and output rows (copied parts)
};

// Builds every part's plan (for the one-thread OpenMP teams they run on) before any part runs,
// so that a geometry oneDNN cannot run is found having written nothing; false then.
bool plan_parts(std::vector<SplitPart>& ps, bool bias, Epilogue epi) {
  onednn::use_omp_threads(1);
  for (SplitPart& p : ps) {
    p.key = key_of(Kind::Inference, p.d, bias, epi, 1);
    p.plan = plan_for(p.key, Kind::Inference, p.d, bias, epi);
    if (!p.plan->ok) return false;
  }
  return true;
}

// Runs exec(part) for every part over Loom's pool, each on a one-thread OpenMP team; a oneDNN
// failure throws, naming how the call was split.
void run_parts(const std::vector<SplitPart>& ps, const char* split, const std::function<void(const SplitPart&)>& exec) {
  std::atomic<bool> ok{true};
  parallel_for(0, static_cast<int64_t>(ps.size()), 1, [&](int64_t p0, int64_t p1) {
    onednn::use_omp_threads(1);
    for (int64_t i = p0; i < p1; ++i) try {
        exec(ps[static_cast<size_t>(i)]);
      } catch (const dnnl::error&) {
        ok = false;
      }
  });
  if (!ok)
    throw Error(std::string("conv2d: oneDNN failed to run a convolution on part of its ") + split +
                " (one sample, split over the threads)");
}

// Inference on a single sample with several threads. One call on an OpenMP team of
// get_num_threads() would leave the team's workers spinning (libgomp's default wait policy)
// while Loom's pool runs the next op on the same cores, and Loom's workers spinning while the
// team runs: measured on 2 cores, ResNet-18 batch 1 runs alternated between ~40 and ~55 ms
// (steady 40 with OMP_WAIT_POLICY=PASSIVE). Instead the output channels are split over Loom's
// pool, each part (a multiple of 16 channels) its own convolution on a one-thread OpenMP team,
// so Loom's pool is the one owner of the cores. Returns false when it does not apply (groups,
// too few channels) or oneDNN has no implementation; the caller then runs the whole call.
bool run_by_channels(const ConvDims& d, bool bias, void* x, void* out, Epilogue epi, const WeightsIn& wi) {
  const int64_t oc = d.wei[0];
  const int64_t parts = std::min<int64_t>(get_num_threads(), oc / 16);
  if (d.src[0] != 1 || d.wei.size() != 4 || parts < 2) return false;
  // an NHWC output's channel parts are not contiguous (run_by_rows splits those)
  if (epi.dst_blocked && blocked_channels() == 1) return false;
  const int64_t plane = d.dst[2] * d.dst[3];
  std::vector<SplitPart> ps(static_cast<size_t>(parts));
  for (int64_t i = 0; i < parts; ++i) {
    SplitPart& p = ps[static_cast<size_t>(i)];
    p.c0 = oc * i / parts / 16 * 16;
    p.c1 = i + 1 == parts ? oc : oc * (i + 1) / parts / 16 * 16;
    p.d = d;
    p.d.wei[0] = p.d.dst[1] = p.c1 - p.c0;
    p.dst_at = p.c0 * plane;
  }
  if (!plan_parts(ps, bias, epi)) return false;
  run_parts(ps, "output channels", [&](const SplitPart& p) {
    // the part's rows of the weights and bias, prepared (and cached) as a whole call's are
    const WeightsIn slice{wi.sources,
                          [&] {
                            const std::vector<Tensor> v = wi.plain();
                            return std::vector<Tensor>{rows(v[0], p.c0, p.c1),
                                                       v.size() > 1 && v[1].defined() ? rows(v[1], p.c0, p.c1) : Tensor()};
                          },
                          true};
    const std::vector<Tensor> ready = prepared(*p.plan, p.key, slice, 1 + p.c0);
    execute(*p.plan, x, ready[0].data_ptr(), static_cast<float*>(out) + p.dst_at,
            ready[1].defined() ? ready[1].data_ptr() : nullptr, true);
  });
  return true;
}

// Inference on a single sample with several threads where the activations are NHWC (oneDNN
// 2.6's brgconv kernels on AVX-512): the output rows are split over Loom's pool, each part its
// own convolution on a one-thread OpenMP team, for the reason run_by_channels gives (whose
// channel parts are not contiguous in NHWC). A part reads the input rows its output rows need,
// the kernel's halo included, and is padded only where the image is. In NHWC a row range of one
// sample is contiguous; a plain NCHW src or dst (the stem's image) is passed with the whole
// tensor's strides. The parts run with the whole call's prepared weights (one layout, one tag).
// Returns false, having written nothing, when it does not apply or oneDNN has no implementation.
//
// In nChw16c a row range is one run per block of 16 channels, which oneDNN 2.6 does not take
// as a sub-memory for its Winograd kernels (it falls back to a reference kernel): there the
// parts are copied, their input rows (with the halo) into a dense buffer and their output rows
// (the residual first, for the sum post-op) back. That pays only where the channel split
// repeats Winograd's input transform on a large plane: the 56x56 64-channel layers of one
// ResNet-18 sample scaled 1.1x on 2 threads by channels (docs/benchmarks-history.md, the Xeon), so
// copied parts are used for oneDNN's Winograd geometries from 32 output rows, with part
// boundaries on multiples of 4 rows (F(4x4, 3x3)'s tile: the parts' tiles are the whole call's).
std::atomic<int64_t> row_split_calls{0};

bool run_by_rows(const ConvDims& d, bool bias, void* x, void* out, void* b, Epilogue epi, const WeightsIn& wi) {
  const int64_t oh = d.dst[2];
  const int64_t parts = std::min<int64_t>(get_num_threads(), oh);
  const int64_t block = blocked_channels();
  const bool copied = block == 16 && winograd() && winograd_geometry(d, epi) && oh >= 32 && d.src[1] % 16 == 0 &&
                      d.dst[1] % 16 == 0;
  if (d.src[0] != 1 || d.wei.size() != 4 || parts < 2 || (block != 1 && !copied)) return false;
  const int64_t ext = (d.wei[2] - 1) * (d.dilates[0] + 1) + 1;  // input rows one output row reads
  // NHWC (blocked) parts are dense; NCHW parts keep the whole tensor's strides
  const int64_t src_row = epi.src_blocked ? d.src[1] * d.src[3] : d.src[3];
  const int64_t dst_row = epi.dst_blocked ? d.dst[1] * d.dst[3] : d.dst[3];
  std::vector<SplitPart> ps(static_cast<size_t>(parts));
  auto boundary = [&](int64_t i) { return i == parts ? oh : copied ? oh * i / parts / 4 * 4 : oh * i / parts; };
  for (int64_t i = 0; i < parts; ++i) {
    const int64_t o0 = boundary(i), o1 = boundary(i + 1);
    if (o1 <= o0) return false;
    const int64_t first = o0 * d.strides[0] - d.pad_l[0], end = (o1 - 1) * d.strides[0] - d.pad_l[0] + ext;
    const int64_t i0 = std::clamp<int64_t>(first, 0, d.src[2]), i1 = std::clamp<int64_t>(end, 0, d.src[2]);
    if (i1 <= i0) return false;  // rows of padding only
    SplitPart& p = ps[static_cast<size_t>(i)];
    p.d = d;
    p.d.src[2] = i1 - i0;
    p.d.dst[2] = o1 - o0;
    p.d.pad_l[0] = i0 - first;
    p.d.pad_r[0] = end - i1;
    if (!epi.src_blocked) p.d.src_user_strides = {d.src[1] * d.src[2] * d.src[3], d.src[2] * d.src[3], d.src[3], 1};
    if (!epi.dst_blocked) p.d.dst_user_strides = {d.dst[1] * d.dst[2] * d.dst[3], d.dst[2] * d.dst[3], d.dst[3], 1};
    p.src_at = i0 * src_row;
    p.dst_at = o0 * dst_row;
    p.in_row = i0;
    p.out_row = o0;
  }
  if (!plan_parts(ps, bias, epi)) return false;
  // copied parts' dense buffers, allocated before any part runs (a failure writes nothing)
  std::vector<std::pair<Tensor, Tensor>> dense;
  if (copied)
    for (const SplitPart& p : ps)
      dense.emplace_back(detail::alloc({d.src[1] * p.d.src[2] * d.src[3]}, DType::Float32, Device::cpu()),
                         detail::alloc({d.dst[1] * p.d.dst[2] * d.dst[3]}, DType::Float32, Device::cpu()));
  run_parts(ps, "output rows", [&](const SplitPart& p) {
    const std::vector<Tensor> ready = prepared(*p.plan, p.key, wi);
    void* bb = wi.folded ? (ready[1].defined() ? ready[1].data_ptr() : nullptr) : b;
    if (!copied) {
      execute(*p.plan, static_cast<float*>(x) + p.src_at, ready[0].data_ptr(), static_cast<float*>(out) + p.dst_at, bb,
              true);
      return;
    }
    // rows [row, row + rows) of every 16-channel block of a (blocks, height, width, 16) tensor
    // to or from a dense (blocks, rows, width, 16) one
    auto copy_rows = [](float* whole, float* part, int64_t blocks, int64_t height, int64_t width, int64_t row,
                        int64_t rows, bool into_part) {
      const int64_t run = rows * width * 16;
      for (int64_t cb = 0; cb < blocks; ++cb) {
        float* w = whole + (cb * height + row) * width * 16;
        float* q = part + cb * run;
        std::memcpy(into_part ? q : w, into_part ? w : q, static_cast<size_t>(run) * sizeof(float));
      }
    };
    const int64_t in_blocks = d.src[1] / 16, out_blocks = d.dst[1] / 16;
    const auto& [src, dst] = dense[static_cast<size_t>(&p - ps.data())];
    copy_rows(static_cast<float*>(x), src.data<float>(), in_blocks, d.src[2], d.src[3], p.in_row, p.d.src[2], true);
    if (epi.sum)
      copy_rows(static_cast<float*>(out), dst.data<float>(), out_blocks, d.dst[2], d.dst[3], p.out_row, p.d.dst[2], true);
    execute(*p.plan, src.data_ptr(), ready[0].data_ptr(), dst.data_ptr(), bb, true);
    copy_rows(static_cast<float*>(out), dst.data<float>(), out_blocks, d.dst[2], d.dst[3], p.out_row, p.d.dst[2], false);
  });
  row_split_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

int64_t per_sample(const mdims& d) { return d[1] * d[2] * d[3] * static_cast<int64_t>(sizeof(float)); }

// Runs one kind over batch slices (onednn::for_each_batch_slice): the batch-major operands are
// sliced; backward weights sums the slices' partial gradients in slice order. Inference takes
// its weights (and bias) from `wi`.
bool run(Kind kind, const ConvDims& d, bool bias, void* in0, void* in1, void* out, void* b, Epilogue epi = {},
         const WeightsIn* wi = nullptr) {
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

int64_t conv2d_row_split_calls() { return row_split_calls.load(std::memory_order_relaxed); }
bool conv2d_winograd() { return winograd() || (winograd_allowed() && blocked_channels() == 8); }
int64_t conv2d_winograd_plans() { return winograd_plans.load(std::memory_order_relaxed); }

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

bool conv2d_backward_data_onednn(const Tensor& gx, const Tensor& gy, const Tensor& w, const Conv2dParams& p) {
  const ConvDims d = conv_dims(gx.shape(), w.shape(), gy.shape(), p);
  return run(Kind::BackwardData, d, false, gy.data_ptr(), w.data_ptr(), gx.data_ptr(), nullptr);
}

bool conv2d_backward_weights_onednn(const Tensor& gw, const Tensor& gy, const Tensor& x, const Conv2dParams& p) {
  const ConvDims d = conv_dims(x.shape(), gw.shape(), gy.shape(), p);
  return run(Kind::BackwardWeights, d, false, gy.data_ptr(), x.data_ptr(), gw.data_ptr(), nullptr);
}

}  // namespace loom::cpu
