// Scaled dot-product attention: the fused kernel of the backend (FlashAttention, forward and
// backward, ops/backend.h AttentionParams) with its own gradient rule, and the math form (a
// composite of matmul, softmax and dropout, differentiable through them) where the kernel does
// not apply and as the tests' reference.
#include "loom/ops/attention.h"

#include <cmath>
#include <limits>

#include "loom/core/grad_mode.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/nn.h"
#include "loom/ops/random.h"
#include "loom/ops/reduction.h"
#include "ops/attention_internal.h"
#include "ops/nn_internal.h"
#include "ops/registry_parts.h"

namespace loom {

namespace {

using detail::AttentionParams;
using detail::KernelSlot;

// The kernels' slots, declared beside their op (src/ops/backend.h, KernelSlot), filled by
// src/ops/cpu/attention_flash.cpp.
// Fused attention (FlashAttention): out (B, H, L, Ev) and lse (B, H, L; log-sum-exp of each
// row's scaled, masked scores; +inf for a row with every position masked, whose output is
// 0; NaN for a row with a NaN score) without forming the L x S scores; and its backward for gout (out's shape), recomputing
// the weights from lse: dq, dk, dv (q's, k's, v's shapes). Unfilled (if_filled): the op runs
// its math form.
constinit const KernelSlot<void(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                                const Tensor& v, const AttentionParams& p)>
    kAttentionForward{"attention.attention_forward"};
constinit const KernelSlot<void(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& gout,
                                const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                                const AttentionParams& p)>
    kAttentionBackward{"attention.attention_backward"};

constexpr const char* kOp = "scaled_dot_product_attention";

// With E = 0 every score is an empty sum, 0 (PyTorch scales q and k before their product, so
// its scores are 0 too, where 0 * 1/sqrt(0) would be NaN): softmax is then uniform.
double default_scale(std::optional<double> scale, int64_t E) {
  return scale ? *scale : E > 0 ? 1.0 / std::sqrt(static_cast<double>(E)) : 1.0;
}

// k or v with each head repeated over its group of query heads (torch's repeat_interleave).
Tensor repeat_heads(const Tensor& x, int64_t group) { return group == 1 ? x : repeat(x, group, x.ndim() - 3); }

}  // namespace

Tensor detail::scaled_dot_product_attention_math(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                                 bool is_causal, std::optional<double> scale, double dropout_p,
                                                 bool enable_gqa, Generator* generator) {
  const int64_t L = q.dim(-2), E = q.dim(-1), S = k.dim(-2);
  Tensor kk = k, vv = v;
  if (enable_gqa) {
    kk = repeat_heads(k, q.dim(-3) / k.dim(-3));
    vv = repeat_heads(v, q.dim(-3) / v.dim(-3));
  }
  Tensor scores = matmul(q, swapaxes(kk, -1, -2)) * default_scale(scale, E);
  const Tensor neg_inf = scalar_tensor(-std::numeric_limits<double>::infinity(), scores.dtype(), scores.device());
  if (is_causal) {
    Tensor rows = reshape(arange(L), {L, 1}), cols = reshape(arange(S), {1, S});
    scores = where(less_equal(cols, rows), scores, neg_inf);
  } else if (mask.defined()) {
    scores = mask.dtype() == DType::Bool ? where(mask, scores, neg_inf) : add(scores, mask);
  }
  Tensor weights;
  if (mask.defined()) {
    // A row whose every position is masked out takes weights 0 where softmax would give NaN
    // (PyTorch >= 2.5's rule, and the fused kernel's); its scores are zeroed first, so that no
    // NaN reaches the gradients either.
    const Tensor dead = all(equal(scores, neg_inf), -1, true), zero = scalar_tensor(0.0, scores.dtype(), scores.device());
    weights = where(dead, zero, softmax(where(dead, zero, scores), -1));
  } else {
    weights = softmax(scores, -1);  // (causally, row i always sees key 0)
  }
  if (dropout_p > 0) weights = dropout(weights, dropout_p, true, generator);
  return matmul(weights, vv);
}

namespace {

// The operands' sizes and batch shapes, checked: q (..., L, E), k (..., S, E), v (..., S, Ev),
// the batch axes broadcasting (with enable_gqa, k's and v's heads counted as q's).
struct AttentionShapes {
  int64_t L = 0, E = 0, S = 0, Ev = 0;
  Shape kb, vb;        // k's and v's batch axes (with enable_gqa, their head axis as q's)
  Shape batch;         // the broadcast batch axes
  Shape score_shape;   // batch, L, S
  int64_t group = 1;   // query heads per key / value head (enable_gqa)
  std::string shapes;  // " (q: ..., k: ..., v: ...)", for error messages
};

AttentionShapes check_operands(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p, bool enable_gqa) {
  const char* op = kOp;
  for (const Tensor* t : {&q, &k, &v}) detail::check_defined(*t, op);
  AttentionShapes a;
  a.shapes = " (q: " + describe(q) + ", k: " + describe(k) + ", v: " + describe(v) + ")";
  const std::string& shapes = a.shapes;
  const int64_t min_rank = enable_gqa ? 3 : 2;
  if (q.ndim() < min_rank || k.ndim() < min_rank || v.ndim() < min_rank)
    throw ShapeError(std::string(op) + (enable_gqa ? ": with enable_gqa, q, k and v must have at least 3 axes (..., heads, L, E), "
                                                     "(..., kv_heads, S, E), (..., kv_heads, S, Ev)"
                                                   : ": q, k and v must have at least 2 axes (..., L, E), (..., S, E), (..., S, Ev)") +
                     shapes);
  detail::check_float(q, op, "q");
  detail::check_same_dtype(q, k, op, "q", "k");
  detail::check_same_dtype(q, v, op, "q", "v");
  detail::check_same_device(q, k, op);
  detail::check_same_device(q, v, op);
  if (!(dropout_p >= 0.0 && dropout_p < 1.0))
    throw ValueError(std::string(op) + ": dropout_p must be in [0, 1), got " + std::to_string(dropout_p));
  a.L = q.dim(-2), a.E = q.dim(-1), a.S = k.dim(-2), a.Ev = v.dim(-1);
  if (k.dim(-1) != a.E) throw ShapeError(std::string(op) + ": q and k must have the same embedding size (last axis)" + shapes);
  if (v.dim(-2) != a.S) throw ShapeError(std::string(op) + ": k and v must have the same sequence length (axis -2)" + shapes);
  Shape qb(q.shape().begin(), q.shape().end() - 2);
  a.kb = Shape(k.shape().begin(), k.shape().end() - 2);
  a.vb = Shape(v.shape().begin(), v.shape().end() - 2);
  if (enable_gqa) {
    const int64_t H = q.dim(-3), Hkv = k.dim(-3);
    if (v.dim(-3) != Hkv) throw ShapeError(std::string(op) + ": k and v must have the same number of heads (axis -3)" + shapes);
    if (Hkv == 0 || H % Hkv != 0)
      throw ValueError(std::string(op) + ": with enable_gqa, q's " + std::to_string(H) + " heads (axis -3) must be a multiple of k's and v's " +
                       std::to_string(Hkv) + " (each key / value head serves a group of query heads)" + shapes);
    a.group = H / Hkv;
    a.kb.back() = a.vb.back() = H;  // for the batch rule: as if repeated
  }
  try {
    a.batch = broadcast_shapes(broadcast_shapes(qb, a.kb, op), a.vb, op);
  } catch (const ShapeError&) {
    throw ShapeError(std::string(op) + ": the batch axes of q, k and v do not broadcast" + shapes);
  }
  a.score_shape = a.batch;
  a.score_shape.push_back(a.L);
  a.score_shape.push_back(a.S);
  return a;
}

// A mask is bool (true = attend) or floating (added to the scores), on q's device, broadcasting
// to the scores, and not given with is_causal.
void check_mask(const Tensor& q, const Tensor& mask, bool is_causal, const AttentionShapes& a) {
  const char* op = kOp;
  if (!mask.defined()) return;
  if (is_causal)
    throw ValueError(std::string(op) + ": give either a mask or is_causal=true, not both (fold the causal mask "
                                       "into the explicit mask)");
  detail::check_same_device(q, mask, op);
  if (mask.dtype() != DType::Bool && !is_floating(mask.dtype()))
    throw DTypeError(std::string(op) + ": mask must be bool (true = attend) or floating (added to the scores), got " + describe(mask));
  bool ok = true;
  try {
    ok = broadcast_shapes(mask.shape(), a.score_shape, op) == a.score_shape;
  } catch (const ShapeError&) {
    ok = false;
  }
  if (!ok)
    throw ShapeError(std::string(op) + ": mask " + describe(mask) + " does not broadcast to the scores' shape " + shape_str(a.score_shape) +
                     a.shapes);
}

// Whether the backend's fused kernel applies: it has one, float32 or float64, no empty axis, and
// a floating mask of q's dtype that needs no gradient.
bool fused_applies(const Tensor& q, const Tensor& mask, const AttentionShapes& a) {
  const bool float_mask = mask.defined() && mask.dtype() != DType::Bool;
  return kAttentionForward.if_filled(q.device()) && kAttentionBackward.if_filled(q.device()) &&
         (q.dtype() == DType::Float32 || q.dtype() == DType::Float64) && a.L > 0 &&
         a.S > 0 && a.E > 0 && a.Ev > 0 && shape_numel(a.batch) > 0 &&
         !(float_mask && (mask.dtype() != q.dtype() || detail::needs_grad({&mask})));
}

// The mask as the kernel reads it: contiguous, with the offset of each (batch, head) row's
// scores and the strides along L and S of its broadcast view.
void set_mask(detail::AttentionParams& p, const Tensor& mask, const AttentionShapes& a) {
  p.mask = detail::contiguous_raw(mask.detach());
  const Tensor view = detail::broadcast_view(p.mask, a.score_shape);
  const size_t nb = a.batch.size();
  p.mask_offset.resize(static_cast<size_t>(p.B * p.H));
  for (int64_t bh = 0; bh < p.B * p.H; ++bh) {
    int64_t rest = bh, off = 0;
    for (size_t d = nb; d-- > 0;) {
      off += rest % a.batch[d] * view.strides()[d];
      rest /= a.batch[d];
    }
    p.mask_offset[static_cast<size_t>(bh)] = off;
  }
  p.mask_stride_l = view.strides()[nb];
  p.mask_stride_s = view.strides()[nb + 1];
}

// The spacing of the (rows, cols) planes of a view whose rows are contiguous and whose planes
// are evenly spaced (its batch axes flatten to one stride); 0 when it is packed already or
// another layout (then the caller copies).
int64_t plane_stride(const Tensor& t) {
  const Shape& sh = t.shape();
  const auto& st = t.strides();
  const size_t n = sh.size();
  if (t.is_contiguous() || n < 2 || st[n - 1] != 1 || st[n - 2] != sh[n - 1]) return 0;
  int64_t stride = 0, span = 0;  // the planes' spacing, and what the axes after the current one cover
  bool found = false;
  for (size_t i = n - 2; i-- > 0;) {
    if (sh[i] == 1) continue;
    if (st[i] <= 0) return 0;  // a broadcast axis: planes repeat
    if (!found) {
      found = true;
      stride = st[i];
      span = stride * sh[i];
    } else if (st[i] == span) {
      span *= sh[i];
    } else {
      return 0;
    }
  }
  return stride >= sh[n - 2] * sh[n - 1] ? stride : 0;
}

// The kernel's layout: q (B, H, L, E) and k, v (B, Hkv, S, E / Ev), contiguous (k and v may keep
// evenly spaced planes instead: plane_stride). The head axis
// is batch's last (H = 1 without one); k and v keep fewer heads than q without a copy when
// they have 1 (multi-query) or enable_gqa says so. Other broadcast batch axes are copied
// (O(S E) per batch item, never L x S); the rule sums their gradients back.
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool is_causal,
                       std::optional<double> scale, double dropout_p, bool enable_gqa, Generator* generator, const AttentionShapes& a) {
  const char* op = kOp;
  const Shape& batch = a.batch;
  const int64_t H = batch.empty() ? 1 : batch.back();
  const int64_t B = shape_numel(batch) / H;
  auto head_axis = [&](const Shape& s) { return s.empty() ? int64_t{1} : s.back(); };
  int64_t Hkv = H;
  if (enable_gqa) Hkv = H / a.group;
  else if (H > 1 && head_axis(a.kb) == 1 && head_axis(a.vb) == 1) Hkv = 1;
  Shape kv_batch = batch;
  if (!kv_batch.empty()) kv_batch.back() = Hkv;
  auto layout = [&](const Tensor& t, Shape s, int64_t rows, int64_t cols) {
    s.push_back(rows);
    s.push_back(cols);
    return detail::contiguous_raw(detail::broadcast_view(t.detach(), s));
  };
  // k or v read in place when its planes are evenly spaced with contiguous rows (a decoder's
  // cache prefix) and no gradient needs the packed copy; `stride` gets the planes' spacing.
  const bool grad = detail::needs_grad({&q, &k, &v});
  auto layout_kv = [&](const Tensor& t, Shape s, int64_t rows, int64_t cols, int64_t& stride) {
    s.push_back(rows);
    s.push_back(cols);
    const Tensor view = detail::broadcast_view(t.detach(), s);
    stride = grad ? 0 : plane_stride(view);
    return stride > 0 ? view : detail::contiguous_raw(view);
  };
  detail::AttentionParams p;
  p.B = B, p.H = H, p.Hkv = Hkv, p.L = a.L, p.S = a.S, p.E = a.E, p.Ev = a.Ev;
  p.scale = default_scale(scale, a.E);
  p.causal = is_causal;
  if (mask.defined()) set_mask(p, mask, a);
  if (dropout_p > 0) {
    p.dropout_p = dropout_p;
    p.dropout_key = (generator ? *generator : default_generator()).next_key();
  }
  const Tensor qc = layout(q, batch, a.L, a.E), kc = layout_kv(k, kv_batch, a.S, a.E, p.k_plane_stride),
               vc = layout_kv(v, kv_batch, a.S, a.Ev, p.v_plane_stride);
  // With more than one head the output is (..., L, H, Ev) in memory, returned as its
  // (..., H, L, Ev) view (AttentionParams::out_heads_inner): the layer's merge of the heads is
  // then a view, and one buffer, not two, stays saved for the backward (PyTorch's layout too).
  p.out_heads_inner = H > 1;
  Shape out_shape = batch, lse_shape = batch;
  if (p.out_heads_inner) out_shape.pop_back();
  out_shape.push_back(a.L);
  if (p.out_heads_inner) out_shape.push_back(H);
  out_shape.push_back(a.Ev);
  lse_shape.push_back(a.L);
  const Tensor buffer = detail::alloc(out_shape, q.dtype(), q.device(), op);
  Tensor lse = detail::alloc(lse_shape, q.dtype(), q.device(), op);
  kAttentionForward(q.device())(buffer, lse, qc, kc, vc, p);
  const int64_t n = static_cast<int64_t>(out_shape.size());
  const Tensor out = p.out_heads_inner ? swapaxes(buffer, n - 3, n - 2) : buffer;
  if (!grad) return out;
  return detail::record(op, {q, k, v}, out,
                        [p, qc = detail::save(qc), kc = detail::save(kc), vc = detail::save(vc), o = detail::save(out), lse](
                            const Tensor& g) {
                          const Tensor& qt = qc;
                          const Tensor& kt = kc;
                          const Tensor& vt = vc;
                          Tensor dq = detail::alloc(qt.shape(), qt.dtype(), qt.device());
                          Tensor dk = detail::alloc(kt.shape(), kt.dtype(), kt.device());
                          Tensor dv = detail::alloc(vt.shape(), vt.dtype(), vt.device());
                          // the kernel reads the output packed (B, H, L, Ev)
                          kAttentionBackward(qt.device())(dq, dk, dv, detail::contiguous_raw(g), qt, kt, vt,
                                                          detail::contiguous_raw(o), lse, p);
                          return std::vector<Tensor>{dq, dk, dv};
                        });
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                    bool is_causal, std::optional<double> scale, double dropout_p, bool enable_gqa,
                                    Generator* generator) {
  const AttentionShapes a = check_operands(q, k, v, dropout_p, enable_gqa);
  check_mask(q, mask, is_causal, a);
  if (!fused_applies(q, mask, a))
    return detail::scaled_dot_product_attention_math(q, k, v, mask, is_causal, scale, dropout_p, enable_gqa, generator);
  return fused_attention(q, k, v, mask, is_causal, scale, dropout_p, enable_gqa, generator, a);
}

}  // namespace loom

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> attention_ops() {
  return {
      {"scaled_dot_product_attention", "nn", true},
  };
}

}  // namespace loom::detail
