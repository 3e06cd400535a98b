// float32 convolutions on oneDNN 2.x (Debian's libdnnl, OpenMP runtime).
//
// A Plan holds one primitive (forward, backward-data or backward-weights) for one geometry,
// built once and kept in a process-wide cache keyed by the geometry, the kind and the thread
// count (oneDNN may tune a primitive for the thread count it was made with). The primitive
// chooses its own memory layouts (format tag "any", usually blocked nChw16c / OIhw16i16o);
// Loom's tensors stay plain NCHW / OIHW, so the plan also holds the reorders between the two.
// LOOM_DNNL_LAYOUT=plain asks oneDNN for plain layouts instead (no reorders; gemm-based
// implementations), for comparison.
//
// Threads: the batch is split over Loom's pool and each slice runs on a one-thread OpenMP team
// (onednn::for_each_batch_slice); a batch smaller than the thread count runs on an OpenMP team
// of loom::get_num_threads() instead.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <oneapi/dnnl/dnnl.hpp>

#include "ops/cpu/nn_kernels.h"
#include "ops/cpu/onednn.h"
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

enum class Kind { Forward, BackwardData, BackwardWeights };

struct ConvDims {
  mdims src, wei, dst, strides, dilates, pad_l, pad_r;
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

// Blocked layouts pad channels to multiples of 8 / 16: for inputs with few channels (a first
// layer on images) the padded backward passes cost more than they gain, so those geometries
// stay plain (measured: N=128, C=1 -> 32, 28x28 forward+backward 3x faster plain).
bool use_plain(const mdims& src) { return plain_layouts() || src[1] < 8; }

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

dnnl::convolution_forward::primitive_desc forward_pd(const ConvDims& d, bool bias) {
  const bool plain = use_plain(d.src);
  const mdesc src = want_md(d.src, plain), wei = want_md(d.wei, plain), dst = want_md(d.dst, plain);
  const auto alg = dnnl::algorithm::convolution_direct;
  const auto prop = dnnl::prop_kind::forward_training;
  if (bias) {
    const mdesc b = plain_md({d.dst[1]});
    return {dnnl::convolution_forward::desc(prop, alg, src, wei, b, dst, d.strides, d.dilates, d.pad_l, d.pad_r),
            onednn::user_scratchpad(), engine()};
  }
  return {dnnl::convolution_forward::desc(prop, alg, src, wei, dst, d.strides, d.dilates, d.pad_l, d.pad_r),
          onednn::user_scratchpad(), engine()};
}

std::shared_ptr<Plan> build(Kind kind, const ConvDims& d, bool bias) {
  auto plan = std::make_shared<Plan>();
  const bool plain = use_plain(d.src);
  try {
    auto fwd = forward_pd(d, bias && kind == Kind::Forward);
    const auto alg = dnnl::algorithm::convolution_direct;
    switch (kind) {
      case Kind::Forward:
        plan->prim = dnnl::convolution_forward(fwd);
        plan->scratch = fwd.scratchpad_desc();
        plan->in[0] = make_operand(DNNL_ARG_SRC, plain_md(d.src), fwd.src_desc(), false);
        plan->in[1] = make_operand(DNNL_ARG_WEIGHTS, plain_md(d.wei), fwd.weights_desc(), false);
        plan->out = make_operand(DNNL_ARG_DST, plain_md(d.dst), fwd.dst_desc(), true);
        plan->has_bias = bias;
        break;
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

std::string key_of(Kind kind, const ConvDims& d, bool bias, int threads) {
  std::string k = std::to_string(static_cast<int>(kind)) + (bias ? "b" : "n") + std::to_string(threads) +
                  (plain_layouts() ? "p" : "a");
  for (const mdims* v : {&d.src, &d.wei, &d.dst, &d.strides, &d.dilates, &d.pad_l, &d.pad_r}) {
    k += '|';
    for (auto x : *v) k += std::to_string(x) + ',';
  }
  return k;
}

std::shared_ptr<const Plan> plan_for(Kind kind, const ConvDims& d, bool bias, int omp_threads) {
  static onednn::PlanCache<Plan> cache;
  return cache.get(key_of(kind, d, bias, omp_threads), [&] { return build(kind, d, bias); });
}

// Runs a plan on plain user buffers: reorders inputs in, runs, reorders the output back.
void execute(const Plan& plan, void* in0, void* in1, void* out, void* bias) {
  dnnl::stream& s = thread_stream();
  std::unordered_map<int, dnnl::memory> args;
  std::vector<Tensor> keep;
  void* ins[2] = {in0, in1};
  for (int i = 0; i < 2; ++i) {
    const Operand& o = plan.in[i];
    dnnl::memory user(o.user, engine(), ins[i]);
    if (o.reorder) {
      dnnl::memory m = staging(o.prim, keep);
      o.convert.execute(s, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, m},
                            {DNNL_ARG_SCRATCHPAD, staging(o.convert_scratch, keep)}});
      args.emplace(o.arg, m);
    } else {
      args.emplace(o.arg, user);
    }
  }
  dnnl::memory user_out(plan.out.user, engine(), out);
  dnnl::memory prim_out = plan.out.reorder ? staging(plan.out.prim, keep) : user_out;
  args.emplace(plan.out.arg, prim_out);
  if (plan.has_bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(plain_md({plan.out.user.dims()[1]}), engine(), bias));
  args.emplace(DNNL_ARG_SCRATCHPAD, staging(plan.scratch, keep));
  plan.prim.execute(s, args);
  if (plan.out.reorder)
    plan.out.convert.execute(s, {{DNNL_ARG_FROM, prim_out}, {DNNL_ARG_TO, user_out},
                                 {DNNL_ARG_SCRATCHPAD, staging(plan.out.convert_scratch, keep)}});
  s.wait();
}

int64_t per_sample(const mdims& d) { return d[1] * d[2] * d[3] * static_cast<int64_t>(sizeof(float)); }

// Runs one kind over batch slices (onednn::for_each_batch_slice): the batch-major operands are
// sliced; backward weights sums the slices' partial gradients in slice order.
bool run(Kind kind, const ConvDims& d, bool bias, void* in0, void* in1, void* out, void* b) {
  const int64_t n = d.src[0];
  const int64_t src_bytes = per_sample(d.src), dst_bytes = per_sample(d.dst);
  // bytes per sample of in0, in1 and out (0: not batch-major)
  int64_t step[3] = {0, 0, 0};
  switch (kind) {
    case Kind::Forward: step[0] = src_bytes, step[2] = dst_bytes; break;
    case Kind::BackwardData: step[0] = dst_bytes, step[2] = src_bytes; break;
    case Kind::BackwardWeights: step[0] = dst_bytes, step[1] = src_bytes; break;
  }
  int64_t wei_numel = 1;
  for (auto v : d.wei) wei_numel *= v;
  std::vector<Tensor> partial;  // backward weights: one gradient per slice after the first
  const int slices = onednn::batch_slices(n);
  if (kind == Kind::BackwardWeights)
    for (int s = 1; s < slices; ++s) partial.push_back(detail::alloc({wei_numel}, DType::Float32, Device::cpu()));
  const bool ok = onednn::for_each_batch_slice(n, [&](int slice, int64_t n0, int64_t n1, int omp_threads) {
    ConvDims ds = d;
    ds.src[0] = ds.dst[0] = n1 - n0;
    auto plan = plan_for(kind, ds, bias, omp_threads);
    if (!plan->ok) return false;
    auto at = [n0](void* p, int64_t bytes) { return static_cast<void*>(static_cast<char*>(p) + n0 * bytes); };
    void* o = out;
    if (kind == Kind::BackwardWeights && slice > 0) o = partial[static_cast<size_t>(slice - 1)].data_ptr();
    try {
      execute(*plan, at(in0, step[0]), at(in1, step[1]), step[2] ? at(out, step[2]) : o, b);
    } catch (const dnnl::error&) {
      return false;
    }
    return true;
  });
  if (!ok) return false;
  float* w = static_cast<float*>(out);
  for (const Tensor& t : partial) {
    const float* p = t.data<float>();
    for (int64_t i = 0; i < wei_numel; ++i) w[i] += p[i];
  }
  return true;
}

}  // namespace

bool conv2d_onednn(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p) {
  if (x.numel() == 0 || w.numel() == 0) return false;
  const ConvDims d = conv_dims(x.shape(), w.shape(), out.shape(), p);
  return run(Kind::Forward, d, bias.defined(), x.data_ptr(), w.data_ptr(), out.data_ptr(),
             bias.defined() ? bias.data_ptr() : nullptr);
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
