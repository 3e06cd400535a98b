// Losses: nll_loss, cross_entropy, binary_cross_entropy_with_logits (PyTorch's definitions).
#include "loom/ops/losses.h"

#include <limits>

#include "loom/core/grad_mode.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/indexing.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"
#include "ops/nn_internal.h"
#include "ops/registry_parts.h"

namespace loom {

using Grads = std::vector<Tensor>;

namespace {

// A shape as C++ writes it in a reshape call, for the hints: {32, 1}.
std::string braces(const Shape& s) {
  std::string t = "{";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "}";
}

// The expected target shape for class-index targets: input shape without the class axis.
Shape target_shape_for(const Tensor& input) {
  Shape s = input.shape();
  s.erase(s.begin() + (input.ndim() == 1 ? 0 : 1));
  return s;
}

void check_class_weight(const Tensor& weight, const Tensor& input, int64_t C, const char* op) {
  if (!weight.defined()) return;
  detail::check_same_device(input, weight, op);
  if (!is_floating(weight.dtype()))
    throw DTypeError(std::string(op) + ": weight has dtype " + dtype_name(weight.dtype()) + " (valid: a floating dtype)");
  if (weight.shape() != Shape{C})
    throw ShapeError(std::string(op) + ": weight must have shape (" + std::to_string(C) +
                     ",) (one value per class), got " + describe(weight));
}

// Validates (input, target) for class-index losses and returns the int64 target.
Tensor check_class_target(const Tensor& input, const Tensor& target, int64_t ignore_index, const char* op) {
  detail::check_defined(input, op);
  detail::check_defined(target, op);
  detail::check_same_device(input, target, op);
  if (input.ndim() < 1)
    throw ShapeError(std::string(op) + ": input must be (C,), (N, C) or (N, C, d1, ...), got " + describe(input));
  detail::check_float(input, op, "input");
  if (!is_integral(target.dtype()))
    throw DTypeError(std::string(op) + ": target must hold integer class ids, got " + describe(target) +
                     (is_floating(target.dtype()) && std::string(op) == "cross_entropy"
                          ? " (floating targets must have the input's shape " + shape_str(input.shape()) +
                                " to be read as class probabilities)"
                          : ""));
  if (target.shape() != target_shape_for(input)) {
    const Shape want = target_shape_for(input);
    // (N, 1) class ids, as a column from a file or a Keras habit: say how to get (N,)
    const bool column = target.ndim() == static_cast<int64_t>(want.size()) + 1 && target.shape().back() == 1;
    throw ShapeError(std::string(op) + ": target " + describe(target) + " does not match input " +
                     describe(input) + " (expected target shape " + shape_str(want) + ")" +
                     (column ? "; squeeze the target's last axis: squeeze(target, -1) or target.reshape(" + braces(want) + ")"
                             : std::string()));
  }
  const int64_t C = input.shape()[input.ndim() == 1 ? 0 : 1];
  NoGrad off;
  Tensor t = detail::cast_raw(target, DType::Int64);
  if (t.numel() > 0) {
    Tensor ig = scalar_tensor(ignore_index, DType::Int64, t.device());
    Tensor bad = logical_and(not_equal(t, ig),
                             logical_or(less(t, scalar_tensor(0, DType::Int64, t.device())),
                                        greater_equal(t, scalar_tensor(C, DType::Int64, t.device()))));
    if (any(bad).item<bool>()) {
      const int64_t first = take(flatten(t), argmax(flatten(bad))).item<int64_t>();
      throw IndexError(std::string(op) + ": target " + std::to_string(first) + " is out of range for " +
                       std::to_string(C) + " classes (valid: 0 to " + std::to_string(C - 1) + ", or ignore_index=" +
                       std::to_string(ignore_index) + ")");
    }
  }
  return t;
}

struct NllParts {
  Tensor loss;    // per element, target's shape (0 where ignored)
  Tensor denom;   // sum of weight[t] over non-ignored targets (0-d)
  Tensor valid;   // bool, target's shape
  Tensor t_safe;  // int64 targets with ignored ones replaced by 0
};

// lp: (N, C, ...) log-probabilities (batched), t: (N, ...) int64.
NllParts nll_parts(const Tensor& lp, const Tensor& t, const Tensor& weight, int64_t ignore_index) {
  NllParts r;
  {
    NoGrad off;
    r.valid = not_equal(t, scalar_tensor(ignore_index, DType::Int64, t.device()));
    r.t_safe = where(r.valid, t, zeros({}, DType::Int64, t.device()));
  }
  Tensor picked = squeeze(take_along_axis(lp, expand_dims(r.t_safe, 1), 1), {1});
  Tensor w_t;
  {
    NoGrad off;
    Tensor validf = astype(r.valid, lp.dtype());
    w_t = weight.defined() ? multiply(astype(take(weight.detach(), r.t_safe, 0), lp.dtype()), validf) : validf;
    r.denom = sum(w_t);
  }
  // `where`, not the product alone, so that an ignored target's gradient is exactly 0: under
  // Mean with every target ignored the incoming gradient is 1 / 0 = inf, and inf * 0 would be
  // NaN (PyTorch: loss NaN, gradient 0)
  r.loss = negative(where(r.valid, multiply(picked, w_t), zeros({}, lp.dtype(), lp.device())));
  return r;
}

Tensor reduce(const Tensor& loss, Reduction reduction, const Tensor& denom) {
  switch (reduction) {
    case Reduction::None: return loss;
    case Reduction::Sum: return sum(loss);
    case Reduction::Mean: {
      // Every target ignored (denom 0): the mean is NaN (0 / 0, as PyTorch) but no gradient
      // flows, as in PyTorch, whose backward writes only non-ignored positions. Dividing by 0
      // would send inf * 0 = NaN back, so divide by 1 there and add the NaN as a constant.
      Tensor empty, nan_term;
      {
        NoGrad off;
        empty = equal(denom, zeros({}, denom.dtype(), denom.device()));
        nan_term = where(empty, std::numeric_limits<double>::quiet_NaN(), zeros({}, denom.dtype(), denom.device()));
      }
      Tensor safe = where(empty, ones({}, denom.dtype(), denom.device()), denom);
      return add(divide(sum(loss), safe), nan_term);
    }
  }
  return loss;
}

// The fused cross-entropy's slots (src/ops/backend.h, KernelSlot), filled by
// src/ops/cpu/cross_entropy.cpp, on contiguous float32 operands. Cross-entropy of x (N, C) with
// int64 class ids t (N,) (valid ids or ignore_index): per row m = max, ls = log(sum exp(x - m))
// and loss = -((x[t] - m) - ls), 0 where t is ignore_index (loss, m, ls: (N,)), bit for bit
// log_softmax then picking t. Unfilled (if_filled): the composite runs.
constinit const detail::KernelSlot<void(const Tensor& loss, const Tensor& m, const Tensor& ls, const Tensor& x,
                                        const Tensor& t, int64_t ignore_index)>
    kCrossEntropyRowsF32{"losses.cross_entropy_rows_f32"};
// Its backward for the per-row gradient g (N,): gx (N, C) = exp((x - m) - ls) * g minus g at
// the target, 0 in ignored rows: the composite's bits.
constinit const detail::KernelSlot<void(const Tensor& gx, const Tensor& g, const Tensor& x, const Tensor& m,
                                        const Tensor& ls, const Tensor& t, int64_t ignore_index)>
    kCrossEntropyRowsBackwardF32{"losses.cross_entropy_rows_backward_f32"};

// The fused cross-entropy covers float32 (N, C) logits with class-index targets, no class
// weights and no label smoothing (the main case), where the device's backend has it; its loss
// and gradient are those of the composite (log_softmax, pick, log_softmax's backward) bit for bit.
bool cross_entropy_fast_path(const Tensor& x, const Tensor& weight, double label_smoothing) {
  return x.dtype() == DType::Float32 && x.ndim() == 2 && x.numel() > 0 && !weight.defined() && label_smoothing == 0.0 &&
         kCrossEntropyRowsF32.if_filled(x.device()) && kCrossEntropyRowsBackwardF32.if_filled(x.device());
}

// Per-row losses -log_softmax(x)[t] (0 where t is ignore_index), one recorded op.
Tensor cross_entropy_rows(const Tensor& x, const Tensor& t, int64_t ignore_index) {
  const Tensor xc = detail::contiguous_raw(x), tc = detail::contiguous_raw(t);
  const int64_t rows = xc.shape()[0];
  Tensor loss = detail::alloc({rows}, DType::Float32, x.device());
  Tensor m = detail::alloc({rows}, DType::Float32, x.device());
  Tensor ls = detail::alloc({rows}, DType::Float32, x.device());
  kCrossEntropyRowsF32(x.device())(loss, m, ls, xc, tc, ignore_index);
  if (!detail::needs_grad({&x})) return loss;
  return detail::record("cross_entropy", {x}, loss, [xd = detail::save(xc), m, ls, tc, ignore_index](const Tensor& g) {
    const Tensor& xs = xd.get();
    Tensor gx = detail::alloc(xs.shape(), DType::Float32, xs.device());
    kCrossEntropyRowsBackwardF32(xs.device())(gx, detail::contiguous_raw(detail::cast_raw(g, DType::Float32)), xs, m,
                                               ls, tc, ignore_index);
    return Grads{gx};
  });
}

// Unbatched (C,) inputs with a 0-d target run as a batch of one.
bool unbatched(const Tensor& input) { return input.ndim() == 1; }

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight, Reduction reduction,
                int64_t ignore_index) {
  const char* op = "nll_loss";
  Tensor t = check_class_target(log_probs, target, ignore_index, op);
  const bool single = unbatched(log_probs);
  const int64_t C = log_probs.shape()[single ? 0 : 1];
  check_class_weight(weight, log_probs, C, op);
  Tensor lp = single ? expand_dims(log_probs, 0) : log_probs;
  if (single) t = reshape(t, {1});
  NllParts parts = nll_parts(lp, t, weight, ignore_index);
  Tensor out = reduce(parts.loss, reduction, parts.denom);
  return single && reduction == Reduction::None ? reshape(out, {}) : out;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight, Reduction reduction,
                     int64_t ignore_index, double label_smoothing) {
  const char* op = "cross_entropy";
  detail::check_defined(logits, op);
  detail::check_defined(target, op);
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0))
    throw ValueError(std::string(op) + ": label_smoothing must be in [0, 1], got " + std::to_string(label_smoothing));
  if (logits.ndim() < 1)
    throw ShapeError(std::string(op) + ": input must be (C,), (N, C) or (N, C, d1, ...), got " + describe(logits));
  const bool single = unbatched(logits);
  const int64_t class_axis = single ? 0 : 1;
  const int64_t C = logits.shape()[class_axis];
  check_class_weight(weight, logits, C, op);
  detail::check_float(logits, op, "input");

  // class probabilities
  if (is_floating(target.dtype()) && target.shape() == logits.shape()) {
    detail::check_same_device(logits, target, op);
    Tensor lp = log_softmax(logits, class_axis);
    Tensor tgt = target;
    if (label_smoothing > 0) tgt = tgt * (1.0 - label_smoothing) + label_smoothing / static_cast<double>(C);
    Tensor prod = multiply(lp, tgt);
    if (weight.defined()) {
      Shape ws(static_cast<size_t>(logits.ndim()), 1);
      ws[class_axis] = C;
      prod = multiply(prod, reshape(weight.detach(), ws));
    }
    Tensor loss = negative(sum(prod, {class_axis}));
    if (reduction == Reduction::None) return loss;
    if (reduction == Reduction::Sum) return sum(loss);
    const double n = C > 0 ? static_cast<double>(logits.numel() / C) : 0.0;
    return divide(sum(loss), scalar_tensor(n, loss.dtype(), loss.device()));
  }

  Tensor t = check_class_target(logits, target, ignore_index, op);
  Tensor x = single ? expand_dims(logits, 0) : logits;
  if (single) t = reshape(t, {1});
  if (cross_entropy_fast_path(x, weight, label_smoothing)) {
    Tensor denom;
    {
      NoGrad off;
      denom = sum(astype(not_equal(t, scalar_tensor(ignore_index, DType::Int64, t.device())), DType::Float32));
    }
    Tensor out = reduce(cross_entropy_rows(x, t, ignore_index), reduction, denom);
    return single && reduction == Reduction::None ? reshape(out, {}) : out;
  }
  Tensor lp = log_softmax(x, 1);
  NllParts parts = nll_parts(lp, t, weight, ignore_index);
  Tensor out = reduce(parts.loss, reduction, parts.denom);
  if (label_smoothing > 0) {
    Tensor weighted = lp;
    if (weight.defined()) {
      Shape ws(static_cast<size_t>(lp.ndim()), 1);
      ws[1] = C;
      weighted = multiply(lp, reshape(astype(weight.detach(), lp.dtype()), ws));
    }
    Tensor smooth = negative(sum(weighted, {1}));
    smooth = where(parts.valid, smooth, zeros({}, smooth.dtype(), smooth.device()));
    Tensor s = reduce(smooth, reduction, parts.denom);
    out = out * (1.0 - label_smoothing) + s * (label_smoothing / static_cast<double>(C));
  }
  return single && reduction == Reduction::None ? reshape(out, {}) : out;
}

namespace {

// The elementwise core (1 - y) * x + lw * softplus(-x), lw = 1 + (pw - 1) * y, with an
// explicit gradient (exact at x = 0, where |x| and max(-x, 0) have kinks).
Tensor bce_logits_core(const Tensor& x, const Tensor& y, const Tensor& pw) {
  Tensor loss, sp, lw;
  {
    NoGrad off;
    sp = add(log1p(exp(negative(abs(x)))), relu(negative(x)));  // softplus(-x), stable
    lw = pw.defined() ? multiply(pw - 1.0, y) + 1.0 : Tensor();
    Tensor one_minus_y = 1.0 - y;
    loss = add(multiply(one_minus_y, x), lw.defined() ? multiply(lw, sp) : sp);
  }
  std::vector<Tensor> inputs{x, y};
  if (pw.defined()) inputs.push_back(pw);
  if (!detail::needs_grad(inputs)) return loss;
  return detail::record("binary_cross_entropy_with_logits", inputs, loss,
                        [xd = detail::save(x), yd = detail::save(y), pwd = detail::save(pw), sp, lw,
                         rx = x.requires_grad(), ry = y.requires_grad(),
                         rp = pw.defined() && pw.requires_grad()](const Tensor& g) {
                          Grads gs(pwd.defined() ? 3 : 2);
                          // d/dx = (1 - y) + lw * (sigmoid(x) - 1)
                          if (rx) {
                            Tensor s1 = sigmoid(xd) - 1.0;
                            gs[0] = multiply(g, add(1.0 - yd, lw.defined() ? multiply(lw, s1) : s1));
                          }
                          // d/dy = -x + (pw - 1) * softplus(-x)
                          if (ry) {
                            Tensor d = negative(xd);
                            if (pwd.defined()) d = add(d, multiply(pwd - 1.0, sp));
                            gs[1] = multiply(g, d);
                          }
                          // d/dpw = y * softplus(-x)
                          if (rp) gs[2] = multiply(g, multiply(yd, sp));
                          return gs;
                        });
}

}  // namespace

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets, const Tensor& weight,
                                        const Tensor& pos_weight, Reduction reduction) {
  const char* op = "binary_cross_entropy_with_logits";
  detail::check_defined(logits, op);
  detail::check_defined(targets, op);
  detail::check_same_device(logits, targets, op);
  detail::check_float(logits, op, "logits");
  detail::check_float(targets, op, "targets");
  if (targets.shape() != logits.shape())
    throw ShapeError(std::string(op) + ": targets " + describe(targets) + " must have the shape of logits " +
                     describe(logits) + "; reshape one to the other's shape (e.g. squeeze(logits, -1) for (N, 1) logits and " +
                     "(N,) targets, or targets.reshape(" + braces(logits.shape()) + "))");
  if (pos_weight.defined()) {
    detail::check_float(pos_weight, op, "pos_weight");
    detail::check_same_device(logits, pos_weight, op);
    if (broadcast_shapes(pos_weight.shape(), logits.shape(), op) != logits.shape())
      throw ShapeError(std::string(op) + ": pos_weight " + describe(pos_weight) +
                       " must broadcast to the logits' shape " + shape_str(logits.shape()));
  }
  if (weight.defined()) {
    detail::check_float(weight, op, "weight");
    detail::check_same_device(logits, weight, op);
    if (broadcast_shapes(weight.shape(), logits.shape(), op) != logits.shape())
      throw ShapeError(std::string(op) + ": weight " + describe(weight) + " must broadcast to the logits' shape " +
                       shape_str(logits.shape()));
  }
  Tensor loss = bce_logits_core(logits, targets, pos_weight);
  if (weight.defined()) loss = multiply(loss, weight);
  switch (reduction) {
    case Reduction::None: return loss;
    case Reduction::Sum: return sum(loss);
    case Reduction::Mean: return mean(loss);
  }
  return loss;
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target) { return nll_loss(log_probs, target, Tensor()); }
Tensor cross_entropy(const Tensor& logits, const Tensor& target) { return cross_entropy(logits, target, Tensor()); }
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets) {
  return binary_cross_entropy_with_logits(logits, targets, Tensor());
}

}  // namespace loom

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> loss_ops() {
  return {
      {"cross_entropy", "nn", true}, {"nll_loss", "nn", true}, {"binary_cross_entropy_with_logits", "nn", true},
  };
}

}  // namespace loom::detail
