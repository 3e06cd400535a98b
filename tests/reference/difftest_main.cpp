// loom_difftest OUTDIR [--seeds A:B]: random differential testing (docs/testing.md). Each seed
// builds a random chain of registry ops: random leaves (0-d, size-1 and empty axes; contiguous,
// transposed, offset, strided, reversed and broadcast views; float32/float64), then steps that
// each feed on earlier values with random attributes in the op's valid domain. The chain runs
// with autograd on; the gradients of sum(final * W) (W random) with respect to every value
// (leaves and intermediates) are taken with one loom::grad call. Each step is also re-run in
// isolation on detached copies of its inputs, with the chain gradient of its output as the
// cotangent. Everything is written as .npy files plus OUTDIR/manifest.json, which
// tests/reference/check_difftest.py replays in PyTorch (with check_ops.py's per-op replays).
#include <loom/data/npy.h>
#include <loom/loom.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "reference/json_util.h"
#include "reference/op_cases.h"

using namespace loom;
using namespace loom::reftest;

namespace {

constexpr DType F32 = Float32, F64 = Float64;
constexpr int kNotApplicable = -2;  // an op generator that does not fit the current value
constexpr int kRaised = -1;         // Loom raised: the chain stops there
constexpr double kMargin = 1e-3;    // distance kept from kinks, ties and discontinuities
constexpr int64_t kMaxNumel = 600;  // keeps chains small and fast

struct Val {
  Tensor t;
  int producer = -1;   // the step that made it, -1 for a leaf
  std::string layout;  // leaves: how the view was made
};

struct Step {
  std::string op, attrs;
  std::vector<int> args;
  CaseFn fn;
  int out = -1;
  std::string error;
};

class Chain {
 public:
  explicit Chain(uint64_t seed) : rng(splitmix(seed * 0x2545F4914F6CDD1DULL + 17)) {}
  std::mt19937_64 rng;
  std::vector<Val> vals;
  std::vector<Step> steps;
  DType dt = F32;  // the chain's float dtype (other-dtype operands appear too)
  bool stopped = false;

  double U(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }
  int64_t I(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }  // inclusive
  bool P(double p) { return U(0, 1) < p; }
  template <class T> T pick(const std::vector<T>& v) { return v.at(static_cast<size_t>(I(0, static_cast<int64_t>(v.size()) - 1))); }

  const Tensor& t(int v) const { return vals.at(v).t; }
  Shape sh(int v) const { return t(v).shape(); }
  int64_t rank(int v) const { return t(v).ndim(); }
  DType other_dt() const { return dt == F32 ? F64 : F32; }
  DType opdt() { return P(0.15) ? other_dt() : dt; }  // an operand's dtype (sometimes mixed: promotion)

  // A new leaf. With `any_layout` the op sees a random view: contiguous, transposed, offset
  // ([k:k+n] of a longer base), strided ([..., 1::2]), reversed ([::-1]) or broadcast (stride 0).
  int leaf(Shape s, DType d, Domain dom, bool diff = true, bool any_layout = true) {
    InputSpec spec;
    spec.domain = dom;
    return leaf_values(std::move(s), d, [&](int64_t n) { return gen_values(spec, n, rng); }, diff, any_layout);
  }
  int uniform_leaf(Shape s, DType d, double lo, double hi, bool diff = true) {
    return leaf_values(std::move(s), d, [&](int64_t n) {
      std::vector<double> v(static_cast<size_t>(n));
      for (auto& x : v) x = U(lo, hi);
      return v;
    }, diff, true);
  }
  int int_leaf(Shape s, int64_t lo, int64_t hi) {  // int64 values in [lo, hi)
    return leaf_values(std::move(s), Int64, [&](int64_t n) {
      std::vector<double> v(static_cast<size_t>(n));
      for (auto& x : v) x = static_cast<double>(I(lo, hi - 1));
      return v;
    }, false, true);
  }
  int bool_leaf(Shape s, double p_true) {
    return leaf_values(std::move(s), Bool, [&](int64_t n) {
      std::vector<double> v(static_cast<size_t>(n));
      for (auto& x : v) x = P(p_true) ? 1 : 0;
      return v;
    }, false, true);
  }
  int leaf_values(Shape s, DType d, const std::function<std::vector<double>(int64_t)>& draw, bool diff, bool any_layout) {
    NoGrad no_grad;
    const int64_t nd = static_cast<int64_t>(s.size());
    std::string layout = "contiguous";
    if (any_layout && nd > 0) {
      const double r = U(0, 1);
      if (r < 0.15 && nd >= 2) layout = "transposed";
      else if (r < 0.3) layout = "offset";
      else if (r < 0.45) layout = "strided";
      else if (r < 0.6) layout = "reversed";
      else if (r < 0.72) layout = "broadcast";
    }
    Shape base = s;
    int64_t off = 0;
    std::vector<int64_t> bc_axes;
    if (layout == "transposed") std::reverse(base.begin(), base.end());
    if (layout == "strided") base.back() = base.back() * 2 + 1;
    if (layout == "offset") {
      off = I(1, 3);
      base[0] += off + I(0, 2);
    }
    if (layout == "broadcast") {
      for (int64_t i = 0; i < nd; ++i)
        if (s[i] != 1 && P(0.5)) bc_axes.push_back(i);
      if (bc_axes.empty()) layout = "contiguous";
      for (int64_t a : bc_axes) base[a] = 1;
    }
    Tensor b = astype(from_vector<double>(draw(shape_numel(base)), base), d);
    Tensor v = b;
    if (layout == "transposed") v = transpose(b);
    else if (layout == "strided") v = slice(b, -1, 1, std::nullopt, 2);
    else if (layout == "offset") v = slice(b, 0, off, off + s[0], 1);
    else if (layout == "reversed") v = slice(b, 0, std::nullopt, std::nullopt, -1);
    else if (layout == "broadcast") v = broadcast_to(b, s);
    if (v.shape() != s) throw std::logic_error("difftest: a leaf layout changed the shape");
    v = v.detach();
    if (diff && is_floating(d)) v.requires_grad_(true);
    vals.push_back({v, -1, layout});
    return static_cast<int>(vals.size()) - 1;
  }

  // Runs one step on values `args`; returns the output value, or kRaised (the chain stops).
  int apply(const std::string& op, std::string attrs, std::vector<int> args, CaseFn fn) {
    if (!find_op(op)) throw std::logic_error("difftest: '" + op + "' is not in the op registry");
    Step st{op, std::move(attrs), std::move(args), std::move(fn)};
    std::vector<Tensor> in;
    for (int a : st.args) in.push_back(t(a));
    try {
      Tensor out = st.fn(in);
      vals.push_back({out, static_cast<int>(steps.size()), ""});
      st.out = static_cast<int>(vals.size()) - 1;
    } catch (const std::exception& e) {
      st.error = e.what();
      stopped = true;
    }
    steps.push_back(std::move(st));
    return steps.back().out >= 0 ? steps.back().out : kRaised;
  }

  std::vector<double> values(int v) const {
    NoGrad off;
    return astype(t(v), F64).to_vector<double>();
  }
};

// ---------------------------------------------------------------- value checks (domains)
double vmin(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }
double vmax(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }
double vmaxabs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}
bool finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}
// Every element exactly at a kink or at least kMargin (relative) away from it: float32 drift in
// the float64 reference chain must not move an element across the kink.
bool away_from(const std::vector<double>& v, double kink, bool exact_ok) {
  for (double x : v)
    if (!(exact_ok && x == kink) && std::fabs(x - kink) <= kMargin * std::max(1.0, std::fabs(kink))) return false;
  return true;
}
// Distinct values differ by more than kMargin (relative): no near-ties for max/min/argmax/sorting
// comparisons (exact ties, e.g. broadcast copies, stay ties in the reference).
bool no_near_ties(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  for (size_t i = 1; i < v.size(); ++i) {
    const double d = v[i] - v[i - 1];
    if (d != 0 && d <= kMargin * std::max(1.0, std::fabs(v[i]))) return false;
  }
  return true;
}
// Elementwise a - b (broadcast) away from 0 or exactly 0.
bool no_near_ties(const Chain& c, int a, int b) {
  NoGrad off;
  return away_from(astype(subtract(c.t(a), c.t(b)), F64).to_vector<double>(), 0, true);
}
bool frac_away(const std::vector<double>& v, double shift) {  // x + shift away from the integers
  for (double x : v) {
    const double f = x + shift - std::floor(x + shift);
    if (std::fabs(x) > 1e6 || f <= kMargin || f >= 1 - kMargin) return false;
  }
  return true;
}

// ---------------------------------------------------------------- shape helpers
std::string dts(DType d) { return dtype_name(d); }
Axes random_axes(Chain& c, int64_t nd, bool allow_empty_meaning_all = true) {
  Axes a;
  if (nd == 0) return a;
  if (allow_empty_meaning_all && c.P(0.25)) return a;
  for (int64_t i = 0; i < nd; ++i)
    if (c.P(0.5)) a.push_back(c.P(0.3) ? i - nd : i);
  if (a.empty()) a.push_back(c.I(0, nd - 1));
  std::shuffle(a.begin(), a.end(), c.rng);
  return a;
}
Shape reduced_shape(const Shape& s, const Axes& axes, bool keep) {
  const int64_t nd = static_cast<int64_t>(s.size());
  std::vector<bool> red(s.size(), axes.empty());
  for (int64_t a : axes) red[static_cast<size_t>((a % nd + nd) % nd)] = true;
  Shape o;
  for (size_t i = 0; i < s.size(); ++i)
    if (!red[i]) o.push_back(s[i]);
    else if (keep) o.push_back(1);
  return o;
}
bool reduces_empty(const Shape& s, const Axes& axes) {  // some reduced axis has size 0
  const int64_t nd = static_cast<int64_t>(s.size());
  for (int64_t i = 0; i < nd; ++i) {
    bool red = axes.empty();
    for (int64_t a : axes) red |= (a % nd + nd) % nd == i;
    if (red && s[i] == 0) return true;
  }
  return false;
}
// A shape that broadcasts against `s` (a trailing part, some axes 1, sometimes one more axis).
Shape broadcast_partner(Chain& c, const Shape& s) {
  Shape o;
  const int64_t nd = static_cast<int64_t>(s.size());
  const int64_t k = c.P(0.6) ? nd : c.I(0, nd);
  for (int64_t i = nd - k; i < nd; ++i) o.push_back(c.P(0.25) ? 1 : s[i]);
  if (k == nd && nd < 4 && c.P(0.12)) o.insert(o.begin(), c.I(1, 3));
  return o;
}
Shape bshape(const Shape& a, const Shape& b) {
  Shape o(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < o.size(); ++i) {
    const int64_t x = i < o.size() - a.size() ? 1 : a[i - (o.size() - a.size())];
    const int64_t y = i < o.size() - b.size() ? 1 : b[i - (o.size() - b.size())];
    o[i] = x == 1 ? y : x;
  }
  return o;
}
Shape random_shape(Chain& c, int64_t nd) {
  Shape s;
  for (int64_t i = 0; i < nd; ++i) {
    const double r = c.U(0, 1);
    s.push_back(r < 0.04 ? 0 : r < 0.22 ? 1 : c.I(2, 5));
  }
  return s;
}
int64_t wrap(Chain& c, int64_t axis, int64_t nd) { return c.P(0.3) ? axis - nd : axis; }  // sometimes negative

// The value's numel after growing by `factor` stays small.
bool room(const Chain& c, int v, int64_t factor) { return c.t(v).numel() * factor <= kMaxNumel; }

using In = std::vector<Tensor>;
using OpGen = std::function<int(Chain&, int)>;

struct GenOp {
  std::string op;  // registry name of the main op it applies
  double weight;
  OpGen gen;
};

// ---------------------------------------------------------------- elementwise
int unary_step(Chain& c, int x, const std::string& op, const std::string& attrs, std::function<Tensor(const Tensor&)> f) {
  return c.apply(op, attrs, {x}, [f](const In& in) { return f(in[0]); });
}

std::vector<GenOp> elementwise_ops() {
  std::vector<GenOp> g;
  auto un = [&g](const std::string& op, double w, std::function<bool(Chain&, const std::vector<double>&)> ok,
                 std::function<Tensor(const Tensor&)> f, std::string attrs = "{}") {
    g.push_back({op, w, [=](Chain& c, int x) {
                   if (ok && !ok(c, c.values(x))) return kNotApplicable;
                   return unary_step(c, x, op, attrs, f);
                 }});
  };
  auto any = [](Chain&, const std::vector<double>& v) { return finite(v) && vmaxabs(v) < 1e4; };
  // relu and abs at exactly 0: gradient 0, as torch (docs/autograd.md); elu at exactly 0 too
  auto kink0 = [](Chain&, const std::vector<double>& v) { return away_from(v, 0, true) && vmaxabs(v) < 1e4; };
  un("abs", 1, kink0, [](const Tensor& x) { return loom::abs(x); });
  un("negative", 0.5, any, [](const Tensor& x) { return loom::negative(x); });
  un("exp", 1, [](Chain&, auto& v) { return vmax(v) < 5 && vmin(v) > -30; }, [](const Tensor& x) { return loom::exp(x); });
  un("expm1", 1, [](Chain&, auto& v) { return vmax(v) < 5; }, [](const Tensor& x) { return loom::expm1(x); });
  un("log", 1, [](Chain&, auto& v) { return vmin(v) > 0.05 && vmax(v) < 1e4; }, [](const Tensor& x) { return loom::log(x); });
  un("log1p", 1, [](Chain&, auto& v) { return vmin(v) > -0.9 && vmax(v) < 1e4; }, [](const Tensor& x) { return loom::log1p(x); });
  un("sqrt", 1, [](Chain&, auto& v) { return vmin(v) > 0.05 && vmax(v) < 1e4; }, [](const Tensor& x) { return loom::sqrt(x); });
  un("rsqrt", 1, [](Chain&, auto& v) { return vmin(v) > 0.1 && vmax(v) < 1e4; }, [](const Tensor& x) { return loom::rsqrt(x); });
  un("square", 1, [](Chain&, auto& v) { return vmaxabs(v) < 100; }, [](const Tensor& x) { return loom::square(x); });
  un("sin", 1, [](Chain&, auto& v) { return vmaxabs(v) < 50; }, [](const Tensor& x) { return loom::sin(x); });
  un("cos", 1, [](Chain&, auto& v) { return vmaxabs(v) < 50; }, [](const Tensor& x) { return loom::cos(x); });
  un("tanh", 1, any, [](const Tensor& x) { return loom::tanh(x); });
  un("sigmoid", 1, any, [](const Tensor& x) { return loom::sigmoid(x); });
  un("erf", 1, any, [](const Tensor& x) { return loom::erf(x); });
  un("relu", 1.5, kink0, [](const Tensor& x) { return loom::relu(x); });
  un("leaky_relu", 1, [](Chain&, auto& v) { return away_from(v, 0, false) && vmaxabs(v) < 1e4; },
     [](const Tensor& x) { return loom::leaky_relu(x, 0.2); }, "{\"negative_slope\":0.2}");
  un("elu", 1, kink0, [](const Tensor& x) { return loom::elu(x, 0.7); }, "{\"alpha\":0.7}");
  un("gelu", 0.5, any, [](const Tensor& x) { return loom::gelu(x); }, "{\"approximate\":\"none\"}");
  un("gelu", 0.5, any, [](const Tensor& x) { return loom::gelu(x, true); }, "{\"approximate\":\"tanh\"}");
  un("softplus", 1, any, [](const Tensor& x) { return loom::softplus(x, 1.5, 4.0); }, "{\"beta\":1.5,\"threshold\":4.0}");
  // not differentiable: the value flows on, the gradient stops (zeros upstream, as torch)
  un("floor", 0.3, [](Chain&, auto& v) { return frac_away(v, 0); }, [](const Tensor& x) { return loom::floor(x); });
  un("ceil", 0.3, [](Chain&, auto& v) { return frac_away(v, 0); }, [](const Tensor& x) { return loom::ceil(x); });
  un("round", 0.3, [](Chain&, auto& v) { return frac_away(v, 0.5); }, [](const Tensor& x) { return loom::round(x); });
  un("sign", 0.3, kink0, [](const Tensor& x) { return loom::sign(x); });
  g.push_back({"astype", 0.7, [](Chain& c, int x) {
                 const DType to = c.t(x).dtype() == F32 ? F64 : F32;
                 return c.apply("astype", "{\"dtype\":\"" + dts(to) + "\"}", {x},
                                [to](const In& in) { return loom::astype(in[0], to); });
               }});
  g.push_back({"clip", 1, [](Chain& c, int x) {
                 const auto v = c.values(x);
                 if (v.empty() || !finite(v)) return kNotApplicable;
                 double lo = c.U(vmin(v), vmax(v)), hi = c.U(lo, vmax(v) + 0.5);
                 if (c.P(0.08)) std::swap(lo, hi);  // lo > hi (pending fix: numpy gives hi everywhere)
                 std::optional<double> l = lo, h = hi;
                 if (c.P(0.15)) l.reset();
                 else if (c.P(0.15)) h.reset();
                 if ((l && !away_from(v, *l, false)) || (h && !away_from(v, *h, false))) return kNotApplicable;
                 const std::string attrs = std::string("{\"lo\":") + (l ? jd(*l) : "null") + ",\"hi\":" + (h ? jd(*h) : "null") + "}";
                 return c.apply("clip", attrs, {x}, [l, h](const In& in) {
                   return loom::clip(in[0], l ? std::optional<Scalar>(*l) : std::nullopt, h ? std::optional<Scalar>(*h) : std::nullopt);
                 });
               }});

  // binary: the other operand is the value itself, another value of the same shape, or a new
  // leaf of a broadcast-compatible shape (sometimes of the other float dtype)
  auto binary = [&g](const std::string& op, double w, std::function<Tensor(const Tensor&, const Tensor&)> f) {
    g.push_back({op, w, [=](Chain& c, int x) {
                   int y = -1;
                   if (c.P(0.1)) y = x;
                   else if (c.P(0.2)) {
                     std::vector<int> same;
                     for (int i = 0; i < static_cast<int>(c.vals.size()); ++i)
                       if (i != x && c.t(i).shape() == c.sh(x) && is_floating(c.t(i).dtype())) same.push_back(i);
                     if (!same.empty()) y = c.pick(same);
                   }
                   if (y < 0) y = c.leaf(broadcast_partner(c, c.sh(x)), c.opdt(), Domain::Normal);
                   if (!room(c, x, 2)) return kNotApplicable;
                   const auto vx = c.values(x), vy = c.values(y);
                   if (!finite(vx) || !finite(vy) || vmaxabs(vx) > 1e3 || vmaxabs(vy) > 1e3) return kNotApplicable;
                   if ((op == "maximum" || op == "minimum") && !no_near_ties(c, x, y)) return kNotApplicable;
                   std::vector<int> args = c.P(0.5) ? std::vector<int>{x, y} : std::vector<int>{y, x};
                   return c.apply(op, "{}", args, [f](const In& in) { return f(in[0], in[1]); });
                 }});
  };
  binary("add", 1.5, [](auto& a, auto& b) { return loom::add(a, b); });
  binary("subtract", 1, [](auto& a, auto& b) { return loom::subtract(a, b); });
  binary("multiply", 1.5, [](auto& a, auto& b) { return loom::multiply(a, b); });
  binary("maximum", 1, [](auto& a, auto& b) { return loom::maximum(a, b); });
  binary("minimum", 1, [](auto& a, auto& b) { return loom::minimum(a, b); });
  // divisor-like operands come from leaves with a controlled domain
  auto divlike = [&g](const std::string& op, double w, std::function<Tensor(const Tensor&, const Tensor&)> f) {
    g.push_back({op, w, [=](Chain& c, int x) {
                   const auto vx = c.values(x);
                   if (!finite(vx) || vmaxabs(vx) > 1e3) return kNotApplicable;
                   const bool x_divisor = away_from(vx, 0, false) && vmin(vx) * vmax(vx) > 0 && c.P(0.3);
                   int y = c.leaf(broadcast_partner(c, c.sh(x)), c.opdt(), x_divisor ? Domain::Normal : Domain::AwayFromZero);
                   std::vector<int> args = x_divisor ? std::vector<int>{y, x} : std::vector<int>{x, y};
                   if (op != "divide") {  // mod / floor_divide: a / b away from the integers
                     NoGrad off;
                     const auto q = astype(divide(c.t(args[0]), c.t(args[1])), F64).to_vector<double>();
                     if (!frac_away(q, 0)) return kNotApplicable;
                   }
                   return c.apply(op, "{}", args, [f](const In& in) { return f(in[0], in[1]); });
                 }});
  };
  divlike("divide", 1.5, [](auto& a, auto& b) { return loom::divide(a, b); });
  divlike("mod", 0.7, [](auto& a, auto& b) { return loom::mod(a, b); });
  divlike("floor_divide", 0.3, [](auto& a, auto& b) { return loom::floor_divide(a, b); });
  g.push_back({"power", 1, [](Chain& c, int x) {
                 const auto vx = c.values(x);
                 if (vx.empty() || !finite(vx)) return kNotApplicable;
                 if (vmin(vx) > 0.1 && vmax(vx) < 10) {  // x as the base, a leaf exponent in [-2, 2]
                   int e = c.leaf(broadcast_partner(c, c.sh(x)), c.opdt(), Domain::Normal);
                   return c.apply("power", "{}", {x, e}, [](const In& in) { return loom::power(in[0], in[1]); });
                 }
                 if (vmaxabs(vx) > 3) return kNotApplicable;  // x as the exponent of a positive leaf base
                 int b = c.leaf(broadcast_partner(c, c.sh(x)), c.opdt(), Domain::Positive);
                 return c.apply("power", "{}", {b, x}, [](const In& in) { return loom::power(in[0], in[1]); });
               }});
  // where(cond, a, b) with cond a comparison of the value with a leaf (a side step whose bool
  // output is checked too)
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&)>>> cmps = {
      {"greater", [](auto& a, auto& b) { return loom::greater(a, b); }},
      {"less", [](auto& a, auto& b) { return loom::less(a, b); }},
      {"greater_equal", [](auto& a, auto& b) { return loom::greater_equal(a, b); }},
      {"less_equal", [](auto& a, auto& b) { return loom::less_equal(a, b); }},
      {"equal", [](auto& a, auto& b) { return loom::equal(a, b); }},
      {"not_equal", [](auto& a, auto& b) { return loom::not_equal(a, b); }},
  };
  for (const auto& cmp : cmps) {
    const std::string cop = cmp.first;  // copies: clang 14 cannot capture structured bindings
    const auto cf = cmp.second;
    g.push_back({cop, 0.25, [cop, cf](Chain& c, int x) {
                   if (!finite(c.values(x))) return kNotApplicable;
                   int y = c.leaf(broadcast_partner(c, c.sh(x)), c.opdt(), Domain::Normal, false);
                   if (c.P(0.3)) y = x;  // compares with itself: all equal
                   if (!no_near_ties(c, x, y)) return kNotApplicable;
                   int cond = c.apply(cop, "{}", {x, y}, [cf](const In& in) { return cf(in[0], in[1]); });
                   if (cond < 0) return cond;
                   if (c.P(0.3)) {  // logical ops on the condition
                     int m = c.bool_leaf(broadcast_partner(c, c.sh(cond)), 0.5);
                     const std::string lop = c.pick(std::vector<std::string>{"logical_and", "logical_or", "logical_xor"});
                     cond = c.apply(lop, "{}", {cond, m}, [lop](const In& in) {
                       return lop == "logical_and" ? loom::logical_and(in[0], in[1])
                              : lop == "logical_or" ? loom::logical_or(in[0], in[1]) : loom::logical_xor(in[0], in[1]);
                     });
                     if (cond < 0) return cond;
                   }
                   if (c.P(0.2)) {
                     cond = c.apply("logical_not", "{}", {cond}, [](const In& in) { return loom::logical_not(in[0]); });
                     if (cond < 0) return cond;
                   }
                   int other = c.leaf(broadcast_partner(c, c.sh(x)), c.opdt(), Domain::Normal);
                   std::vector<int> args = c.P(0.5) ? std::vector<int>{cond, x, other} : std::vector<int>{cond, other, x};
                   return c.apply("where", "{}", args, [](const In& in) { return loom::where(in[0], in[1], in[2]); });
                 }});
  }
  return g;
}

// ---------------------------------------------------------------- reductions
std::string red_attrs(const Axes& axes, bool keep, const std::string& extra = "") {
  return "{\"axes\":" + jl(axes) + ",\"keepdims\":" + jb(keep) + extra + "}";
}

std::vector<GenOp> reduction_ops() {
  std::vector<GenOp> g;
  using Red = std::function<Tensor(const Tensor&, const Axes&, bool)>;
  auto red = [&g](const std::string& op, double w, Red f, std::function<bool(const std::vector<double>&)> ok, bool empty_ok) {
    g.push_back({op, w, [=](Chain& c, int x) {
                   const auto v = c.values(x);
                   if (!finite(v) || (ok && !ok(v))) return kNotApplicable;
                   const Axes axes = random_axes(c, c.rank(x));
                   const bool keep = c.P(0.4);
                   if (!empty_ok && reduces_empty(c.sh(x), axes)) return kNotApplicable;
                   return c.apply(op, red_attrs(axes, keep), {x}, [f, axes, keep](const In& in) { return f(in[0], axes, keep); });
                 }});
  };
  red("sum", 2, [](auto& x, auto& a, bool k) { return loom::sum(x, a, k); }, nullptr, true);
  red("mean", 1.5, [](auto& x, auto& a, bool k) { return loom::mean(x, a, k); }, nullptr, true);
  red("prod", 0.7, [](auto& x, auto& a, bool k) { return loom::prod(x, a, k); },
      [](auto& v) { return vmaxabs(v) < 2 && v.size() <= 60; }, true);
  // max / min over an empty axis raise in both (no identity)
  red("max", 1, [](auto& x, auto& a, bool k) { return loom::max(x, a, k); }, [](auto& v) { return no_near_ties(v); }, false);
  red("min", 1, [](auto& x, auto& a, bool k) { return loom::min(x, a, k); }, [](auto& v) { return no_near_ties(v); }, false);
  // empty axes: pending fix (logsumexp raises)
  red("logsumexp", 1, [](auto& x, auto& a, bool k) { return loom::logsumexp(x, a, k); }, [](auto& v) { return vmaxabs(v) < 50; },
      true);
  for (int64_t ddof : {0, 1})
    for (const char* op : {"var", "std"}) {
      const bool is_std = std::string(op) == "std";
      g.push_back({op, 0.5, [=](Chain& c, int x) {
                     const auto v = c.values(x);
                     if (!finite(v) || vmaxabs(v) > 100) return kNotApplicable;
                     const Axes axes = random_axes(c, c.rank(x));
                     const bool keep = c.P(0.4);
                     // std at zero variance (size-1 axes, broadcast copies): pending fix
                     return c.apply(op, red_attrs(axes, keep, ",\"ddof\":" + std::to_string(ddof)), {x},
                                    [=](const In& in) { return is_std ? loom::std(in[0], axes, ddof, keep) : loom::var(in[0], axes, ddof, keep); });
                   }});
    }
  g.push_back({"cumsum", 1, [](Chain& c, int x) {
                 if (c.rank(x) == 0 || !finite(c.values(x))) return kNotApplicable;
                 const int64_t axis = wrap(c, c.I(0, c.rank(x) - 1), c.rank(x));
                 return c.apply("cumsum", "{\"axis\":" + std::to_string(axis) + "}", {x},
                                [axis](const In& in) { return loom::cumsum(in[0], axis); });
               }});
  for (const char* op : {"softmax", "log_softmax"}) {
    const bool lsm = std::string(op) == "log_softmax";
    g.push_back({op, 1, [=](Chain& c, int x) {
                   const auto v = c.values(x);
                   if (!finite(v) || vmaxabs(v) > 50) return kNotApplicable;
                   const int64_t nd = c.rank(x);
                   // 0-d and empty axes: pending fixes
                   const int64_t axis = nd == 0 ? c.pick(std::vector<int64_t>{0, -1}) : wrap(c, c.I(0, nd - 1), nd);
                   return c.apply(op, "{\"axis\":" + std::to_string(axis) + "}", {x}, [=](const In& in) {
                     return lsm ? loom::log_softmax(in[0], axis) : loom::softmax(in[0], axis);
                   });
                 }});
  }
  // argmax / argmin (side step, int64 output), then take_along_axis of the value with it
  for (const char* op : {"argmax", "argmin"}) {
    const bool amax = std::string(op) == "argmax";
    g.push_back({op, 0.6, [=](Chain& c, int x) {
                   const auto v = c.values(x);
                   if (v.empty() || !finite(v) || !no_near_ties(v)) return kNotApplicable;
                   const int64_t nd = c.rank(x);
                   std::optional<int64_t> axis;
                   if (nd > 0 && c.P(0.75)) axis = wrap(c, c.I(0, nd - 1), nd);
                   if (axis && c.sh(x)[static_cast<size_t>((*axis + nd) % nd)] == 0) return kNotApplicable;
                   const bool keep = axis ? c.P(0.7) : c.P(0.3);
                   int idx = c.apply(op, "{\"axis\":" + jopt(axis) + ",\"keepdims\":" + jb(keep) + "}", {x}, [=](const In& in) {
                     return amax ? loom::argmax(in[0], axis, keep) : loom::argmin(in[0], axis, keep);
                   });
                   if (idx < 0 || !axis || !keep) return idx < 0 ? idx : kNotApplicable;
                   const int64_t a = *axis;
                   return c.apply("take_along_axis", "{\"axis\":" + std::to_string(a) + "}", {x, idx},
                                  [a](const In& in) { return loom::take_along_axis(in[0], in[1], a); });
                 }});
  }
  for (const char* op : {"all", "any"}) {
    const bool is_all = std::string(op) == "all";
    g.push_back({op, 0.2, [=](Chain& c, int x) {
                   const Axes axes = random_axes(c, c.rank(x));
                   const bool keep = c.P(0.4);
                   c.apply(op, red_attrs(axes, keep), {x},
                           [=](const In& in) { return is_all ? loom::all(in[0], axes, keep) : loom::any(in[0], axes, keep); });
                   return c.stopped ? kRaised : kNotApplicable;  // a side output: the chain goes on from x
                 }});
  }
  return g;
}

// ---------------------------------------------------------------- linear algebra
std::vector<GenOp> linalg_ops() {
  std::vector<GenOp> g;
  auto mags_ok = [](Chain& c, int x) {
    const auto v = c.values(x);
    return finite(v) && vmaxabs(v) < 100;
  };
  g.push_back({"matmul", 2, [=](Chain& c, int x) {
                 if (c.rank(x) == 0 || !mags_ok(c, x)) return kNotApplicable;
                 const Shape s = c.sh(x);
                 const int64_t nd = static_cast<int64_t>(s.size());
                 const bool x_left = c.P(0.7);
                 // x on the left contracts its last axis; on the right its second-to-last (or only) axis
                 const int64_t k = x_left ? s.back() : (nd >= 2 ? s[nd - 2] : s[0]);
                 Shape o;
                 const int64_t r = c.I(1, 3);  // the leaf's rank
                 if (r >= 2 && c.P(0.3) && nd >= 3) o.push_back(c.P(0.5) ? 1 : s[0]);  // a batch axis
                 if (x_left) {
                   o.push_back(k);
                   if (r >= 2) o.push_back(c.I(1, 4));
                 } else {
                   if (r >= 2) o.push_back(c.I(1, 4));
                   o.push_back(k);
                 }
                 if (r == 3 && o.size() == 2) o.insert(o.begin(), c.I(1, 3));
                 if (shape_numel(o) * std::max<int64_t>(1, c.t(x).numel()) > 40 * kMaxNumel) return kNotApplicable;
                 int y = c.leaf(o, c.opdt(), Domain::Normal);
                 std::vector<int> args = x_left ? std::vector<int>{x, y} : std::vector<int>{y, x};
                 // batched with K = 0: pending fix
                 return c.apply("matmul", "{}", args, [](const In& in) { return loom::matmul(in[0], in[1]); });
               }});
  g.push_back({"dot", 0.7, [=](Chain& c, int x) {
                 if (c.rank(x) > 3 || !mags_ok(c, x)) return kNotApplicable;
                 const Shape s = c.sh(x);
                 Shape o;
                 if (s.empty()) o = random_shape(c, c.I(0, 2));
                 else if (c.P(0.5)) o = {s.back()};
                 else o = {s.back(), c.I(1, 4)};
                 int y = c.leaf(o, c.opdt(), Domain::Normal);
                 return c.apply("dot", "{}", {x, y}, [](const In& in) { return loom::dot(in[0], in[1]); });
               }});
  g.push_back({"outer", 0.5, [=](Chain& c, int x) {
                 if (!room(c, x, 4) || !mags_ok(c, x)) return kNotApplicable;
                 int y = c.leaf(random_shape(c, c.I(0, 2)), c.opdt(), Domain::Normal);
                 if (!room(c, y, 1) || c.t(x).numel() * c.t(y).numel() > kMaxNumel) return kNotApplicable;
                 std::vector<int> args = c.P(0.5) ? std::vector<int>{x, y} : std::vector<int>{y, x};
                 return c.apply("outer", "{}", args, [](const In& in) { return loom::outer(in[0], in[1]); });
               }});
  g.push_back({"tensordot", 0.7, [=](Chain& c, int x) {
                 if (!mags_ok(c, x)) return kNotApplicable;
                 const Shape s = c.sh(x);
                 const int64_t nd = static_cast<int64_t>(s.size());
                 const int64_t k = c.I(0, std::min<int64_t>(nd, 2));
                 Shape o(s.end() - k, s.end());
                 for (int64_t i = c.I(0, 2); i > 0; --i) o.push_back(c.I(1, 3));
                 if (c.t(x).numel() * shape_numel(o) > 20 * kMaxNumel) return kNotApplicable;
                 int y = c.leaf(o, c.opdt(), Domain::Normal);
                 return c.apply("tensordot", "{\"axes\":" + std::to_string(k) + "}", {x, y},
                                [k](const In& in) { return loom::tensordot(in[0], in[1], k); });
               }});
  return g;
}

// ---------------------------------------------------------------- manipulation
std::vector<GenOp> manipulation_ops() {
  std::vector<GenOp> g;
  g.push_back({"reshape", 1.5, [](Chain& c, int x) {
                 const int64_t n = c.t(x).numel();
                 Shape o;
                 if (n == 0) {
                   o = {0};
                   for (int64_t i = c.I(0, 2); i > 0; --i) o.insert(o.begin() + c.I(0, static_cast<int64_t>(o.size())), c.I(1, 3));
                 } else {
                   std::vector<int64_t> f;  // prime factors, dealt to 1-4 axes
                   int64_t m = n;
                   for (int64_t p = 2; p * p <= m; ++p)
                     while (m % p == 0) f.push_back(p), m /= p;
                   if (m > 1) f.push_back(m);
                   o.assign(static_cast<size_t>(c.I(n == 1 ? 0 : 1, 4)), 1);
                   if (o.empty()) {
                     // 0-d
                   } else {
                     for (int64_t p : f) o[static_cast<size_t>(c.I(0, static_cast<int64_t>(o.size()) - 1))] *= p;
                     if (c.P(0.3)) o[static_cast<size_t>(c.I(0, static_cast<int64_t>(o.size()) - 1))] = -1;
                   }
                 }
                 return c.apply("reshape", "{\"shape\":" + jl(o) + "}", {x}, [o](const In& in) { return loom::reshape(in[0], o); });
               }});
  g.push_back({"transpose", 1.5, [](Chain& c, int x) {
                 const int64_t nd = c.rank(x);
                 Axes p;
                 if (c.P(0.7)) {
                   p.resize(static_cast<size_t>(nd));
                   std::iota(p.begin(), p.end(), 0);
                   std::shuffle(p.begin(), p.end(), c.rng);
                   for (auto& a : p) a = wrap(c, a, nd);
                 }
                 return c.apply("transpose", "{\"axes\":" + jl(p) + "}", {x}, [p](const In& in) { return loom::transpose(in[0], p); });
               }});
  g.push_back({"squeeze", 0.7, [](Chain& c, int x) {
                 const Shape s = c.sh(x);
                 const int64_t nd = static_cast<int64_t>(s.size());
                 Axes a;
                 for (int64_t i = 0; i < nd; ++i)
                   if (s[i] == 1 && c.P(0.6)) a.push_back(wrap(c, i, nd));
                 return c.apply("squeeze", "{\"axes\":" + jl(a) + "}", {x}, [a](const In& in) { return loom::squeeze(in[0], a); });
               }});
  g.push_back({"expand_dims", 0.7, [](Chain& c, int x) {
                 const int64_t nd = c.rank(x);
                 if (nd >= 5) return kNotApplicable;
                 const int64_t axis = c.P(0.3) ? c.I(-nd - 1, -1) : c.I(0, nd);
                 return c.apply("expand_dims", "{\"axis\":" + std::to_string(axis) + "}", {x},
                                [axis](const In& in) { return loom::expand_dims(in[0], axis); });
               }});
  g.push_back({"broadcast_to", 1, [](Chain& c, int x) {
                 Shape o = c.sh(x);
                 for (auto& d : o)
                   if (d == 1 && c.P(0.6)) d = c.I(0, 4);
                 if (o.size() < 4 && c.P(0.4)) o.insert(o.begin(), c.I(1, 3));
                 if (shape_numel(o) > kMaxNumel) return kNotApplicable;
                 return c.apply("broadcast_to", "{\"shape\":" + jl(o) + "}", {x}, [o](const In& in) { return loom::broadcast_to(in[0], o); });
               }});
  g.push_back({"slice", 1.5, [](Chain& c, int x) {
                 const int64_t nd = c.rank(x);
                 if (nd == 0) return kNotApplicable;
                 const int64_t axis = c.I(0, nd - 1), n = c.sh(x)[static_cast<size_t>(axis)];
                 const int64_t step = c.pick(std::vector<int64_t>{1, 1, 2, 3, -1, -1, -2});
                 auto bound = [&]() -> std::optional<int64_t> {
                   if (c.P(0.3)) return std::nullopt;
                   return c.I(-n - 2, n + 2);
                 };
                 const auto b = bound(), e = bound();
                 const int64_t ax = wrap(c, axis, nd);
                 return c.apply("slice", "{\"axis\":" + std::to_string(ax) + ",\"start\":" + jopt(b) + ",\"stop\":" + jopt(e) +
                                             ",\"step\":" + std::to_string(step) + "}",
                                {x}, [=](const In& in) { return loom::slice(in[0], ax, b, e, step); });
               }});
  g.push_back({"flip", 0.7, [](Chain& c, int x) {
                 const Axes a = random_axes(c, c.rank(x));
                 return c.apply("flip", "{\"axes\":" + jl(a) + "}", {x}, [a](const In& in) { return loom::flip(in[0], a); });
               }});
  g.push_back({"concatenate", 1, [](Chain& c, int x) {
                 const int64_t nd = c.rank(x);
                 if (nd == 0 || !room(c, x, 3)) return kNotApplicable;
                 const int64_t axis = c.I(0, nd - 1);
                 std::vector<int> args{x};
                 for (int64_t k = c.I(1, 2); k > 0; --k) {
                   if (c.P(0.3)) {
                     args.push_back(x);  // itself: gradients of both parts accumulate
                   } else {
                     Shape o = c.sh(x);
                     o[static_cast<size_t>(axis)] = c.I(0, 3);
                     args.push_back(c.leaf(o, c.opdt(), Domain::Normal));
                   }
                 }
                 std::shuffle(args.begin(), args.end(), c.rng);
                 const int64_t ax = wrap(c, axis, nd);
                 return c.apply("concatenate", "{\"axis\":" + std::to_string(ax) + "}", args,
                                [ax](const In& in) { return loom::concatenate(in, ax); });
               }});
  g.push_back({"stack", 0.7, [](Chain& c, int x) {
                 const int64_t nd = c.rank(x);
                 if (nd >= 4 || !room(c, x, 3)) return kNotApplicable;
                 std::vector<int> args{x};
                 for (int64_t k = c.I(0, 2); k > 0; --k)
                   args.push_back(c.P(0.3) ? x : c.leaf(c.sh(x), c.opdt(), Domain::Normal));
                 std::shuffle(args.begin(), args.end(), c.rng);
                 const int64_t axis = c.I(-nd - 1, nd);
                 return c.apply("stack", "{\"axis\":" + std::to_string(axis) + "}", args,
                                [axis](const In& in) { return loom::stack(in, axis); });
               }});
  g.push_back({"split", 0.7, [](Chain& c, int x) {
                 const int64_t nd = c.rank(x);
                 if (nd == 0) return kNotApplicable;
                 const int64_t axis = c.I(0, nd - 1), n = c.sh(x)[static_cast<size_t>(axis)];
                 const int64_t ax = wrap(c, axis, nd);
                 if (c.P(0.5) && n > 0) {
                   std::vector<int64_t> divs;
                   for (int64_t d = 1; d <= n; ++d)
                     if (n % d == 0) divs.push_back(d);
                   const int64_t s = c.pick(divs);
                   const int64_t part = c.I(0, s - 1);
                   return c.apply("split", "{\"sections\":" + std::to_string(s) + ",\"axis\":" + std::to_string(ax) + ",\"part\":" +
                                               std::to_string(part) + "}",
                                  {x}, [=](const In& in) { return loom::split(in[0], s, ax).at(static_cast<size_t>(part)); });
                 }
                 std::vector<int64_t> idx;
                 for (int64_t k = c.I(1, 3); k > 0; --k) idx.push_back(c.I(0, n + 1));
                 if (c.P(0.7)) std::sort(idx.begin(), idx.end());
                 const int64_t part = c.I(0, static_cast<int64_t>(idx.size()));
                 return c.apply("split", "{\"indices\":" + jl(idx) + ",\"axis\":" + std::to_string(ax) + ",\"part\":" +
                                             std::to_string(part) + "}",
                                {x}, [=](const In& in) { return loom::split(in[0], idx, ax).at(static_cast<size_t>(part)); });
               }});
  g.push_back({"pad", 0.8, [](Chain& c, int x) {
                 const int64_t nd = c.rank(x);
                 if (nd == 0 || !room(c, x, 4)) return kNotApplicable;
                 std::vector<std::pair<int64_t, int64_t>> pw;
                 std::vector<int64_t> flat;
                 for (int64_t i = 0; i < nd; ++i) {
                   pw.push_back({c.I(0, 2), c.I(0, 2)});
                   flat.push_back(pw.back().first);
                   flat.push_back(pw.back().second);
                 }
                 const double value = c.P(0.5) ? 0.0 : std::round(c.U(-2, 2) * 4) / 4;
                 Shape o = c.sh(x);
                 for (int64_t i = 0; i < nd; ++i) o[i] += flat[2 * i] + flat[2 * i + 1];
                 if (shape_numel(o) > kMaxNumel) return kNotApplicable;
                 return c.apply("pad", "{\"pad_width\":" + jl(flat) + ",\"value\":" + jd(value) + "}", {x},
                                [pw, value](const In& in) { return loom::pad(in[0], pw, value); });
               }});
  g.push_back({"tile", 0.7, [](Chain& c, int x) {
                 std::vector<int64_t> reps;
                 for (int64_t k = c.I(1, std::min<int64_t>(c.rank(x) + 1, 4)); k > 0; --k) reps.push_back(c.P(0.05) ? 0 : c.I(1, 3));
                 int64_t f = 1;
                 for (int64_t r : reps) f *= std::max<int64_t>(r, 1);
                 if (!room(c, x, f)) return kNotApplicable;
                 return c.apply("tile", "{\"reps\":" + jl(reps) + "}", {x}, [reps](const In& in) { return loom::tile(in[0], reps); });
               }});
  g.push_back({"repeat", 0.7, [](Chain& c, int x) {
                 const int64_t r = c.I(0, 3), nd = c.rank(x);
                 if (!room(c, x, std::max<int64_t>(r, 1))) return kNotApplicable;
                 std::optional<int64_t> axis;
                 if (nd > 0 && c.P(0.7)) axis = wrap(c, c.I(0, nd - 1), nd);
                 return c.apply("repeat", "{\"repeats\":" + std::to_string(r) + ",\"axis\":" + jopt(axis) + "}", {x},
                                [=](const In& in) { return loom::repeat(in[0], r, axis); });
               }});
  return g;
}

// ---------------------------------------------------------------- indexing
std::vector<GenOp> indexing_ops() {
  std::vector<GenOp> g;
  // x[...] with ints, slices, None, Ellipsis and at most one array (int64 indices or a mask)
  g.push_back({"index", 1.5, [](Chain& c, int x) {
                 const Shape s = c.sh(x);
                 const int64_t nd = static_cast<int64_t>(s.size());
                 std::vector<int> args{x};
                 std::vector<std::string> items;
                 std::vector<std::function<TensorIndex(const In&)>> build;
                 bool ellipsis = false, array = false;
                 int64_t ax = 0;
                 while (ax < nd) {
                   const double r = c.U(0, 1);
                   const int64_t n = s[static_cast<size_t>(ax)];
                   if (r < 0.08 && !ellipsis) {
                     ellipsis = true;
                     items.push_back("{\"kind\":\"ellipsis\"}");
                     build.push_back([](const In&) { return TensorIndex(Ellipsis); });
                     ax = nd - c.I(0, nd - ax);  // the Ellipsis covers some axes
                     continue;
                   }
                   if (r < 0.15) {
                     items.push_back("{\"kind\":\"newaxis\"}");
                     build.push_back([](const In&) { return TensorIndex(NewAxis); });
                     continue;
                   }
                   if (r < 0.35 && n > 0) {
                     const int64_t v = c.I(-n, n - 1);
                     items.push_back("{\"kind\":\"int\",\"value\":" + std::to_string(v) + "}");
                     build.push_back([v](const In&) { return TensorIndex(v); });
                   } else if (r < 0.5 && !array && n > 0) {
                     array = true;
                     const int k = static_cast<int>(args.size());
                     if (c.P(0.3) && ax + 1 <= nd) {  // a boolean mask over this axis
                       args.push_back(c.bool_leaf({n}, 0.6));
                     } else {
                       args.push_back(c.int_leaf(random_shape(c, c.I(0, 2)), -n, n));
                     }
                     items.push_back("{\"kind\":\"array\",\"input\":" + std::to_string(k) + "}");
                     build.push_back([k](const In& in) { return TensorIndex(in.at(static_cast<size_t>(k))); });
                   } else {
                     std::optional<int64_t> b, e;
                     if (c.P(0.6)) b = c.I(-n - 1, n + 1);
                     if (c.P(0.6)) e = c.I(-n - 1, n + 1);
                     const int64_t st = c.pick(std::vector<int64_t>{1, 1, 2, -1, -2});
                     items.push_back("{\"kind\":\"slice\",\"start\":" + jopt(b) + ",\"stop\":" + jopt(e) + ",\"step\":" +
                                     std::to_string(st) + "}");
                     build.push_back([=](const In&) { return TensorIndex(Slice(b, e, st)); });
                   }
                   ++ax;
                 }
                 if (c.P(0.15)) {
                   items.push_back("{\"kind\":\"newaxis\"}");
                   build.push_back([](const In&) { return TensorIndex(NewAxis); });
                 }
                 std::string spec = "[";
                 for (size_t i = 0; i < items.size(); ++i) spec += (i ? "," : "") + items[i];
                 spec += "]";
                 return c.apply("index", "{\"index\":" + spec + "}", args, [build](const In& in) {
                   std::vector<TensorIndex> ix;
                   for (auto& b : build) ix.push_back(b(in));
                   return loom::index(in[0], ix);
                 });
               }});
  g.push_back({"take", 0.7, [](Chain& c, int x) {
                 const int64_t nd = c.rank(x);
                 std::optional<int64_t> axis;
                 if (nd > 0 && c.P(0.7)) axis = c.I(0, nd - 1);
                 const int64_t n = axis ? c.sh(x)[static_cast<size_t>(*axis)] : c.t(x).numel();
                 if (n == 0) return kNotApplicable;
                 int idx = c.int_leaf(random_shape(c, c.I(0, 2)), -n, n);
                 if (axis) axis = wrap(c, *axis, nd);
                 return c.apply("take", "{\"axis\":" + jopt(axis) + "}", {x, idx},
                                [axis](const In& in) { return loom::take(in[0], in[1], axis); });
               }});
  g.push_back({"take_along_axis", 0.7, [](Chain& c, int x) {
                 const int64_t nd = c.rank(x);
                 if (nd == 0) return kNotApplicable;
                 const int64_t axis = c.I(0, nd - 1), n = c.sh(x)[static_cast<size_t>(axis)];
                 if (n == 0) return kNotApplicable;
                 Shape o = c.sh(x);
                 o[static_cast<size_t>(axis)] = c.I(0, 4);
                 for (size_t i = 0; i < o.size(); ++i)
                   if (static_cast<int64_t>(i) != axis && c.P(0.2)) o[i] = 1;  // broadcasts
                 int idx = c.int_leaf(o, -n, n);
                 const int64_t ax = wrap(c, axis, nd);
                 return c.apply("take_along_axis", "{\"axis\":" + std::to_string(ax) + "}", {x, idx},
                                [ax](const In& in) { return loom::take_along_axis(in[0], in[1], ax); });
               }});
  g.push_back({"scatter_add", 0.7, [](Chain& c, int x) {
                 const int64_t nd = c.rank(x);
                 if (nd == 0) return kNotApplicable;
                 const Shape s = c.sh(x);
                 const int64_t axis = c.I(0, nd - 1), n = s[static_cast<size_t>(axis)];
                 if (n == 0) return kNotApplicable;
                 Shape is = s, ss;
                 for (size_t i = 0; i < is.size(); ++i) is[i] = static_cast<int64_t>(i) == axis ? c.I(0, 4) : c.I(std::min<int64_t>(s[i], 1), s[i]);
                 ss = is;
                 for (auto& d : ss) d += c.P(0.3) ? 1 : 0;  // src may be larger than the indices
                 int idx = c.int_leaf(is, 0, n);
                 int src = c.leaf(ss, c.t(x).dtype(), Domain::Normal);
                 return c.apply("scatter_add", "{\"axis\":" + std::to_string(axis) + "}", {x, idx, src},
                                [axis](const In& in) { return loom::scatter_add(in[0], axis, in[1], in[2]); });
               }});
  g.push_back({"index_put", 0.7, [](Chain& c, int x) {
                 const int64_t nd = c.rank(x);
                 if (nd == 0 || c.sh(x)[0] == 0) return kNotApplicable;
                 const int64_t n = c.sh(x)[0];
                 const bool acc = c.P(0.5);
                 // x[i] with an int64 array on axis 0 (unique positions unless accumulating)
                 std::vector<int64_t> pos;
                 for (int64_t k = c.I(0, 4); k > 0; --k) pos.push_back(c.I(-n, n - 1));
                 if (!acc) {
                   std::vector<int64_t> u;
                   std::set<int64_t> seen;
                   for (int64_t p : pos)
                     if (seen.insert((p + n) % n).second) u.push_back(p);
                   pos = u;
                 }
                 int idx;
                 {
                   NoGrad off;
                   std::vector<double> pv(pos.begin(), pos.end());
                   Tensor it = astype(from_vector<double>(pv, {static_cast<int64_t>(pv.size())}), Int64);
                   c.vals.push_back({it, -1, "contiguous"});
                   idx = static_cast<int>(c.vals.size()) - 1;
                 }
                 Shape vs = c.sh(x);
                 vs[0] = static_cast<int64_t>(pos.size());
                 if (c.P(0.4)) vs.erase(vs.begin(), vs.begin() + c.I(1, static_cast<int64_t>(vs.size())));  // broadcasts
                 int v = c.leaf(vs, c.t(x).dtype(), Domain::Normal);
                 return c.apply("index_put", "{\"index\":[{\"kind\":\"array\",\"input\":1}],\"values\":2,\"accumulate\":" + jb(acc) + "}",
                                {x, idx, v}, [acc](const In& in) { return loom::index_put(in[0], {TensorIndex(in[1])}, in[2], acc); });
               }});
  return g;
}

// ---------------------------------------------------------------- neural-network ops
// torch refuses zero-size channel and spatial axes in conv and pooling (only the batch may be empty)
bool nonempty_after_batch(const Shape& s, size_t first) {
  for (size_t i = first; i < s.size(); ++i)
    if (s[i] == 0) return false;
  return true;
}

std::vector<GenOp> nn_ops() {
  std::vector<GenOp> g;
  auto small = [](Chain& c, int x) {
    const auto v = c.values(x);
    return finite(v) && vmaxabs(v) < 100;
  };
  auto conv = [small](Chain& c, int x, int sp) {
    const Shape s = c.sh(x);
    if (c.rank(x) != sp + 2 || !small(c, x) || s[0] == 0 || !nonempty_after_batch(s, 1)) return kNotApplicable;
    const int64_t cin = s[1];
    std::vector<int64_t> gs;
    for (int64_t d = 1; d <= cin; ++d)
      if (cin % d == 0) gs.push_back(d);
    const int64_t groups = c.pick(gs), cout = groups * c.I(1, 2);
    std::vector<int64_t> k, st, dil, pad;
    std::string pad_mode;
    const double r = c.U(0, 1);
    if (r < 0.15) pad_mode = "same";
    else if (r < 0.25) pad_mode = "valid";
    Shape w{cout, cin / groups};
    for (int i = 0; i < sp; ++i) {
      k.push_back(c.I(1, 3));
      st.push_back(pad_mode == "same" ? 1 : c.I(1, 2));
      dil.push_back(c.I(1, 2));
      pad.push_back(c.I(0, 2));
      w.push_back(k.back());
      const int64_t p = pad_mode.empty() ? pad.back() : 0;
      if (pad_mode != "same" && s[static_cast<size_t>(2 + i)] + 2 * p - dil.back() * (k.back() - 1) - 1 < 0) return kNotApplicable;
    }
    std::vector<int> args{x, c.leaf(w, c.t(x).dtype(), Domain::Normal)};
    if (c.P(0.6)) args.push_back(c.leaf({cout}, c.t(x).dtype(), Domain::Normal));
    const bool two = sp == 2;
    const std::string op = two ? "conv2d" : "conv1d";
    const std::string attrs = "{\"stride\":" + jl(st) + ",\"padding\":" + (pad_mode.empty() ? jl(pad) : "\"" + pad_mode + "\"") +
                              ",\"dilation\":" + jl(dil) + ",\"groups\":" + std::to_string(groups) + "}";
    return c.apply(op, attrs, args, [=](const In& in) {
      ConvPadding p = pad_mode.empty() ? ConvPadding(pad) : ConvPadding(pad_mode);
      Tensor b = in.size() == 3 ? in[2] : Tensor();
      return two ? loom::conv2d(in[0], in[1], b, IntList(st), p, IntList(dil), groups)
                 : loom::conv1d(in[0], in[1], b, IntList(st), p, IntList(dil), groups);
    });
  };
  g.push_back({"conv1d", 1, [=](Chain& c, int x) { return conv(c, x, 1); }});
  g.push_back({"conv2d", 1.5, [=](Chain& c, int x) { return conv(c, x, 2); }});
  g.push_back({"conv2d_transpose", 1, [small](Chain& c, int x) {
                 const Shape s = c.sh(x);
                 if (c.rank(x) != 4 || !small(c, x) || s[0] == 0 || !nonempty_after_batch(s, 1) || !room(c, x, 4)) return kNotApplicable;
                 const int64_t cin = s[1];
                 std::vector<int64_t> gs;
                 for (int64_t d = 1; d <= cin; ++d)
                   if (cin % d == 0) gs.push_back(d);
                 const int64_t groups = c.pick(gs), coutg = c.I(1, 2);
                 std::vector<int64_t> k, st, dil, pad, opad;
                 for (int i = 0; i < 2; ++i) {
                   k.push_back(c.I(1, 3));
                   st.push_back(c.I(1, 2));
                   dil.push_back(c.I(1, 2));
                   pad.push_back(c.I(0, 1));
                   opad.push_back(c.I(0, std::max(st.back(), dil.back()) - 1));
                   const int64_t out = (s[static_cast<size_t>(2 + i)] - 1) * st.back() - 2 * pad.back() + dil.back() * (k.back() - 1) + opad.back() + 1;
                   if (out <= 0) return kNotApplicable;
                 }
                 std::vector<int> args{x, c.leaf({cin, coutg, k[0], k[1]}, c.t(x).dtype(), Domain::Normal)};
                 if (c.P(0.6)) args.push_back(c.leaf({coutg * groups}, c.t(x).dtype(), Domain::Normal));
                 return c.apply("conv2d_transpose",
                                "{\"stride\":" + jl(st) + ",\"padding\":" + jl(pad) + ",\"output_padding\":" + jl(opad) +
                                    ",\"groups\":" + std::to_string(groups) + ",\"dilation\":" + jl(dil) + "}",
                                args, [=](const In& in) {
                                  return loom::conv2d_transpose(in[0], in[1], in.size() == 3 ? in[2] : Tensor(), IntList(st), IntList(pad),
                                                                IntList(opad), groups, IntList(dil));
                                });
               }});
  auto pool = [small](Chain& c, int x, bool is_max) {
    const Shape s = c.sh(x);
    const int64_t nd = c.rank(x);
    if ((nd != 3 && nd != 4) || !small(c, x) || c.t(x).numel() == 0 || !nonempty_after_batch(s, nd == 4 ? 1 : 0)) return kNotApplicable;
    if (is_max && !no_near_ties(c.values(x))) return kNotApplicable;
    std::vector<int64_t> k, st, pad, dil;
    const bool ceil = c.P(0.3);
    const bool default_stride = c.P(0.3);
    for (int i = 0; i < 2; ++i) {
      k.push_back(c.I(1, 3));
      if (!default_stride) st.push_back(c.I(1, 3));
      pad.push_back(c.I(0, k.back() / 2));
      dil.push_back(is_max ? c.I(1, 2) : 1);
      const int64_t in = s[static_cast<size_t>(nd - 2 + i)];
      if (in + 2 * pad.back() - dil.back() * (k.back() - 1) - 1 < 0) return kNotApplicable;
    }
    if (is_max) {
      // windows entirely in the padding (ceil_mode): pending fix
      return c.apply("max_pool2d", "{\"kernel_size\":" + jl(k) + ",\"stride\":" + jl(st) + ",\"padding\":" + jl(pad) +
                                       ",\"dilation\":" + jl(dil) + ",\"ceil_mode\":" + jb(ceil) + "}",
                     {x}, [=](const In& in) { return loom::max_pool2d(in[0], IntList(k), IntList(st), IntList(pad), IntList(dil), ceil); });
    }
    const bool cip = c.P(0.5);
    const int64_t div = c.P(0.2) ? c.I(1, 5) : 0;
    return c.apply("avg_pool2d", "{\"kernel_size\":" + jl(k) + ",\"stride\":" + jl(st) + ",\"padding\":" + jl(pad) +
                                     ",\"ceil_mode\":" + jb(ceil) + ",\"count_include_pad\":" + jb(cip) +
                                     ",\"divisor_override\":" + std::to_string(div) + "}",
                   {x}, [=](const In& in) { return loom::avg_pool2d(in[0], IntList(k), IntList(st), IntList(pad), ceil, cip, div); });
  };
  g.push_back({"max_pool2d", 1, [=](Chain& c, int x) { return pool(c, x, true); }});
  g.push_back({"avg_pool2d", 1, [=](Chain& c, int x) { return pool(c, x, false); }});
  for (const char* op : {"global_avg_pool2d", "global_max_pool2d"}) {
    const bool avg = std::string(op) == "global_avg_pool2d";
    g.push_back({op, 0.5, [=](Chain& c, int x) {
                   const Shape s = c.sh(x);
                   if (c.rank(x) != 4 || !nonempty_after_batch(s, 1) || !small(c, x) || (!avg && !no_near_ties(c.values(x)))) return kNotApplicable;
                   return c.apply(op, "{}", {x}, [avg](const In& in) { return avg ? loom::global_avg_pool2d(in[0]) : loom::global_max_pool2d(in[0]); });
                 }});
  }
  g.push_back({"layer_norm", 1, [small](Chain& c, int x) {
                 const int64_t nd = c.rank(x);
                 if (nd == 0 || !small(c, x)) return kNotApplicable;
                 const int64_t k = c.I(1, std::min<int64_t>(nd, 2));
                 const Shape s = c.sh(x);
                 const Shape ns(s.end() - k, s.end());
                 if (shape_numel(ns) == 0) return kNotApplicable;
                 const bool w = c.P(0.6), b = c.P(0.6);
                 std::vector<int> args{x};
                 if (w) args.push_back(c.leaf(ns, c.t(x).dtype(), Domain::Normal));
                 if (b) args.push_back(c.leaf(ns, c.t(x).dtype(), Domain::Normal));
                 return c.apply("layer_norm", "{\"normalized_shape\":" + jl(ns) + ",\"eps\":1e-05,\"weight\":" + jb(w) + ",\"bias\":" + jb(b) + "}",
                                args, [=](const In& in) {
                                  return loom::layer_norm(in[0], ns, w ? in[1] : Tensor(), b ? in[w ? 2 : 1] : Tensor(), 1e-5);
                                });
               }});
  g.push_back({"batch_norm", 1, [small](Chain& c, int x) {
                 const int64_t nd = c.rank(x);
                 if (nd < 2 || !small(c, x)) return kNotApplicable;
                 const Shape s = c.sh(x);
                 const int64_t ch = s[1];
                 if (ch == 0 || c.t(x).numel() / ch <= 1) return kNotApplicable;  // training needs > 1 value per channel
                 const bool training = c.P(0.7), affine = c.P(0.7), running = !training || c.P(0.3);
                 std::vector<int> args{x};
                 if (running) {
                   args.push_back(c.leaf({ch}, c.t(x).dtype(), Domain::Normal, false));
                   args.push_back(c.leaf({ch}, c.t(x).dtype(), Domain::Positive, false));
                 }
                 if (affine) {
                   args.push_back(c.leaf({ch}, c.t(x).dtype(), Domain::Normal));
                   args.push_back(c.leaf({ch}, c.t(x).dtype(), Domain::Normal));
                 }
                 return c.apply("batch_norm", "{\"running\":" + jb(running) + ",\"affine\":" + jb(affine) + ",\"training\":" + jb(training) +
                                                  ",\"momentum\":0.1,\"eps\":1e-05}",
                                args, [=](const In& in) {
                                  // copies of the running statistics: the step must not change its inputs
                                  Tensor rm = running ? in[1].detach().copy() : Tensor(), rv = running ? in[2].detach().copy() : Tensor();
                                  const size_t a = running ? 3 : 1;
                                  return loom::batch_norm(in[0], rm, rv, affine ? in[a] : Tensor(), affine ? in[a + 1] : Tensor(), training, 0.1, 1e-5);
                                });
               }});
  g.push_back({"dropout", 0.4, [](Chain& c, int x) {
                 const double p = c.pick(std::vector<double>{0.0, 0.3, 1.0});
                 const bool training = c.P(0.7);
                 if (p == 0.3 && training && !away_from(c.values(x), 0, false)) return kNotApplicable;  // the mask is read from zeros
                 return c.apply("dropout", "{\"p\":" + jd(p) + ",\"training\":" + jb(training) + "}", {x}, [=](const In& in) {
                   Generator gen(99);
                   return loom::dropout(in[0], p, training, &gen);
                 });
               }});
  g.push_back({"embedding", 0.6, [small](Chain& c, int x) {
                 const Shape s = c.sh(x);
                 if (c.rank(x) != 2 || s[0] == 0 || !small(c, x)) return kNotApplicable;
                 int ids = c.int_leaf(random_shape(c, c.I(0, 2)), 0, s[0]);
                 const int64_t pad = c.P(0.3) ? c.I(0, s[0] - 1) : -1;
                 return c.apply("embedding", "{\"padding_idx\":" + std::to_string(pad) + "}", {x, ids},
                                [pad](const In& in) { return loom::embedding(in[0], in[1], pad); });
               }});
  auto redname = [](Chain& c) { return c.pick(std::vector<std::string>{"none", "mean", "sum"}); };
  auto red = [](const std::string& r) { return r == "none" ? Reduction::None : r == "sum" ? Reduction::Sum : Reduction::Mean; };
  for (const char* op : {"cross_entropy", "nll_loss"}) {
    const bool ce = std::string(op) == "cross_entropy";
    g.push_back({op, 0.7, [=](Chain& c, int x) {
                   const Shape s = c.sh(x);
                   const int64_t nd = c.rank(x);
                   if (nd < 1 || nd > 3 || !small(c, x) || s[nd == 1 ? 0 : 1] == 0) return kNotApplicable;
                   const int64_t C = s[nd == 1 ? 0 : 1];
                   Shape ts;
                   if (nd >= 2) {
                     ts.push_back(s[0]);
                     if (nd == 3) ts.push_back(s[2]);
                   }
                   const bool probs = ce && c.P(0.25);
                   const std::string r = redname(c);
                   const int64_t ignore = !probs && c.P(0.3) ? c.I(0, C - 1) : -100;
                   const double smooth = ce && c.P(0.3) ? 0.2 : 0.0;
                   std::vector<int> args{x, probs ? c.uniform_leaf(s, c.t(x).dtype(), 0.05, 1.0, false) : c.int_leaf(ts, 0, C)};
                   if (c.P(0.3)) args.push_back(c.uniform_leaf({C}, c.t(x).dtype(), 0.5, 2.0, false));
                   const bool weighted = args.size() == 3;
                   return c.apply(op, "{\"reduction\":\"" + r + "\",\"ignore_index\":" + std::to_string(ignore) +
                                          (ce ? ",\"label_smoothing\":" + jd(smooth) : std::string()) + "}",
                                  args, [=](const In& in) {
                                    const Tensor w = weighted ? in[2] : Tensor();
                                    return ce ? loom::cross_entropy(in[0], in[1], w, red(r), ignore, smooth)
                                              : loom::nll_loss(in[0], in[1], w, red(r), ignore);
                                  });
                 }});
  }
  g.push_back({"binary_cross_entropy_with_logits", 0.6, [=](Chain& c, int x) {
                 if (!small(c, x)) return kNotApplicable;
                 const Shape s = c.sh(x);
                 const bool w = c.P(0.3), pw = c.P(0.3) && c.rank(x) > 0;
                 std::vector<int> args{x, c.uniform_leaf(s, c.t(x).dtype(), 0.0, 1.0)};
                 Shape ws = broadcast_partner(c, s);  // broadcasts to the logits' shape, not beyond
                 if (ws.size() > s.size()) ws.erase(ws.begin());
                 if (w) args.push_back(c.uniform_leaf(ws, c.t(x).dtype(), 0.5, 2.0));
                 if (pw) args.push_back(c.uniform_leaf({s.back()}, c.t(x).dtype(), 0.5, 2.0));
                 const std::string r = redname(c);
                 return c.apply("binary_cross_entropy_with_logits",
                                "{\"reduction\":\"" + r + "\",\"weight\":" + jb(w) + ",\"pos_weight\":" + jb(pw) + "}", args, [=](const In& in) {
                                  const Tensor wt = w ? in[2] : Tensor(), pwt = pw ? in[w ? 3 : 2] : Tensor();
                                  return loom::binary_cross_entropy_with_logits(in[0], in[1], wt, pwt, red(r));
                                });
               }});
  g.push_back({"scaled_dot_product_attention", 0.8, [small](Chain& c, int x) {
                 const int64_t nd = c.rank(x);
                 if (nd < 2 || nd > 4 || !small(c, x)) return kNotApplicable;
                 const Shape s = c.sh(x);
                 const int64_t L = s[nd - 2], E = s[nd - 1], S = c.I(1, 4), Ev = c.I(1, 3);
                 Shape batch(s.begin(), s.end() - 2);
                 if (!batch.empty() && c.P(0.3)) batch.erase(batch.begin());  // k, v broadcast over q's batch
                 Shape ks = batch, vs = batch;
                 ks.push_back(S), ks.push_back(E), vs.push_back(S), vs.push_back(Ev);
                 std::vector<int> args{x, c.leaf(ks, c.t(x).dtype(), Domain::Normal), c.leaf(vs, c.t(x).dtype(), Domain::Normal)};
                 const bool causal = c.P(0.25);
                 if (!causal && c.P(0.3)) {
                   if (c.P(0.5)) {
                     // a bool mask keeping column 0 (no fully masked row)
                     std::vector<double> m(static_cast<size_t>(L * S));
                     for (int64_t i = 0; i < L * S; ++i) m[i] = (i % S == 0 || c.P(0.6)) ? 1 : 0;
                     NoGrad off;
                     c.vals.push_back({astype(from_vector<double>(m, {L, S}), Bool), -1, "contiguous"});
                     args.push_back(static_cast<int>(c.vals.size()) - 1);
                   } else {
                     args.push_back(c.leaf({L, S}, c.t(x).dtype(), Domain::Normal, c.P(0.5)));
                   }
                 }
                 std::optional<double> scale;
                 if (c.P(0.3)) scale = 0.5;
                 const bool mask = args.size() == 4;
                 return c.apply("scaled_dot_product_attention",
                                "{\"is_causal\":" + jb(causal) + ",\"scale\":" + (scale ? jd(*scale) : "null") + "}", args, [=](const In& in) {
                                  return loom::scaled_dot_product_attention(in[0], in[1], in[2], mask ? in[3] : Tensor(), causal, scale);
                                });
               }});
  return g;
}

const std::vector<GenOp>& gen_ops() {
  static const std::vector<GenOp> ops = [] {
    std::vector<GenOp> all;
    for (auto part : {elementwise_ops(), reduction_ops(), linalg_ops(), manipulation_ops(), indexing_ops(), nn_ops()})
      all.insert(all.end(), part.begin(), part.end());
    return all;
  }();
  return ops;
}

// A chain: one or two starting leaves, then up to `max_steps` random steps.
Chain build_chain(uint64_t seed, int max_steps) {
  Chain c(seed);
  c.dt = c.P(0.6) ? F32 : F64;
  const double r = c.U(0, 1);
  const int64_t nd = r < 0.08 ? 0 : r < 0.3 ? 1 : r < 0.65 ? 2 : r < 0.88 ? 3 : 4;
  Shape s = random_shape(c, nd);
  int cur = c.leaf(s, c.dt, c.P(0.2) ? Domain::Distinct : Domain::Normal);
  const auto& ops = gen_ops();
  double total = 0;
  for (auto& o : ops) total += o.weight;
  const int n = static_cast<int>(c.I(1, max_steps));
  for (int step = 0; step < n && !c.stopped; ++step) {
    for (int attempt = 0; attempt < 30; ++attempt) {
      // usually the latest value; sometimes an earlier floating one (values fan out)
      int x = cur;
      if (c.P(0.15)) {
        std::vector<int> fl;
        for (int i = 0; i < static_cast<int>(c.vals.size()); ++i)
          if (is_floating(c.t(i).dtype())) fl.push_back(i);
        x = c.pick(fl);
      }
      double w = c.U(0, total);
      const GenOp* g = &ops.back();
      for (auto& o : ops)
        if ((w -= o.weight) <= 0) {
          g = &o;
          break;
        }
      const int out = g->gen(c, x);
      if (out == kNotApplicable && !c.stopped) continue;
      if (out >= 0 && is_floating(c.t(out).dtype())) cur = out;
      break;
    }
  }
  return c;
}

// ---------------------------------------------------------------- dumping
std::string run_and_dump(uint64_t seed, int max_steps, const std::filesystem::path& dir, int& n_steps, int& n_raised) {
  Chain c = build_chain(seed, max_steps);
  // one NPZ file per chain (Loom's writer, checked against NumPy by tests/data); member names
  // are the manifest's "file" entries
  std::map<std::string, Tensor> arrays;
  auto put = [&arrays](const std::string& key, const Tensor& t) {
    arrays[key] = t.detach();
    return key;
  };
  const std::string pre;
  // the final value: the last floating output (or the first leaf)
  int final_v = 0;
  for (const auto& st : c.steps)
    if (st.out >= 0 && is_floating(c.t(st.out).dtype())) final_v = st.out;
  const Tensor& fin = c.t(final_v);
  std::vector<int> targets;
  std::vector<Tensor> target_t;
  for (int i = 0; i < static_cast<int>(c.vals.size()); ++i)
    if (c.t(i).requires_grad()) targets.push_back(i), target_t.push_back(c.t(i));
  std::vector<Tensor> chain_grad(c.vals.size());
  std::string weights = "null";
  std::string chain_error;
  if (fin.requires_grad()) {
    const Tensor w = random_cotangent(fin.shape(), fin.dtype(), seed);
    weights = json_str(put("w", w));
    try {
      const auto gs = loom::grad(fin, target_t, w);
      for (size_t k = 0; k < targets.size(); ++k) chain_grad[static_cast<size_t>(targets[k])] = gs[k];
    } catch (const std::exception& e) {
      chain_error = e.what();
    }
  }
  // values
  std::string vj = "[";
  for (int i = 0; i < static_cast<int>(c.vals.size()); ++i) {
    const Val& v = c.vals[static_cast<size_t>(i)];
    const std::string f = put("v" + std::to_string(i), v.t);
    std::string gf = "null";
    const Tensor& g = chain_grad[static_cast<size_t>(i)];
    if (g.defined()) {
      gf = "{\"file\": " + json_str(put("g" + std::to_string(i), g)) + ", \"dtype\": " + json_str(dts(g.dtype())) +
           ", \"shape\": " + json_shape(g.shape()) + "}";
    }
    // values sharing one autograd node (an op that returned its input) share their gradient
    int alias = -1;
    for (int j = 0; j < i && v.t.requires_grad(); ++j)
      if (c.t(j).requires_grad() && c.t(j).impl() == v.t.impl()) alias = j;
    vj += std::string(i ? ",\n    " : "\n    ") + "{\"file\": " + json_str(f) + ", \"dtype\": " + json_str(dts(v.t.dtype())) +
          ", \"shape\": " + json_shape(v.t.shape()) + ", \"strides\": " + jl(v.t.strides()) + ", \"offset\": " +
          std::to_string(v.t.offset()) + ", \"producer\": " + std::to_string(v.producer) + ", \"layout\": " +
          json_str(v.layout) + ", \"requires_grad\": " + jb(v.t.requires_grad()) + ", \"grad\": " + gf +
          ", \"alias_of\": " + (alias >= 0 ? std::to_string(alias) : "null") + "}";
  }
  vj += "]";
  // steps, each re-run in isolation on detached copies of its inputs
  std::string sj = "[";
  for (size_t si = 0; si < c.steps.size(); ++si) {
    const Step& st = c.steps[si];
    ++n_steps;
    std::string iso_out = "null", iso_error = "null", iso_grads = "[";
    bool iso_same = false;
    if (!st.error.empty()) ++n_raised;
    if (st.error.empty()) {
      try {
        std::vector<Tensor> in, diff;
        std::vector<int> diff_slot;
        // non-differentiable ops with a float output (floor, sign, ...) pass a zero gradient
        const bool differentiable = c.t(st.out).requires_grad();
        for (size_t k = 0; k < st.args.size(); ++k) {
          Tensor x = c.t(st.args[k]).detach();
          if (differentiable && c.t(st.args[k]).requires_grad()) {
            x.requires_grad_(true);
            diff.push_back(x);
            diff_slot.push_back(static_cast<int>(k));
          }
          in.push_back(x);
        }
        const Tensor out = st.fn(in);
        const Tensor& chain_out = c.t(st.out);
        {
          NoGrad off;
          iso_same = out.dtype() == chain_out.dtype() && out.shape() == chain_out.shape() &&
                     (out.numel() == 0 || allclose(out, chain_out, 0, 0, true));
        }
        if (!iso_same) {
          iso_out = json_str(put("i" + std::to_string(si) + "_out", out));
        }
        std::vector<std::string> slots(st.args.size(), "null");
        const Tensor& cot = chain_grad[static_cast<size_t>(st.out)];
        if (!diff.empty() && cot.defined() && out.requires_grad()) {
          const auto gs = loom::grad(out, diff, cot);
          for (size_t k = 0; k < diff.size(); ++k) {
            const std::string f = put("i" + std::to_string(si) + "_g" + std::to_string(diff_slot[k]), gs[k]);
            slots[static_cast<size_t>(diff_slot[k])] = "{\"file\": " + json_str(f) + ", \"dtype\": " + json_str(dts(gs[k].dtype())) +
                                                       ", \"shape\": " + json_shape(gs[k].shape()) + "}";
          }
        }
        for (size_t k = 0; k < slots.size(); ++k) iso_grads += (k ? ", " : "") + slots[k];
      } catch (const std::exception& e) {
        iso_error = json_str(e.what());
      }
    }
    iso_grads += "]";
    std::vector<int64_t> args(st.args.begin(), st.args.end());
    sj += std::string(si ? ",\n    " : "\n    ") + "{\"op\": " + json_str(st.op) + ", \"attrs\": " + st.attrs + ", \"args\": " + jl(args) +
          ", \"out\": " + (st.out >= 0 ? std::to_string(st.out) : "null") + ", \"error\": " + (st.error.empty() ? "null" : json_str(st.error)) +
          ", \"iso_same\": " + jb(iso_same) + ", \"iso_out\": " + iso_out + ", \"iso_grads\": " + iso_grads + ", \"iso_error\": " + iso_error + "}";
  }
  sj += "]";
  const std::string file = "s" + std::to_string(seed) + ".npz";
  data::save_npz((dir / file).string(), arrays);
  return "{\"seed\": " + std::to_string(seed) + ", \"file\": " + json_str(file) + ", \"dtype\": " + json_str(dts(c.dt)) + ", \"final\": " + std::to_string(final_v) +
         ", \"weights\": " + weights + ", \"grad_error\": " + (chain_error.empty() ? "null" : json_str(chain_error)) +
         ",\n  \"values\": " + vj + ",\n  \"steps\": " + sj + "}";
}

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  uint64_t s0 = 0, s1 = 200;
  int max_steps = 6;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seeds" && i + 1 < argc) {
      const std::string v = argv[++i];
      const auto colon = v.find(':');
      try {
        if (colon == std::string::npos) {
          s0 = std::stoull(v);
          s1 = s0 + 1;
        } else {
          s0 = std::stoull(v.substr(0, colon));
          s1 = std::stoull(v.substr(colon + 1));
        }
      } catch (const std::exception&) {
        std::cerr << "loom_difftest: --seeds takes A:B (seeds A..B-1) or one seed, got '" << v << "'\n";
        return 2;
      }
    } else if (a == "--max-steps" && i + 1 < argc) {
      max_steps = std::max(1, std::atoi(argv[++i]));
    } else if (out.empty() && !a.empty() && a[0] != '-') {
      out = a;
    } else {
      out.clear();
      break;
    }
  }
  if (out.empty() || s1 <= s0) {
    std::cerr << "usage: loom_difftest OUTDIR [--seeds A:B] [--max-steps N]\n"
                 "  writes random op chains for seeds A..B-1 (default 0:200) as .npy files and\n"
                 "  OUTDIR/manifest.json for tests/reference/check_difftest.py\n";
    return 2;
  }
  const std::filesystem::path dir = out;
  std::filesystem::create_directories(dir);
  std::string m = "{\n\"registry\": [";
  for (size_t i = 0; i < op_registry().size(); ++i) {
    const auto& op = op_registry()[i];
    m += (i ? ", " : "") + std::string("{\"name\": ") + json_str(op.name) + ", \"differentiable\": " + jb(op.differentiable) + "}";
  }
  m += "],\n\"generated_ops\": [";
  std::set<std::string> names;
  for (const auto& g : gen_ops()) names.insert(g.op);
  {
    size_t i = 0;
    for (const auto& n : names) m += (i++ ? ", " : "") + json_str(n);
  }
  m += "],\n\"chains\": [";
  int n_steps = 0, n_raised = 0;
  for (uint64_t s = s0; s < s1; ++s) {
    try {
      m += (s != s0 ? ",\n" : "\n") + run_and_dump(s, max_steps, dir, n_steps, n_raised);
    } catch (const std::exception& e) {
      std::cerr << "loom_difftest: seed " << s << ": the tester itself failed: " << e.what() << "\n";
      return 1;
    }
  }
  m += "]\n}\n";
  std::ofstream(dir / "manifest.json") << m;
  std::cout << "loom_difftest: " << (s1 - s0) << " chains, " << n_steps << " steps (" << n_raised << " raised) written to "
            << dir.string() << "\n";
  return 0;
}
