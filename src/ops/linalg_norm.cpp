// linalg.norm (vector and matrix norms) and kron: compositions of differentiable ops, except
// the p-norm, which has PyTorch's rule (a zero vector gets a zero gradient, not 0 * inf).
#include <cmath>
#include <limits>

#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"
#include "ops/internal.h"
#include "ops/linalg_internal.h"
#include "ops/registry_parts.h"

namespace loom {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string ord_str(double p) {
  if (p == kInf) return "inf";
  if (p == -kInf) return "-inf";
  std::string s = std::to_string(p);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// (sum |x|^p)^(1/p) over axes with PyTorch's gradient g * sgn(x) |x|^(p-1) / norm^(p-1),
// zero where the norm is zero.
Tensor p_norm(const Tensor& x, double p, const Axes& axes, bool keepdims) {
  Tensor nk;  // keepdims
  {
    NoGrad off;
    if (p == 1) nk = sum(abs(x), axes, true);
    else if (p == 2) nk = sqrt(sum(square(x), axes, true));
    else nk = power(sum(power(abs(x), p), axes, true), 1.0 / p);
  }
  Shape out = x.shape();
  if (!keepdims) {
    Shape s;
    std::vector<bool> red(static_cast<size_t>(x.ndim()), false);
    for (int64_t a : axes) red[a] = true;
    for (int64_t i = 0; i < x.ndim(); ++i)
      if (!red[i]) s.push_back(x.shape()[i]);
    out = s;
  } else {
    out = nk.shape();
  }
  Tensor y = detail::contiguous_raw(nk);
  y = Tensor(y.storage(), out, contiguous_strides(out), y.offset(), y.dtype());
  if (!detail::needs_grad({&x})) return y;
  return detail::record("linalg.norm", {x}, y, [xd = detail::save(x), nd = detail::save(nk), p](const Tensor& g) {
    const Tensor &xv = xd, &n = nd;
    Tensor gk = reshape(g, n.shape());
    Tensor scale = p == 1 ? gk : divide(gk, p == 2 ? n : power(n, p - 1));
    scale = where(n == 0.0, 0.0, scale);
    Tensor dx = p == 1 ? sign(xv) : p == 2 ? xv : multiply(sign(xv), power(abs(xv), p - 1));
    return std::vector<Tensor>{multiply(dx, scale)};
  });
}

Tensor vector_norm(const Tensor& x, double p, const Axes& axes, bool keepdims) {
  if (p == kInf) return max(abs(x), axes, keepdims);
  if (p == -kInf) return min(abs(x), axes, keepdims);
  if (p == 0) {  // the count of non-zeros: a zero gradient (as PyTorch), but still a node of x's graph
    Tensor y = sum(astype(x != 0.0, x.dtype()), axes, keepdims);
    if (!detail::needs_grad({&x})) return y;
    return detail::record("linalg.norm", {x}, y, [](const Tensor&) { return std::vector<Tensor>{Tensor()}; });
  }
  return p_norm(x, p, axes, keepdims);
}

// ord: a number, or "fro" / "nuc" (number ignored then)
Tensor matrix_norm(const Tensor& x, double p, const std::string& name, int64_t d0, int64_t d1, bool keepdims) {
  if (name == "fro") return p_norm(x, 2, {d0, d1}, keepdims);
  auto restore = [&](Tensor r) {  // r reduced over d0, d1 (keepdims=true shape)
    return keepdims ? r : squeeze(r, {d0, d1});
  };
  if (name == "nuc" || p == 2 || p == -2) {
    Tensor s = linalg::svdvals(moveaxis(moveaxis(x, d0, -1), d1 > d0 ? d1 - 1 : d1, -1));
    // moveaxis twice leaves (..., x.shape[d0], x.shape[d1])
    Tensor r = name == "nuc" ? sum(s, {-1}) : p == 2 ? max(s, {-1}) : min(s, {-1});
    if (!keepdims) return r;
    const int64_t lo = std::min(d0, d1), hi = std::max(d0, d1);
    return expand_dims(expand_dims(r, lo), hi);
  }
  if (p == 1 || p == -1) {
    Tensor c = sum(abs(x), {d0}, true);
    return restore(p == 1 ? max(c, {d1}, true) : min(c, {d1}, true));
  }
  if (p == kInf || p == -kInf) {
    Tensor r = sum(abs(x), {d1}, true);
    return restore(p == kInf ? max(r, {d0}, true) : min(r, {d0}, true));
  }
  throw ValueError("linalg.norm: the matrix norm ord " + ord_str(p) +
                   " is not supported (give 1, -1, 2, -2, inf, -inf, \"fro\" or \"nuc\")");
}

Tensor norm_impl(const Tensor& x, std::optional<double> ord, const std::string& name, std::optional<Axes> axes,
                 bool keepdims) {
  detail::check_defined(x, "linalg.norm");
  if (x.dtype() != Float32 && x.dtype() != Float64)
    throw DTypeError("linalg.norm: expected a float32 or float64 tensor, got " + detail::describe_operands({&x}) +
                     " (convert it with astype)");
  const bool has_ord = ord.has_value() || !name.empty();
  Axes ax;
  if (axes) {
    for (int64_t a : *axes) ax.push_back(normalize_axis(a, x.ndim(), "linalg.norm"));
    if (ax.size() == 2 && ax[0] == ax[1])
      throw ValueError("linalg.norm: axes " + shape_str(*axes) + " name the same axis twice");
    if (ax.empty() || ax.size() > 2)
      throw ValueError("linalg.norm: axes must name 1 axis (vector norm) or 2 (matrix norm), got " + shape_str(*axes));
  } else if (!has_ord) {
    for (int64_t i = 0; i < x.ndim(); ++i) ax.push_back(i);
    return p_norm(x, 2, ax, keepdims);  // the 2-norm of the flattened input
  } else if (x.ndim() == 1 || x.ndim() == 2) {
    for (int64_t i = 0; i < x.ndim(); ++i) ax.push_back(i);
  } else {
    throw ShapeError("linalg.norm: an ord without axes needs a 1-d or 2-d input, got " + detail::describe_operands({&x}) +
                     " (give the axes)");
  }
  if (ax.size() == 1) {
    if (!name.empty())
      throw ValueError("linalg.norm: ord \"" + name + "\" is a matrix norm; it needs 2 axes or a 2-d input, got " +
                       detail::describe_operands({&x}));
    return vector_norm(x, ord.value_or(2.0), ax, keepdims);
  }
  return matrix_norm(x, ord.value_or(0.0), name.empty() && !ord ? "fro" : name, ax[0], ax[1], keepdims);
}

}  // namespace

namespace linalg {
Tensor norm(const Tensor& x, std::optional<double> ord, std::optional<Axes> axes, bool keepdims) {
  return norm_impl(x, ord, "", std::move(axes), keepdims);
}
Tensor norm(const Tensor& x, const std::string& ord, std::optional<Axes> axes, bool keepdims) {
  if (ord != "fro" && ord != "nuc")
    throw ValueError("linalg.norm: ord \"" + ord + "\" is not a norm (give \"fro\", \"nuc\" or a number)");
  return norm_impl(x, std::nullopt, ord, std::move(axes), keepdims);
}
}  // namespace linalg

Tensor kron(const Tensor& a, const Tensor& b) {
  detail::check_defined(a, "kron");
  detail::check_defined(b, "kron");
  const int64_t nd = std::max(a.ndim(), b.ndim());
  Shape sa(static_cast<size_t>(nd), 1), sb(static_cast<size_t>(nd), 1), ia, ib, out;
  std::copy(a.shape().begin(), a.shape().end(), sa.end() - a.ndim());
  std::copy(b.shape().begin(), b.shape().end(), sb.end() - b.ndim());
  for (int64_t i = 0; i < nd; ++i) {  // a as (a0, 1, a1, 1, ...), b as (1, b0, 1, b1, ...)
    ia.insert(ia.end(), {sa[i], 1});
    ib.insert(ib.end(), {1, sb[i]});
    out.push_back(checked_mul(sa[i], sb[i], "kron"));
  }
  return reshape(multiply(reshape(a, ia), reshape(b, ib)), out);
}

}  // namespace loom

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> linalg_norm_ops() {
  return {
      {"kron", "linalg", true}, {"linalg.norm", "linalg", true},
  };
}

}  // namespace loom::detail
