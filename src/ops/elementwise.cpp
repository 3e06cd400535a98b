// Elementwise ops: dtype promotion, broadcasting, kernels and gradients.
#include "loom/ops/elementwise.h"

#include <cmath>
#include <limits>
#include <utility>

#include "loom/ops/creation.h"
#include "loom/ops/reduction.h"
#include "ops/internal.h"
#include "ops/registry_parts.h"

namespace loom {

using detail::BinaryOp;
using detail::UnaryOp;

namespace {

using detail::KernelSlot;

// The unary and select kernels' slots, declared beside their ops (src/ops/backend.h, KernelSlot),
// filled by src/ops/cpu/unary.cpp and binary.cpp. out = op(x), x of out's shape and of the
// compute dtype (Not: bool).
constinit const KernelSlot<void(UnaryOp op, const Tensor& out, const Tensor& x)> kUnary{"elementwise.unary"};
// out = cond ? a : b, cond (bool), a and b views broadcast to out's shape, a and b of out's dtype.
constinit const KernelSlot<void(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b)> kWhere{
    "elementwise.where"};
// gelu's fused kernels' slots (src/ops/backend.h, KernelSlot), filled by src/ops/cpu/gelu.cpp, on
// contiguous float32 operands: gelu(x, tanh approximation): out = x 0.5 (1 + t),
// t = tanh(sqrt(2 / pi) (x + 0.044715 x^3)) (the composite's bits); its backward gx = g d/dx
// from x alone. Unfilled (if_filled): the composite runs.
constinit const KernelSlot<void(const Tensor& out, const Tensor& x)> kGeluTanhF32{"gelu.gelu_tanh_f32"};
constinit const KernelSlot<void(const Tensor& gx, const Tensor& g, const Tensor& x)> kGeluTanhBackwardF32{
    "gelu.gelu_tanh_backward_f32"};


// Runs a binary kernel: broadcasts, converts both operands to `compute`, writes `result`.
Tensor binary_kernel(BinaryOp op, const char* name, const Tensor& a, const Tensor& b, DType compute, DType result) {
  detail::check_defined(a, name);
  detail::check_defined(b, name);
  detail::check_same_device(a, b, name);
  const DType kernel_dtype = detail::kernel_dtype(compute);
  const DType kernel_result = detail::kernel_dtype(result);
  // Same shape and dtype (the common case, and all of a tiny op's cost): no shape vector,
  // no operand handle copies (each is an atomic reference count pair).
  if (a.shape() == b.shape() && a.dtype() == kernel_dtype && b.dtype() == kernel_dtype) {
    Tensor out = detail::alloc(a.shape(), kernel_result, a.device());
    detail::backend(a.device()).binary(op, out, a, b);
    if (kernel_result == result) return out;
    return detail::cast_raw(out, result);
  }
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = detail::alloc(shape, kernel_result, a.device());
  const Tensor ac = detail::broadcast_view(detail::cast_raw(a, kernel_dtype), shape);
  const Tensor bc = detail::broadcast_view(detail::cast_raw(b, kernel_dtype), shape);
  detail::backend(a.device()).binary(op, out, ac, bc);
  if (kernel_result == result) return out;
  return detail::cast_raw(out, result);
}

Tensor unary_kernel(UnaryOp op, const Tensor& x, DType dtype) {
  const DType kd = detail::kernel_dtype(dtype);
  Tensor xin = detail::cast_raw(x, kd);
  Tensor out = detail::alloc(x.shape(), kd, x.device());
  kUnary(x.device())(op, out, xin);
  return detail::cast_raw(out, dtype);
}

// Float math on integer or bool input computes in float32.
DType float_result(const Tensor& x) { return is_floating(x.dtype()) ? x.dtype() : DType::Float32; }

Tensor float_unary(UnaryOp op, const char* name, const Tensor& x,
                   std::function<Tensor(const Tensor& x, const Tensor& y, const Tensor& g)> grad) {
  detail::check_defined(x, name);
  Tensor y = unary_kernel(op, x, float_result(x));
  if (!detail::needs_grad({&x}) || !grad) return y;
  return detail::record(name, {x}, y, [xd = detail::save(x), yd = detail::save(y), grad](const Tensor& g) {
    return std::vector<Tensor>{grad(xd, yd, g)};
  });
}

Tensor arithmetic(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  detail::check_defined(a, name);
  detail::check_defined(b, name);
  const DType dt = promote_types(a.dtype(), b.dtype());
  if (dt == DType::Bool && op == BinaryOp::Sub)
    throw DTypeError(std::string(name) + ": subtracting bool tensors is not supported (" +
                     detail::describe_operands({&a, &b}) + "); use logical_xor, or convert with astype");
  return binary_kernel(op, name, a, b, dt, dt);
}

Tensor comparison(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  detail::check_defined(a, name);
  detail::check_defined(b, name);
  return binary_kernel(op, name, a, b, promote_types(a.dtype(), b.dtype()), DType::Bool);
}

Tensor logical(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  return binary_kernel(op, name, a, b, DType::Bool, DType::Bool);
}

// A C++ number as a 0-d tensor of the dtype it gets next to `t` (weak scalar rule).
Tensor weak(Scalar s, const Tensor& t, const char* op) {
  detail::check_defined(t, op);
  return scalar_tensor(s, s.result_dtype_with(t.dtype()), t.device());
}

// The tensor operand of an op with a C++ number, converted to the weak rule's result dtype:
// a float scalar lifts an integer or bool tensor to float32 (without it, int32 with a float32
// 0-d tensor would promote to float64).
Tensor lifted(const Tensor& t, Scalar s, const char* op) {
  detail::check_defined(t, op);
  const DType d = s.result_dtype_with(t.dtype());
  return t.dtype() == d ? t : astype(t, d);
}

using Grads = std::vector<Tensor>;

}  // namespace

// ---------------------------------------------------------------- arithmetic
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor y = arithmetic(BinaryOp::Add, "add", a, b);
  if (!detail::needs_grad({&a, &b})) return y;
  return detail::record("add", {a, b}, y, [](const Tensor& g) { return Grads{g, g}; });
}

Tensor subtract(const Tensor& a, const Tensor& b) {
  Tensor y = arithmetic(BinaryOp::Sub, "subtract", a, b);
  if (!detail::needs_grad({&a, &b})) return y;
  return detail::record("subtract", {a, b}, y, [](const Tensor& g) { return Grads{g, negative(g)}; });
}

Tensor multiply(const Tensor& a, const Tensor& b) {
  Tensor y = arithmetic(BinaryOp::Mul, "multiply", a, b);
  if (!detail::needs_grad({&a, &b})) return y;
  return detail::record("multiply", {a, b}, y, [ad = detail::save(a), bd = detail::save(b), ra = a.requires_grad(),
                                                rb = b.requires_grad()](const Tensor& g) {
    return Grads{ra ? multiply(g, bd) : Tensor(), rb ? multiply(g, ad) : Tensor()};
  });
}

Tensor divide(const Tensor& a, const Tensor& b) {
  detail::check_defined(a, "divide");
  detail::check_defined(b, "divide");
  DType dt = promote_types(a.dtype(), b.dtype());
  if (!is_floating(dt)) dt = DType::Float64;  // NumPy: true division of integers gives float64
  Tensor y = binary_kernel(BinaryOp::Div, "divide", a, b, dt, dt);
  if (!detail::needs_grad({&a, &b})) return y;
  return detail::record("divide", {a, b}, y, [bd = detail::save(b), yd = detail::save(y), rb = b.requires_grad()](const Tensor& g) {
    Tensor ga = divide(g, bd);
    return Grads{ga, rb ? negative(multiply(ga, yd)) : Tensor()};
  });
}

Tensor power(const Tensor& a, const Tensor& b) {
  detail::check_defined(a, "power");
  detail::check_defined(b, "power");
  if (is_integral(promote_types(a.dtype(), b.dtype())) && b.numel() > 0) {
    // NumPy raises rather than give the truncated 1 / a^n (0 for |a| > 1)
    const int64_t lowest = min(astype(b, DType::Int64)).item<int64_t>();
    if (lowest < 0)
      throw ValueError("power: integers to negative integer powers are not allowed (" + detail::describe_operands({&a, &b}) +
                       ", the exponent holds " + std::to_string(lowest) +
                       "); convert the base to a floating dtype with astype for a fractional result");
  }
  Tensor y = arithmetic(BinaryOp::Pow, "power", a, b);
  if (!detail::needs_grad({&a, &b})) return y;
  // the rule runs in the result dtype: log(a) of a float32 `a` next to a float64 `b` must not
  // be taken in float32
  return detail::record("power", {a, b}, y, [ad = detail::save(detail::cast_raw(a, y.dtype())),
                                             bd = detail::save(detail::cast_raw(b, y.dtype())), yd = detail::save(y),
                                             ra = a.requires_grad(), rb = b.requires_grad()](const Tensor& g) {
    Tensor ga, gb;
    const Tensor zero = zeros({}, yd.dtype(), yd.device());
    // d/da a^b = b a^(b-1), 0 where b == 0 (PyTorch's pow_backward; the formula gives 0 * inf
    // = NaN at a == 0)
    if (ra)
      ga = where(equal(bd, zero), zero,
                 multiply(g, multiply(bd, power(ad, subtract(bd, scalar_tensor(1, bd.dtype(), bd.device()))))));
    // d/db a^b = a^b log a, taken as 0 where a == 0 and b >= 0 (the limit, as PyTorch and JAX;
    // with b < 0 it is -inf, as PyTorch)
    if (rb)
      gb = where(logical_and(equal(ad, zero), greater_equal(bd, zero)), zero, multiply(g, multiply(yd, log(ad))));
    return Grads{ga, gb};
  });
}

namespace {
// Gradient of maximum/minimum, PyTorch's rule: to the chosen operand, split equally on ties,
// and to both operands where either is NaN (only the losing operand gets none).
Grads extremum_grad(const Tensor& g, const Tensor& a, const Tensor& b, bool is_max) {
  Tensor a_loses = is_max ? less(a, b) : greater(a, b);
  Tensor b_loses = is_max ? greater(a, b) : less(a, b);
  Tensor shared = where(equal(a, b), multiply(g, scalar_tensor(0.5, g.dtype(), g.device())), g);
  Tensor zero = zeros({}, g.dtype(), g.device());
  return {where(a_loses, zero, shared), where(b_loses, zero, shared)};
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) {
  Tensor y = arithmetic(BinaryOp::Max, "maximum", a, b);
  if (!detail::needs_grad({&a, &b})) return y;
  return detail::record("maximum", {a, b}, y, [ad = detail::save(a), bd = detail::save(b)](const Tensor& g) {
    return extremum_grad(g, ad, bd, true);
  });
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  Tensor y = arithmetic(BinaryOp::Min, "minimum", a, b);
  if (!detail::needs_grad({&a, &b})) return y;
  return detail::record("minimum", {a, b}, y, [ad = detail::save(a), bd = detail::save(b)](const Tensor& g) {
    return extremum_grad(g, ad, bd, false);
  });
}

Tensor mod(const Tensor& a, const Tensor& b) {
  Tensor y = arithmetic(BinaryOp::Mod, "mod", a, b);
  if (!detail::needs_grad({&a, &b})) return y;
  // a mod b = a - floor(a / b) * b
  return detail::record("mod", {a, b}, y, [ad = detail::save(a), bd = detail::save(b)](const Tensor& g) {
    return Grads{g, negative(multiply(g, floor(divide(ad, bd))))};
  });
}

Tensor floor_divide(const Tensor& a, const Tensor& b) { return arithmetic(BinaryOp::FloorDiv, "floor_divide", a, b); }

// ---------------------------------------------------------------- comparisons and logic
Tensor equal(const Tensor& a, const Tensor& b) { return comparison(BinaryOp::Eq, "equal", a, b); }
Tensor not_equal(const Tensor& a, const Tensor& b) { return comparison(BinaryOp::Ne, "not_equal", a, b); }
Tensor less(const Tensor& a, const Tensor& b) { return comparison(BinaryOp::Lt, "less", a, b); }
Tensor less_equal(const Tensor& a, const Tensor& b) { return comparison(BinaryOp::Le, "less_equal", a, b); }
Tensor greater(const Tensor& a, const Tensor& b) { return comparison(BinaryOp::Gt, "greater", a, b); }
Tensor greater_equal(const Tensor& a, const Tensor& b) { return comparison(BinaryOp::Ge, "greater_equal", a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return logical(BinaryOp::And, "logical_and", a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return logical(BinaryOp::Or, "logical_or", a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return logical(BinaryOp::Xor, "logical_xor", a, b); }
Tensor logical_not(const Tensor& a) {
  detail::check_defined(a, "logical_not");
  return unary_kernel(UnaryOp::Not, detail::cast_raw(a, DType::Bool), DType::Bool);
}

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) {
  const char* name = "where";
  detail::check_defined(c, name);
  detail::check_defined(a, name);
  detail::check_defined(b, name);
  detail::check_same_device(c, a, name);
  detail::check_same_device(a, b, name);
  const Shape shape = broadcast_shapes(c.shape(), broadcast_shapes(a.shape(), b.shape(), name), name);
  const DType dt = promote_types(a.dtype(), b.dtype());
  const DType kd = detail::kernel_dtype(dt);
  Tensor out = detail::alloc(shape, kd, a.device());
  kWhere(a.device())(out, detail::broadcast_view(detail::cast_raw(c, DType::Bool), shape),
                     detail::broadcast_view(detail::cast_raw(a, kd), shape),
                     detail::broadcast_view(detail::cast_raw(b, kd), shape));
  Tensor y = detail::cast_raw(out, dt);
  if (!detail::needs_grad({&a, &b})) return y;
  return detail::record("where", {a, b}, y, [cd = detail::save(c)](const Tensor& g) {
    Tensor z = zeros_like(g);
    return Grads{where(cd, g, z), where(cd, z, g)};
  });
}

Tensor clip(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  detail::check_defined(x, "clip");
  // min(max(x, lo), hi) also when lo > hi (every element becomes hi), as NumPy and PyTorch
  Tensor y = x;
  {
    NoGrad off;
    if (lo) y = maximum(y, scalar_tensor(*lo, lo->result_dtype_with(x.dtype()), x.device()));
    if (hi) y = minimum(y, scalar_tensor(*hi, hi->result_dtype_with(y.dtype()), x.device()));
    if (y.impl() == x.impl()) y = x.copy();
  }
  if (!detail::needs_grad({&x})) return y;
  return detail::record("clip", {x}, y, [xd = detail::save(x), lo, hi](const Tensor& g) {
    Tensor keep = ones(xd.shape(), DType::Bool, xd.device());
    if (lo) keep = logical_and(keep, greater_equal(xd, scalar_tensor(*lo, lo->result_dtype_with(xd.dtype()), xd.device())));
    if (hi) keep = logical_and(keep, less_equal(xd, scalar_tensor(*hi, hi->result_dtype_with(xd.dtype()), xd.device())));
    return Grads{where(keep, g, zeros_like(g))};
  });
}

// ---------------------------------------------------------------- unary
Tensor negative(const Tensor& x) {
  detail::check_defined(x, "negative");
  if (x.dtype() == DType::Bool) throw DTypeError("negative: bool tensors cannot be negated (use logical_not)");
  Tensor y = unary_kernel(UnaryOp::Neg, x, x.dtype());
  if (!detail::needs_grad({&x})) return y;
  return detail::record("negative", {x}, y, [](const Tensor& g) { return Grads{negative(g)}; });
}

Tensor abs(const Tensor& x) {
  detail::check_defined(x, "abs");
  if (x.dtype() == DType::Bool) return x.copy();
  Tensor y = unary_kernel(UnaryOp::Abs, x, x.dtype());
  if (!detail::needs_grad({&x})) return y;
  return detail::record("abs", {x}, y, [xd = detail::save(x)](const Tensor& g) {
    // g * sign(x), with sign(NaN) taken as 0 (PyTorch's sgn; NumPy's sign(NaN) is NaN)
    return Grads{multiply(g, where(not_equal(xd, xd), zeros({}, xd.dtype(), xd.device()), sign(xd)))};
  });
}

Tensor sign(const Tensor& x) {
  detail::check_defined(x, "sign");
  if (x.dtype() == DType::Bool) return x.copy();
  Tensor y = unary_kernel(UnaryOp::Sign, x, x.dtype());
  if (!detail::needs_grad({&x})) return y;
  return detail::record("sign", {x}, y, [](const Tensor& g) { return Grads{zeros_like(g)}; });
}

Tensor square(const Tensor& x) {
  detail::check_defined(x, "square");
  Tensor y = unary_kernel(UnaryOp::Square, x, x.dtype() == DType::Bool ? DType::Int64 : x.dtype());
  if (!detail::needs_grad({&x})) return y;
  return detail::record("square", {x}, y, [xd = detail::save(x)](const Tensor& g) {
    return Grads{multiply(g, multiply(xd, scalar_tensor(2.0, xd.dtype(), xd.device())))};
  });
}

Tensor relu(const Tensor& x) {
  detail::check_defined(x, "relu");
  Tensor y = unary_kernel(UnaryOp::Relu, x, x.dtype());
  if (!detail::needs_grad({&x})) return y;
  return detail::record("relu", {x}, y, [yd = detail::save(y)](const Tensor& g) {
    // 0 where y <= 0, so relu'(0) = 0 and relu'(NaN) = 1 (PyTorch's threshold_backward)
    return Grads{binary_kernel(BinaryOp::ReluGrad, "relu", g, yd, yd.dtype(), yd.dtype())};
  });
}

Tensor exp(const Tensor& x) {
  return float_unary(UnaryOp::Exp, "exp", x, [](const Tensor&, const Tensor& y, const Tensor& g) { return multiply(g, y); });
}
Tensor log(const Tensor& x) {
  return float_unary(UnaryOp::Log, "log", x, [](const Tensor& x, const Tensor&, const Tensor& g) { return divide(g, x); });
}
Tensor log1p(const Tensor& x) {
  return float_unary(UnaryOp::Log1p, "log1p", x,
                     [](const Tensor& x, const Tensor&, const Tensor& g) { return divide(g, x + 1.0); });
}
Tensor expm1(const Tensor& x) {
  return float_unary(UnaryOp::Expm1, "expm1", x,
                     [](const Tensor&, const Tensor& y, const Tensor& g) { return multiply(g, y + 1.0); });
}
Tensor sqrt(const Tensor& x) {
  return float_unary(UnaryOp::Sqrt, "sqrt", x,
                     [](const Tensor&, const Tensor& y, const Tensor& g) { return divide(g, y * 2.0); });
}
Tensor rsqrt(const Tensor& x) {
  // d/dx x^-1/2 = -1/2 x^-3/2 = -1/2 y^3
  return float_unary(UnaryOp::Rsqrt, "rsqrt", x, [](const Tensor&, const Tensor& y, const Tensor& g) {
    return multiply(g, multiply(y, square(y)) * -0.5);
  });
}
Tensor sin(const Tensor& x) {
  return float_unary(UnaryOp::Sin, "sin", x, [](const Tensor& x, const Tensor&, const Tensor& g) { return multiply(g, cos(x)); });
}
Tensor cos(const Tensor& x) {
  return float_unary(UnaryOp::Cos, "cos", x,
                     [](const Tensor& x, const Tensor&, const Tensor& g) { return negative(multiply(g, sin(x))); });
}
Tensor tanh(const Tensor& x) {
  return float_unary(UnaryOp::Tanh, "tanh", x,
                     [](const Tensor&, const Tensor& y, const Tensor& g) { return multiply(g, 1.0 - square(y)); });
}
Tensor sigmoid(const Tensor& x) {
  return float_unary(UnaryOp::Sigmoid, "sigmoid", x,
                     [](const Tensor&, const Tensor& y, const Tensor& g) { return multiply(g, multiply(y, 1.0 - y)); });
}
Tensor erf(const Tensor& x) {
  return float_unary(UnaryOp::Erf, "erf", x, [](const Tensor& x, const Tensor&, const Tensor& g) {
    return multiply(g, exp(negative(square(x))) * (2.0 / std::sqrt(M_PI)));
  });
}
Tensor floor(const Tensor& x) {
  detail::check_defined(x, "floor");
  if (!is_floating(x.dtype())) return x.copy();
  return float_unary(UnaryOp::Floor, "floor", x, [](const Tensor&, const Tensor&, const Tensor& g) { return zeros_like(g); });
}
Tensor ceil(const Tensor& x) {
  detail::check_defined(x, "ceil");
  if (!is_floating(x.dtype())) return x.copy();
  return float_unary(UnaryOp::Ceil, "ceil", x, [](const Tensor&, const Tensor&, const Tensor& g) { return zeros_like(g); });
}
Tensor round(const Tensor& x) {
  detail::check_defined(x, "round");
  if (!is_floating(x.dtype())) return x.copy();
  return float_unary(UnaryOp::Round, "round", x, [](const Tensor&, const Tensor&, const Tensor& g) { return zeros_like(g); });
}

// Activations composed of the primitives above, so their gradients come for free.
Tensor leaky_relu(const Tensor& x, double slope) { return where(x > 0.0, x, x * slope); }
// The branch test is PyTorch's x <= 0: elu'(0) = alpha, and NaN takes the identity branch
// (elu'(NaN) = 1). The inner where keeps expm1 away from large x without splitting the
// gradient at 0 (minimum(x, 0) would give alpha / 2 there).
Tensor elu(const Tensor& x, double alpha) {
  const Tensor neg = x <= 0.0;
  return where(neg, expm1(where(neg, x, 0.0)) * alpha, x);
}
// The tanh form's composite is nine elementwise ops (nine full-size intermediates, nine recorded
// nodes); float32 takes the backend's fused kernel where it has one: the same bits forward, one
// recorded node keeping x alone, its gradient in one pass.
Tensor gelu(const Tensor& x, bool tanh_approximation) {
  if (tanh_approximation) {
    const double c = std::sqrt(2.0 / M_PI);
    detail::check_defined(x, "gelu");
    if (x.dtype() == DType::Float32 && x.numel() > 0 && kGeluTanhF32.if_filled(x.device()) &&
        kGeluTanhBackwardF32.if_filled(x.device())) {
      const Tensor xc = detail::contiguous_raw(x);
      Tensor y = detail::alloc(x.shape(), DType::Float32, x.device());
      kGeluTanhF32(x.device())(y, xc);
      if (!detail::needs_grad({&x})) return y;
      return detail::record("gelu", {x}, y, [xd = detail::save(xc)](const Tensor& g) {
        const Tensor& xs = xd.get();
        Tensor gx = detail::alloc(xs.shape(), DType::Float32, xs.device());
        kGeluTanhBackwardF32(xs.device())(gx, detail::contiguous_raw(detail::cast_raw(g, DType::Float32)), xs);
        return Grads{gx};
      });
    }
    return x * 0.5 * (1.0 + tanh((x + x * x * x * 0.044715) * c));
  }
  return x * 0.5 * (1.0 + erf(x * M_SQRT1_2));
}
Tensor silu(const Tensor& x) { return x * sigmoid(x); }
Tensor softplus(const Tensor& x, double beta, double threshold) {
  // log(1 + exp(beta x)) / beta, linear above the threshold (as in PyTorch), stable below it
  Tensor bx = x * beta;
  Tensor soft = (maximum(bx, 0.0) + log1p(exp(negative(abs(bx))))) / beta;
  return where(bx > threshold, x, soft);
}

Tensor astype(const Tensor& x, DType dtype) {
  detail::check_defined(x, "astype");
  if (x.dtype() == dtype) return x;
  Tensor y = detail::cast_raw(x, dtype);
  if (!detail::needs_grad({&x}) || !is_floating(dtype)) return y;
  return detail::record("astype", {x}, y, [](const Tensor& g) { return Grads{g}; });
}

// ---------------------------------------------------------------- operators
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return subtract(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return multiply(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return divide(a, b); }
Tensor operator%(const Tensor& a, const Tensor& b) { return mod(a, b); }
Tensor operator-(const Tensor& a) { return negative(a); }
Tensor operator==(const Tensor& a, const Tensor& b) { return equal(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return not_equal(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return less(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return less_equal(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return greater(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return greater_equal(a, b); }
Tensor operator&&(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
Tensor operator||(const Tensor& a, const Tensor& b) { return logical_or(a, b); }
Tensor operator!(const Tensor& a) { return logical_not(a); }

// Arithmetic takes the weak rule's dtype; comparisons only need the scalar's value, compared
// in the promoted dtype (exact for integer tensors against float scalars).
Tensor operator+(const Tensor& a, Scalar b) { return add(lifted(a, b, "add"), weak(b, a, "add")); }
Tensor operator-(const Tensor& a, Scalar b) { return subtract(lifted(a, b, "subtract"), weak(b, a, "subtract")); }
Tensor operator*(const Tensor& a, Scalar b) { return multiply(lifted(a, b, "multiply"), weak(b, a, "multiply")); }
Tensor operator/(const Tensor& a, Scalar b) { return divide(lifted(a, b, "divide"), weak(b, a, "divide")); }
Tensor operator+(Scalar a, const Tensor& b) { return add(weak(a, b, "add"), lifted(b, a, "add")); }
Tensor operator-(Scalar a, const Tensor& b) { return subtract(weak(a, b, "subtract"), lifted(b, a, "subtract")); }
Tensor operator*(Scalar a, const Tensor& b) { return multiply(weak(a, b, "multiply"), lifted(b, a, "multiply")); }
Tensor operator/(Scalar a, const Tensor& b) { return divide(weak(a, b, "divide"), lifted(b, a, "divide")); }
Tensor operator==(const Tensor& a, Scalar b) { return equal(a, weak(b, a, "equal")); }
Tensor operator!=(const Tensor& a, Scalar b) { return not_equal(a, weak(b, a, "not_equal")); }
Tensor operator<(const Tensor& a, Scalar b) { return less(a, weak(b, a, "less")); }
Tensor operator<=(const Tensor& a, Scalar b) { return less_equal(a, weak(b, a, "less_equal")); }
Tensor operator>(const Tensor& a, Scalar b) { return greater(a, weak(b, a, "greater")); }
Tensor operator>=(const Tensor& a, Scalar b) { return greater_equal(a, weak(b, a, "greater_equal")); }
Tensor power(const Tensor& a, Scalar b) { return power(lifted(a, b, "power"), weak(b, a, "power")); }
Tensor maximum(const Tensor& a, Scalar b) { return maximum(lifted(a, b, "maximum"), weak(b, a, "maximum")); }
Tensor minimum(const Tensor& a, Scalar b) { return minimum(lifted(a, b, "minimum"), weak(b, a, "minimum")); }
Tensor where(const Tensor& c, const Tensor& a, Scalar b) { return where(c, lifted(a, b, "where"), weak(b, a, "where")); }
Tensor where(const Tensor& c, Scalar a, const Tensor& b) { return where(c, weak(a, b, "where"), lifted(b, a, "where")); }

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  NoGrad off;
  if (broadcast_shapes(a.shape(), b.shape(), "allclose").empty() && (a.numel() == 0 || b.numel() == 0)) return true;
  Tensor a64 = astype(a, DType::Float64), b64 = astype(b, DType::Float64);
  // numpy.isclose: the tolerance applies where both are finite; otherwise only equal values
  // (equal infinities) are close
  const double inf = std::numeric_limits<double>::infinity();
  Tensor finite = logical_and(abs(a64) < inf, abs(b64) < inf);
  Tensor close = logical_or(equal(a64, b64), logical_and(finite, less_equal(abs(a64 - b64), atol + abs(b64) * rtol)));
  if (equal_nan) close = logical_or(close, logical_and(not_equal(a64, a64), not_equal(b64, b64)));
  return all(close).item<bool>();
}

bool array_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  NoGrad off;
  return all(equal(a, b)).item<bool>();
}

}  // namespace loom

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> elementwise_ops() {
  return {
      {"add", "elementwise", true}, {"subtract", "elementwise", true}, {"multiply", "elementwise", true},
      {"divide", "elementwise", true}, {"power", "elementwise", true}, {"maximum", "elementwise", true},
      {"minimum", "elementwise", true}, {"mod", "elementwise", true}, {"floor_divide", "elementwise", false},
      {"equal", "elementwise", false}, {"not_equal", "elementwise", false}, {"less", "elementwise", false},
      {"less_equal", "elementwise", false}, {"greater", "elementwise", false}, {"greater_equal", "elementwise", false},
      {"logical_and", "elementwise", false}, {"logical_or", "elementwise", false}, {"logical_xor", "elementwise", false},
      {"logical_not", "elementwise", false}, {"where", "elementwise", true}, {"clip", "elementwise", true},
      {"abs", "elementwise", true}, {"sign", "elementwise", false}, {"negative", "elementwise", true},
      {"exp", "elementwise", true}, {"log", "elementwise", true}, {"log1p", "elementwise", true},
      {"expm1", "elementwise", true}, {"sqrt", "elementwise", true}, {"rsqrt", "elementwise", true},
      {"square", "elementwise", true}, {"sin", "elementwise", true}, {"cos", "elementwise", true},
      {"tanh", "elementwise", true}, {"sigmoid", "elementwise", true}, {"relu", "elementwise", true},
      {"leaky_relu", "elementwise", true}, {"elu", "elementwise", true}, {"gelu", "elementwise", true},
      {"silu", "elementwise", true}, {"softplus", "elementwise", true}, {"erf", "elementwise", true},
      {"floor", "elementwise", false}, {"ceil", "elementwise", false}, {"round", "elementwise", false},
      {"astype", "elementwise", true},
  };
}

}  // namespace loom::detail
