#include "loom/ops/reduction.h"

#include <algorithm>
#include <cmath>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "ops/internal.h"
#include "ops/registry_parts.h"

namespace loom {

using detail::ReduceOp;
using Grads = std::vector<Tensor>;

namespace {

// The reductions' slots, declared beside their ops (src/ops/backend.h, KernelSlot), filled by
// src/ops/cpu/reduce.cpp. out has x's rank with size 1 on the reduced axes; ArgMax/ArgMin reduce
// one axis into int64.
constinit const detail::KernelSlot<void(ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<bool>& reduced)>
    kReduce{"reduction.reduce"};
// out (x's shape, of its sum dtype) = the running sum of x along axis.
constinit const detail::KernelSlot<void(const Tensor& out, const Tensor& x, int64_t axis)> kCumsum{"reduction.cumsum"};

// Normalised, de-duplicated reduced-axis flags; empty `axes` means all axes.
std::vector<bool> reduced_flags(const Tensor& x, const Axes& axes, const char* op) {
  std::vector<bool> r(static_cast<size_t>(x.ndim()), axes.empty());
  for (int64_t a : axes) {
    const int64_t k = normalize_axis(a, x.ndim(), op);
    if (r[k] && !axes.empty())
      throw ValueError(std::string(op) + ": axis " + std::to_string(a) + " is given twice (axes must be distinct)");
    r[k] = true;
  }
  return r;
}

Shape keep_shape(const Tensor& x, const std::vector<bool>& r) {
  Shape s = x.shape();
  for (size_t i = 0; i < s.size(); ++i)
    if (r[i]) s[i] = 1;
  return s;
}

Shape drop_shape(const Tensor& x, const std::vector<bool>& r) {
  Shape s;
  for (size_t i = 0; i < r.size(); ++i)
    if (!r[i]) s.push_back(x.shape()[i]);
  return s;
}


// Runs a reduction kernel; the result has the keepdims shape, reshaped when !keepdims.
Tensor reduce_kernel(ReduceOp op, const Tensor& x, const std::vector<bool>& r, DType out_dtype, bool keepdims) {
  const DType kd = detail::kernel_dtype(x.dtype());
  const DType ko = detail::kernel_dtype(out_dtype);
  Tensor out = detail::alloc(keep_shape(x, r), ko, x.device());
  kReduce(x.device())(op, out, detail::cast_raw(x, kd), r);
  out = detail::cast_raw(out, out_dtype);
  if (keepdims) return out;
  return Tensor(out.storage(), drop_shape(x, r), contiguous_strides(drop_shape(x, r)), 0, out.dtype());
}

// The gradient arriving at a reduction's output, shaped to broadcast against the input.
Tensor expand_grad(const Tensor& g, const Shape& keep, const Shape& input) {
  return broadcast_to(reshape(g, keep), input);
}

DType sum_dtype(DType d) { return is_floating(d) ? d : DType::Int64; }

void require_nonempty(const Tensor& x, const std::vector<bool>& r, const char* op) {
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i] && x.shape()[i] == 0)
      throw ValueError(std::string(op) + ": cannot reduce over axis " + std::to_string(i) + " of size zero in shape " +
                       shape_str(x.shape()) + " (there is no identity for this reduction)");
}

}  // namespace

Tensor sum(const Tensor& x, const Axes& axes, bool keepdims) {
  detail::check_defined(x, "sum");
  const auto r = reduced_flags(x, axes, "sum");
  Tensor y = reduce_kernel(ReduceOp::Sum, x, r, sum_dtype(x.dtype()), keepdims);
  if (!detail::needs_grad({&x})) return y;
  return detail::record("sum", {x}, y, [keep = keep_shape(x, r), in = x.shape()](const Tensor& g) {
    return Grads{expand_grad(g, keep, in)};
  });
}

Tensor mean(const Tensor& x, const Axes& axes, bool keepdims) {
  detail::check_defined(x, "mean");
  const auto r = reduced_flags(x, axes, "mean");
  int64_t n = 1;
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i]) n *= x.shape()[i];
  Tensor s = sum(is_floating(x.dtype()) ? x : astype(x, DType::Float64), axes, keepdims);
  return divide(s, scalar_tensor(static_cast<double>(n), s.dtype(), x.device()));
}

Tensor prod(const Tensor& x, const Axes& axes, bool keepdims) {
  detail::check_defined(x, "prod");
  const auto r = reduced_flags(x, axes, "prod");
  Tensor y = reduce_kernel(ReduceOp::Prod, x, r, sum_dtype(x.dtype()), keepdims);
  if (!detail::needs_grad({&x})) return y;
  return detail::record("prod", {x}, y, [xd = detail::save(x), axes, keep = keep_shape(x, r)](const Tensor& g) {
    // d prod / d x_i = product of the others; exact with zeros: with no zero it is y / x_i, with
    // one zero only the zero's position gets the product of the non-zeros, with more it is 0.
    Tensor gk = expand_grad(g, keep, xd.shape());
    Tensor is_zero = equal(xd, zeros({}, xd.dtype(), xd.device()));
    Tensor nonzero_x = where(is_zero, ones({}, xd.dtype(), xd.device()), xd);
    Tensor prod_nz = broadcast_to(prod(nonzero_x, axes, true), xd.shape());
    Tensor zero_count = broadcast_to(sum(astype(is_zero, DType::Int64), axes, true), xd.shape());
    Tensor no_zero = equal(zero_count, zeros({}, DType::Int64, xd.device()));
    Tensor one_zero = equal(zero_count, ones({}, DType::Int64, xd.device()));
    Tensor others = where(no_zero, divide(prod_nz, nonzero_x),
                          where(logical_and(one_zero, is_zero), prod_nz, zeros({}, xd.dtype(), xd.device())));
    return Grads{multiply(gk, others)};
  });
}

namespace {
Tensor extremum(ReduceOp op, const char* name, const Tensor& x, const Axes& axes, bool keepdims) {
  detail::check_defined(x, name);
  const auto r = reduced_flags(x, axes, name);
  require_nonempty(x, r, name);
  Tensor y = reduce_kernel(op, x, r, x.dtype(), keepdims);
  if (!detail::needs_grad({&x})) return y;
  return detail::record(name, {x}, y, [xd = detail::save(x), yd = detail::save(y), axes, keep = keep_shape(x, r)](const Tensor& g) {
    // shared equally among the positions that attain the extreme value
    Tensor mask = astype(equal(xd, expand_grad(yd, keep, xd.shape())), g.dtype());
    Tensor count = sum(mask, axes, true);
    return Grads{multiply(expand_grad(g, keep, xd.shape()), divide(mask, count))};
  });
}
}  // namespace

Tensor max(const Tensor& x, const Axes& axes, bool keepdims) { return extremum(ReduceOp::Max, "max", x, axes, keepdims); }
Tensor min(const Tensor& x, const Axes& axes, bool keepdims) { return extremum(ReduceOp::Min, "min", x, axes, keepdims); }

Tensor var(const Tensor& x, const Axes& axes, int64_t ddof, bool keepdims) {
  detail::check_defined(x, "var");
  const auto r = reduced_flags(x, axes, "var");
  int64_t n = 1;
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i]) n *= x.shape()[i];
  Tensor xf = is_floating(x.dtype()) ? x : astype(x, DType::Float64);
  Tensor centered = subtract(xf, mean(xf, axes, true));
  Tensor ss = sum(square(centered), axes, keepdims);
  return divide(ss, scalar_tensor(static_cast<double>(std::max<int64_t>(n - ddof, 0)), ss.dtype(), x.device()));
}

Tensor std(const Tensor& x, const Axes& axes, int64_t ddof, bool keepdims) {
  Tensor v = var(x, axes, ddof, keepdims);
  Tensor y = sqrt(v.detach());
  if (!detail::needs_grad({&v})) return y;
  // sqrt's rule g / (2 y) is inf at zero variance (a constant row, a size-1 axis) and would
  // make the gradient 0 * inf = NaN; the gradient there is 0, as PyTorch's std_backward
  return detail::record("std", {v}, y, [yd = detail::save(y)](const Tensor& g) {
    Tensor z = zeros({}, g.dtype(), g.device());
    return Grads{where(equal(yd, zeros({}, yd.dtype(), yd.device())), z, divide(g, yd * 2.0))};
  });
}

namespace {
// The (detached) shift that keeps exp() in range in logsumexp and softmax: the maximum
// along `axes`, kept dims; 0 where the axes are empty (max has no identity, and any shift
// gives the empty sum's log(0) = -inf).
Tensor stable_shift(const Tensor& x, const Axes& axes) {
  const auto r = reduced_flags(x, axes, "logsumexp");
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i] && x.shape()[i] == 0) return zeros(keep_shape(x, r), x.dtype(), x.device());
  return max(x, axes, true).detach();
}
}  // namespace

Tensor logsumexp(const Tensor& x, const Axes& axes, bool keepdims) {
  detail::check_defined(x, "logsumexp");
  Tensor xf = is_floating(x.dtype()) ? x : astype(x, DType::Float32);
  Tensor m = stable_shift(xf, axes);
  m = where(logical_not(equal(abs(m), scalar_tensor(INFINITY, m.dtype(), m.device()))), m, zeros_like(m));
  Tensor s = log(sum(exp(subtract(xf, m)), axes, true)) + m;
  if (keepdims) return s;
  const auto r = reduced_flags(x, axes, "logsumexp");
  return reshape(s, drop_shape(x, r));
}

Tensor all(const Tensor& x, const Axes& axes, bool keepdims) {
  detail::check_defined(x, "all");
  return reduce_kernel(ReduceOp::All, x, reduced_flags(x, axes, "all"), DType::Bool, keepdims);
}

Tensor any(const Tensor& x, const Axes& axes, bool keepdims) {
  detail::check_defined(x, "any");
  return reduce_kernel(ReduceOp::Any, x, reduced_flags(x, axes, "any"), DType::Bool, keepdims);
}

namespace {
Tensor arg_extremum(ReduceOp op, const char* name, const Tensor& x, std::optional<int64_t> axis, bool keepdims) {
  detail::check_defined(x, name);
  if (!axis) {
    Tensor flat = reshape(x.detach(), {x.numel()});
    Tensor r = arg_extremum(op, name, flat, 0, false);
    return keepdims ? reshape(r, Shape(static_cast<size_t>(x.ndim()), 1)) : r;
  }
  const int64_t a = normalize_axis(*axis, x.ndim(), name);
  std::vector<bool> r(static_cast<size_t>(x.ndim()), false);
  r[a] = true;
  require_nonempty(x, r, name);
  return reduce_kernel(op, x, r, DType::Int64, keepdims);
}
}  // namespace

Tensor argmax(const Tensor& x, std::optional<int64_t> axis, bool keepdims) {
  return arg_extremum(ReduceOp::ArgMax, "argmax", x, axis, keepdims);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> axis, bool keepdims) {
  return arg_extremum(ReduceOp::ArgMin, "argmin", x, axis, keepdims);
}

Tensor cumsum(const Tensor& x, int64_t axis) {
  detail::check_defined(x, "cumsum");
  const int64_t a = normalize_axis(axis, x.ndim(), "cumsum");
  const DType kd = detail::kernel_dtype(x.dtype());
  Tensor out = detail::alloc(x.shape(), sum_dtype(kd), x.device());
  kCumsum(x.device())(out, detail::cast_raw(x, kd), a);
  Tensor y = detail::cast_raw(out, sum_dtype(x.dtype()));
  if (!detail::needs_grad({&x})) return y;
  return detail::record("cumsum", {x}, y, [a](const Tensor& g) {
    // the gradient of a running sum is the reversed running sum of the gradient
    return Grads{flip(cumsum(flip(g, {a}), a), {a})};
  });
}

Tensor count_nonzero(const Tensor& x) { return sum(astype(x, DType::Bool)); }

namespace {
// The kernel's slot (src/ops/backend.h, KernelSlot), filled by src/ops/cpu/softmax.cpp: out =
// softmax (log = false) or log_softmax of contiguous float32 x along its last axis (same shape),
// matching the composite. Unfilled (if_filled): the composite runs.
constinit const detail::KernelSlot<void(const Tensor& out, const Tensor& x, bool log)> kSoftmaxLastdimF32{
    "softmax.softmax_lastdim_f32"};

// The fused kernel covers float32 along the last axis where the device's backend has it; the
// composites below are the definition for everything else. Gradients: softmax
// y * (g - sum(g y)), log-softmax g - softmax(x) sum(g), both along the axis.
bool softmax_fast_path(const Tensor& x, int64_t axis) {
  return x.dtype() == DType::Float32 && x.ndim() >= 1 && axis == x.ndim() - 1 && x.numel() > 0 &&
         kSoftmaxLastdimF32.if_filled(x.device());
}

Tensor softmax_fused(const Tensor& x, int64_t axis, bool log) {
  const Tensor xc = detail::contiguous_raw(x);
  Tensor y = detail::alloc(x.shape(), DType::Float32, x.device());
  kSoftmaxLastdimF32(x.device())(y, xc, log);
  if (!detail::needs_grad({&x})) return y;
  if (log)
    return detail::record("log_softmax", {x}, y, [yd = detail::save(y), axis](const Tensor& g) {
      return Grads{subtract(g, multiply(exp(yd), sum(g, {axis}, true)))};
    });
  return detail::record("softmax", {x}, y, [yd = detail::save(y), axis](const Tensor& g) {
    const Tensor gy = multiply(g, yd);
    return Grads{subtract(gy, multiply(yd, sum(gy, {axis}, true)))};
  });
}
}  // namespace

namespace {
// A 0-d tensor is softmaxed as one of shape (1,) along axis 0 or -1 (PyTorch's dim wrapping
// for scalars): softmax gives 1, log_softmax 0.
Tensor softmax_any(const Tensor& x, int64_t axis, bool is_log, const char* op) {
  detail::check_defined(x, op);
  if (x.ndim() == 0) {
    if (axis != 0 && axis != -1)
      throw IndexError(std::string(op) + ": axis " + std::to_string(axis) +
                       " is out of range for a 0-d tensor (valid: 0 or -1, which treat it as one element)");
    return reshape(softmax_any(reshape(x, {1}), 0, is_log, op), {});
  }
  axis = normalize_axis(axis, x.ndim(), op);
  if (softmax_fast_path(x, axis)) return softmax_fused(x, axis, is_log);
  Tensor xf = is_floating(x.dtype()) ? x : astype(x, DType::Float32);
  Tensor shifted = subtract(xf, stable_shift(xf, {axis}));
  if (is_log) return subtract(shifted, log(sum(exp(shifted), {axis}, true)));
  Tensor e = exp(shifted);
  return divide(e, sum(e, {axis}, true));
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t axis) { return softmax_any(x, axis, false, "softmax"); }
Tensor log_softmax(const Tensor& x, int64_t axis) { return softmax_any(x, axis, true, "log_softmax"); }

}  // namespace loom

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> reduction_ops() {
  return {
      {"sum", "reduction", true}, {"mean", "reduction", true}, {"prod", "reduction", true}, {"max", "reduction", true},
      {"min", "reduction", true}, {"argmax", "reduction", false}, {"argmin", "reduction", false},
      {"var", "reduction", true}, {"std", "reduction", true}, {"logsumexp", "reduction", true}, {"all", "reduction", false},
      {"any", "reduction", false}, {"cumsum", "reduction", true}, {"softmax", "reduction", true},
      {"log_softmax", "reduction", true},
  };
}

}  // namespace loom::detail
