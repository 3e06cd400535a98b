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

namespace loom {

namespace {

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
  Tensor weights = softmax(scores, -1);
  if (dropout_p > 0) weights = dropout(weights, dropout_p, true, generator);
  return matmul(weights, vv);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                    bool is_causal, std::optional<double> scale, double dropout_p, bool enable_gqa,
                                    Generator* generator) {
  const char* op = kOp;
  for (const Tensor* t : {&q, &k, &v}) detail::check_defined(*t, op);
  const std::string shapes =
      " (q: " + describe(q) + ", k: " + describe(k) + ", v: " + describe(v) + ")";
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
  const int64_t L = q.dim(-2), E = q.dim(-1), S = k.dim(-2), Ev = v.dim(-1);
  if (k.dim(-1) != E)
    throw ShapeError(std::string(op) + ": q and k must have the same embedding size (last axis)" + shapes);
  if (v.dim(-2) != S)
    throw ShapeError(std::string(op) + ": k and v must have the same sequence length (axis -2)" + shapes);
  Shape qb(q.shape().begin(), q.shape().end() - 2), kb(k.shape().begin(), k.shape().end() - 2),
      vb(v.shape().begin(), v.shape().end() - 2);
  int64_t group = 1;  // query heads per key / value head (enable_gqa)
  if (enable_gqa) {
    const int64_t H = q.dim(-3), Hkv = k.dim(-3);
    if (v.dim(-3) != Hkv)
      throw ShapeError(std::string(op) + ": k and v must have the same number of heads (axis -3)" + shapes);
    if (Hkv == 0 || H % Hkv != 0)
      throw ValueError(std::string(op) + ": with enable_gqa, q's " + std::to_string(H) + " heads (axis -3) must be a multiple of k's and v's " +
                       std::to_string(Hkv) + " (each key / value head serves a group of query heads)" + shapes);
    group = H / Hkv;
    kb.back() = vb.back() = H;  // for the batch rule: as if repeated
  }
  Shape batch;
  try {
    batch = broadcast_shapes(broadcast_shapes(qb, kb, op), vb, op);
  } catch (const ShapeError&) {
    throw ShapeError(std::string(op) + ": the batch axes of q, k and v do not broadcast" + shapes);
  }
  Shape score_shape = batch;
  score_shape.push_back(L);
  score_shape.push_back(S);
  if (mask.defined()) {
    if (is_causal)
      throw ValueError(std::string(op) + ": give either a mask or is_causal=true, not both (fold the causal mask "
                                         "into the explicit mask)");
    detail::check_same_device(q, mask, op);
    if (mask.dtype() != DType::Bool && !is_floating(mask.dtype()))
      throw DTypeError(std::string(op) + ": mask must be bool (true = attend) or floating (added to the scores), got " +
                       describe(mask));
    bool ok = true;
    try {
      ok = broadcast_shapes(mask.shape(), score_shape, op) == score_shape;
    } catch (const ShapeError&) {
      ok = false;
    }
    if (!ok)
      throw ShapeError(std::string(op) + ": mask " + describe(mask) + " does not broadcast to the scores' shape " +
                       shape_str(score_shape) + shapes);
  }

  const auto& be = detail::backend(q.device());
  const bool float_mask = mask.defined() && mask.dtype() != DType::Bool;
  const bool fused = be.attention_forward && be.attention_backward &&
                     (q.dtype() == DType::Float32 || q.dtype() == DType::Float64) && L > 0 && S > 0 && E > 0 && Ev > 0 &&
                     shape_numel(batch) > 0 && !(float_mask && (mask.dtype() != q.dtype() || detail::needs_grad({&mask})));
  if (!fused) return detail::scaled_dot_product_attention_math(q, k, v, mask, is_causal, scale, dropout_p, enable_gqa, generator);

  // The kernel's layout: q (B, H, L, E) and k, v (B, Hkv, S, E / Ev), contiguous. The head axis
  // is batch's last (H = 1 without one); k and v keep fewer heads than q without a copy when
  // they have 1 (multi-query) or enable_gqa says so. Other broadcast batch axes are copied
  // (O(S E) per batch item, never L x S); the rule sums their gradients back.
  const int64_t H = batch.empty() ? 1 : batch.back();
  const int64_t B = shape_numel(batch) / H;
  auto head_axis = [&](const Shape& s) { return s.empty() ? int64_t{1} : s.back(); };
  int64_t Hkv = H;
  if (enable_gqa) Hkv = H / group;
  else if (H > 1 && head_axis(kb) == 1 && head_axis(vb) == 1) Hkv = 1;
  Shape kv_batch = batch;
  if (!kv_batch.empty()) kv_batch.back() = Hkv;
  auto layout = [&](const Tensor& t, Shape s, int64_t rows, int64_t cols) {
    s.push_back(rows);
    s.push_back(cols);
    return detail::contiguous_raw(detail::broadcast_view(t.detach(), s));
  };
  detail::AttentionParams p;
  p.B = B, p.H = H, p.Hkv = Hkv, p.L = L, p.S = S, p.E = E, p.Ev = Ev;
  p.scale = default_scale(scale, E);
  p.causal = is_causal;
  if (mask.defined()) {
    p.mask = detail::contiguous_raw(mask.detach());
    const Tensor view = detail::broadcast_view(p.mask, score_shape);
    const size_t nb = batch.size();
    p.mask_offset.resize(static_cast<size_t>(B * H));
    for (int64_t bh = 0; bh < B * H; ++bh) {
      int64_t rest = bh, off = 0;
      for (size_t d = nb; d-- > 0;) {
        off += rest % batch[d] * view.strides()[d];
        rest /= batch[d];
      }
      p.mask_offset[static_cast<size_t>(bh)] = off;
    }
    p.mask_stride_l = view.strides()[nb];
    p.mask_stride_s = view.strides()[nb + 1];
  }
  if (dropout_p > 0) {
    p.dropout_p = dropout_p;
    p.dropout_key = (generator ? *generator : default_generator()).next_key();
  }
  const Tensor qc = layout(q, batch, L, E), kc = layout(k, kv_batch, S, E), vc = layout(v, kv_batch, S, Ev);
  Shape out_shape = batch, lse_shape = batch;
  out_shape.push_back(L);
  out_shape.push_back(Ev);
  lse_shape.push_back(L);
  Tensor out = detail::alloc(out_shape, q.dtype(), q.device(), op);
  Tensor lse = detail::alloc(lse_shape, q.dtype(), q.device(), op);
  be.attention_forward(out, lse, qc, kc, vc, p);
  if (!detail::needs_grad({&q, &k, &v})) return out;
  return detail::record(op, {q, k, v}, out,
                        [p, qc = detail::save(qc), kc = detail::save(kc), vc = detail::save(vc), o = detail::save(out), lse](
                            const Tensor& g) {
                          const Tensor& qt = qc;
                          const Tensor& kt = kc;
                          const Tensor& vt = vc;
                          Tensor dq = detail::alloc(qt.shape(), qt.dtype(), qt.device());
                          Tensor dk = detail::alloc(kt.shape(), kt.dtype(), kt.device());
                          Tensor dv = detail::alloc(vt.shape(), vt.dtype(), vt.device());
                          detail::backend(qt.device())
                              .attention_backward(dq, dk, dv, detail::contiguous_raw(g), qt, kt, vt, o, lse, p);
                          return std::vector<Tensor>{dq, dk, dv};
                        });
}

}  // namespace loom
