// Scaled dot-product attention as a composite of matmul and softmax (differentiable through them).
#include "loom/ops/attention.h"

#include <cmath>
#include <limits>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"
#include "ops/nn_internal.h"

namespace loom {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                    bool is_causal, std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention";
  for (const Tensor* t : {&q, &k, &v}) detail::check_defined(*t, op);
  const std::string shapes =
      " (q: " + describe(q) + ", k: " + describe(k) + ", v: " + describe(v) + ")";
  if (q.ndim() < 2 || k.ndim() < 2 || v.ndim() < 2)
    throw ShapeError(std::string(op) + ": q, k and v must have at least 2 axes (..., L, E), (..., S, E), (..., S, Ev)" +
                     shapes);
  detail::check_float(q, op, "q");
  detail::check_same_dtype(q, k, op, "q", "k");
  detail::check_same_dtype(q, v, op, "q", "v");
  detail::check_same_device(q, k, op);
  detail::check_same_device(q, v, op);
  const int64_t L = q.dim(-2), E = q.dim(-1), S = k.dim(-2);
  if (k.dim(-1) != E)
    throw ShapeError(std::string(op) + ": q and k must have the same embedding size (last axis)" + shapes);
  if (v.dim(-2) != S)
    throw ShapeError(std::string(op) + ": k and v must have the same sequence length (axis -2)" + shapes);
  Shape qb(q.shape().begin(), q.shape().end() - 2), kb(k.shape().begin(), k.shape().end() - 2),
      vb(v.shape().begin(), v.shape().end() - 2);
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
  // With E = 0 every score is an empty sum, 0 (PyTorch scales q and k before their product, so
  // its scores are 0 too, where 0 * 1/sqrt(0) would be NaN): softmax is then uniform.
  const double sc = scale ? *scale : E > 0 ? 1.0 / std::sqrt(static_cast<double>(E)) : 1.0;
  Tensor scores = matmul(q, swapaxes(k, -1, -2)) * sc;
  const Tensor neg_inf = scalar_tensor(-std::numeric_limits<double>::infinity(), scores.dtype(), scores.device());
  if (is_causal) {
    Tensor rows = reshape(arange(L), {L, 1}), cols = reshape(arange(S), {1, S});
    scores = where(less_equal(cols, rows), scores, neg_inf);
  } else if (mask.defined()) {
    scores = mask.dtype() == DType::Bool ? where(mask, scores, neg_inf) : add(scores, mask);
  }
  return matmul(softmax(scores, -1), v);
}

}  // namespace loom
