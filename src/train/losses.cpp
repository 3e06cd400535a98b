// Training losses composed of differentiable ops (torch.nn.functional's definitions).
#include "loom/train/losses.h"

#include <string>

#include "loom/core/describe.h"
#include "loom/autograd/autograd.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/reduction.h"

namespace loom::train {

namespace {

void check_float(const Tensor& t, const char* op, const char* what) {
  if (!t.defined()) throw ValueError(std::string(op) + ": " + what + " is undefined");
  if (!is_floating(t.dtype()))
    throw DTypeError(std::string(op) + ": " + what + " must be floating, got " + describe(t));
}

// Two operands of an elementwise loss must have one shape, or one must broadcast into the
// other's (a scalar or per-feature target). Shapes that broadcast to a third shape — the
// classic (N, 1) prediction against an (N,) target, giving (N, N) — would compare every
// prediction with every target and return a plausible, wrong loss (issue 36): refused.
// A shape as C++ writes it in a reshape call: {32, 1}.
std::string braces(const Shape& s) {
  std::string t = "{";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "}";
}

void check_shapes(const Tensor& a, const Tensor& b, const char* op, const char* a_name, const char* b_name) {
  const Shape both = broadcast_shapes(a.shape(), b.shape(), op);
  if (both == a.shape() || both == b.shape()) return;
  std::string hint;
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  if (sa.size() == sb.size() + 1 && sa.back() == 1)
    hint = std::string("squeeze ") + a_name + "'s last axis (squeeze(" + a_name + ", -1), or " + a_name + ".reshape(" + braces(sb) +
           ")) or give " + b_name + " one (" + b_name + ".reshape(" + braces(sa) + "))";
  else if (sb.size() == sa.size() + 1 && sb.back() == 1)
    hint = std::string("squeeze ") + b_name + "'s last axis (squeeze(" + b_name + ", -1), or " + b_name + ".reshape(" + braces(sa) +
           ")) or give " + a_name + " one (" + a_name + ".reshape(" + braces(sb) + "))";
  else
    hint = std::string("reshape one operand to the other's shape (reshape, squeeze or expand_dims)");
  throw ShapeError(std::string(op) + ": " + a_name + " " + shape_str(sa) + " and " + b_name + " " + shape_str(sb) +
                   " broadcast to " + shape_str(both) + ", the shape of neither, which would compare every " + a_name +
                   " with every " + b_name + "; " + hint);
}

void check_pair(const Tensor& pred, const Tensor& target, const char* op) {
  check_float(pred, op, "pred");
  if (!target.defined()) throw ValueError(std::string(op) + ": target is undefined");
  check_shapes(pred, target, op, "pred", "target");
}

Tensor reduce(const Tensor& x, Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return x;
    case Reduction::Sum: return sum(x);
    case Reduction::Mean: return mean(x);
  }
  return x;
}

// The target converted to pred's floating dtype when it is not floating (integer 0/1 labels).
Tensor float_target(const Tensor& pred, const Tensor& target) {
  return is_floating(target.dtype()) ? target : target.astype(pred.dtype());
}

}  // namespace

Tensor mse(const Tensor& pred, const Tensor& target, Reduction reduction) {
  check_pair(pred, target, "mse");
  return reduce(square(pred - float_target(pred, target)), reduction);
}

Tensor mae(const Tensor& pred, const Tensor& target, Reduction reduction) {
  check_pair(pred, target, "mae");
  return reduce(abs(pred - float_target(pred, target)), reduction);
}

Tensor huber(const Tensor& pred, const Tensor& target, double delta, Reduction reduction) {
  check_pair(pred, target, "huber");
  if (!(delta > 0)) throw ValueError("huber: delta must be > 0, got " + std::to_string(delta));
  // With a = |d| and q = min(a, delta): 0.5 q^2 + delta (a - q) is 0.5 d^2 inside the band and
  // delta (a - 0.5 delta) outside; the gradient is d inside and delta sign(d) outside (also at
  // |d| == delta, where minimum splits its gradient evenly).
  Tensor a = abs(pred - float_target(pred, target));
  Tensor q = minimum(a, delta);
  return reduce(0.5 * square(q) + delta * (a - q), reduction);
}

Tensor binary_cross_entropy(const Tensor& pred, const Tensor& target, Reduction reduction, const Tensor& weight) {
  check_pair(pred, target, "binary_cross_entropy");
  Tensor y = float_target(pred, target);
  if (y.shape() != pred.shape())
    throw ShapeError("binary_cross_entropy: target " + describe(target) + " must have pred's shape " +
                     shape_str(pred.shape()));
  {
    NoGrad off;
    Tensor p = pred.detach();
    if (p.numel() > 0 && any(logical_or(p < 0.0, p > 1.0)).item<bool>())
      throw ValueError("binary_cross_entropy: pred must hold probabilities in [0, 1] (apply sigmoid to logits, or use "
                       "binary_cross_entropy_with_logits)");
  }
  // log(x) clamped to >= -100 (PyTorch); log(0) is never evaluated, so no inf * 0 in backward.
  auto clamped_log = [](const Tensor& x) {
    Tensor pos = x > 0.0;
    return maximum(where(pos, log(where(pos, x, 1.0)), -100.0), -100.0);
  };
  Tensor loss = -(y * clamped_log(pred) + (1.0 - y) * clamped_log(1.0 - pred));
  if (weight.defined()) loss = loss * weight;
  return reduce(loss, reduction);
}

Tensor kl_divergence(const Tensor& input, const Tensor& target, KLReduction reduction, bool log_target) {
  check_float(input, "kl_divergence", "input");
  check_float(target, "kl_divergence", "target");
  check_shapes(input, target, "kl_divergence", "input", "target");
  Tensor out;
  if (log_target) {
    out = exp(target) * (target - input);
  } else {
    // xlogy(t, t) - t * input, with 0 log 0 = 0 (and no log(0) evaluated)
    Tensor pos = target > 0.0;
    out = where(pos, target * log(where(pos, target, 1.0)), 0.0) - target * input;
  }
  switch (reduction) {
    case KLReduction::None: return out;
    case KLReduction::Sum: return sum(out);
    case KLReduction::Mean: return mean(out);
    case KLReduction::BatchMean: return input.ndim() == 0 ? sum(out) : sum(out) / static_cast<double>(input.dim(0));
  }
  return out;
}

Tensor cosine_similarity(const Tensor& a, const Tensor& b, int64_t axis, double eps) {
  check_float(a, "cosine_similarity", "a");
  check_float(b, "cosine_similarity", "b");
  check_shapes(a, b, "cosine_similarity", "a", "b");
  Tensor w12 = sum(a * b, {axis});
  Tensor w1 = sum(a * a, {axis});
  Tensor w2 = sum(b * b, {axis});
  return w12 / sqrt(maximum(w1 * w2, eps * eps));
}

Tensor cosine(const Tensor& a, const Tensor& b, Reduction reduction) {
  return reduce(1.0 - cosine_similarity(a, b, -1), reduction);
}

Tensor cosine_embedding(const Tensor& a, const Tensor& b, const Tensor& y, double margin, Reduction reduction) {
  check_float(a, "cosine_embedding", "a");
  check_float(b, "cosine_embedding", "b");
  if (!y.defined()) throw ValueError("cosine_embedding: y is undefined");
  if (a.shape() != b.shape() || (a.ndim() != 1 && a.ndim() != 2) || y.ndim() != a.ndim() - 1 ||
      (a.ndim() == 2 && y.dim(0) != a.dim(0)))
    throw ShapeError("cosine_embedding: expected a, b of equal shape (N, D) or (D,) and y (N,) or (), got a " + describe(a) +
                     ", b " + describe(b) + ", y " + describe(y) + " (reshape a and b to one shape)");
  const int64_t axis = y.ndim();
  constexpr double kEps = 1e-12;
  Tensor prod = sum(a * b, {axis});
  Tensor m1 = sum(a * a, {axis}) + kEps;
  Tensor m2 = sum(b * b, {axis}) + kEps;
  Tensor cos = prod / sqrt(m1 * m2);
  Tensor pos = where(y == 1, 1.0 - cos, 0.0);
  Tensor neg = where(y == -1, maximum(cos - margin, 0.0), 0.0);
  return reduce(pos + neg, reduction);
}

Tensor mse(const Tensor& pred, const Tensor& target) { return mse(pred, target, Reduction::Mean); }
Tensor mae(const Tensor& pred, const Tensor& target) { return mae(pred, target, Reduction::Mean); }
Tensor huber(const Tensor& pred, const Tensor& target) { return huber(pred, target, 1.0); }
Tensor binary_cross_entropy(const Tensor& pred, const Tensor& target) { return binary_cross_entropy(pred, target, Reduction::Mean); }
Tensor kl_divergence(const Tensor& input, const Tensor& target) { return kl_divergence(input, target, KLReduction::BatchMean); }
Tensor cosine(const Tensor& a, const Tensor& b) { return cosine(a, b, Reduction::Mean); }

}  // namespace loom::train
