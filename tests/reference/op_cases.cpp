// The case table. Builders below generate the standard shape sets (several shapes, broadcast
// pairs, 0-d, empty, non-contiguous views, float32/float64, integer/bool dtypes) per op family;
// hand-written cases cover each op's own questions (ties, promotion, indexing placement, ...).
#include "reference/op_cases.h"

#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/grad_mode.h>
#include <loom/core/index.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/attention.h>
#include <loom/ops/conv.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/indexing.h>
#include <loom/ops/linalg.h>
#include <loom/ops/losses.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/nn.h>
#include <loom/ops/normalization.h>
#include <loom/ops/pooling.h>
#include <loom/ops/random.h>
#include <loom/ops/rotary.h>
#include <loom/ops/recurrent.h>
#include <loom/ops/reduction.h>
#include <loom/ops/registry.h>
#include <loom/ops/sparse.h>

#include "reference/json_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

namespace loom::reftest {

namespace {

using In = std::vector<Tensor>;
constexpr DType F32 = Float32, F64 = Float64, I32 = Int32, I64 = Int64, B = Bool;
constexpr Layout T_ = Layout::Transposed, S_ = Layout::Strided, R_ = Layout::Reversed;
using std::nullopt;

InputSpec X(Shape s, DType d = F32) {
  InputSpec i;
  i.shape = std::move(s);
  i.dtype = d;
  i.diff = is_floating(d);
  if (d == B) i.domain = Domain::Bool;
  else if (!is_floating(d)) i.domain = Domain::SmallInt;
  return i;
}
InputSpec Idx(Shape s, int64_t lo, int64_t hi, DType d = I64) {
  InputSpec i = X(std::move(s), d);
  i.domain = Domain::Index;
  i.lo = lo;
  i.hi = hi;
  return i;
}
InputSpec IdxV(Shape s, std::vector<double> v, DType d = I64) { return X(std::move(s), d).vals(std::move(v)); }

// An integer spec whose values suit the floating domain `d` (positive, non-zero, ...).
InputSpec IntLike(Shape s, DType dt, Domain d) {
  if (d == Domain::Positive) return Idx(std::move(s), 1, 5, dt);
  InputSpec i = X(std::move(s), dt);
  i.domain = d == Domain::AwayFromZero ? Domain::NonzeroInt : Domain::SmallInt;
  return i;
}

// NaN, infinities, signed zeros and ordinary values (not differentiable: gradient conventions
// at these points are not the question).
const double kNaN = std::numeric_limits<double>::quiet_NaN(), kInf = std::numeric_limits<double>::infinity();
InputSpec Special(DType d = F32) {
  return X({8}, d).vals({kNaN, kInf, -kInf, 0.0, -0.0, 1.0, -1.0, 0.5}).nodiff();
}


class Table {
 public:
  void add(const std::string& op, const std::string& label, std::vector<InputSpec> in, CaseFn fn,
           std::string attrs = "{}", bool gradcheck = true) {
    const OpInfo* info = find_op(op);
    if (!info) throw std::logic_error("op_cases: '" + op + "' is not in the op registry");
    if (!info->differentiable)
      for (auto& s : in) s.diff = false;
    cases.push_back({op, label, std::move(in), std::move(fn), std::move(attrs), gradcheck});
  }
  std::vector<OpCase> cases;
};

// ------------------------------------------------------------------ elementwise
struct Labeled {
  std::string label;
  InputSpec spec;
};
std::vector<Labeled> unary_shapes(Domain d) {
  return {
      {"f32 (3,4)", X({3, 4}).dom(d)},
      {"f64 (2,3,4)", X({2, 3, 4}, F64).dom(d)},
      {"f32 0-d", X({}).dom(d)},
      {"f32 empty (0,3)", X({0, 3}).dom(d)},
      {"f32 transposed (4,3)", X({4, 3}).dom(d).lay(T_)},
      {"f64 strided (3,5)", X({3, 5}, F64).dom(d).lay(S_)},
      {"f32 reversed (5,)", X({5}).dom(d).lay(R_)},
  };
}

using Unary = std::function<Tensor(const Tensor&)>;
void unary(Table& t, const std::string& op, Unary f, Domain d, const std::string& attrs = "{}", bool int_case = false) {
  for (auto& [label, spec] : unary_shapes(d))
    t.add(op, label, {spec}, [f](const In& in) { return f(in[0]); }, attrs);
  if (int_case)
    t.add(op, "int32 (2,3) input", {IntLike({2, 3}, I32, d)}, [f](const In& in) { return f(in[0]); }, attrs);
  t.add(op, "f32 special values (nan, inf, -inf, -0.0)", {Special()}, [f](const In& in) { return f(in[0]); }, attrs);
}

struct Pair {
  std::string label;
  InputSpec a, b;
};
std::vector<Pair> binary_shapes(Domain da, Domain db, bool ints) {
  std::vector<Pair> v = {
      {"f32 (3,4) (3,4)", X({3, 4}).dom(da), X({3, 4}).dom(db)},
      {"f32 broadcast (3,1) (4,)", X({3, 1}).dom(da), X({4}).dom(db)},
      {"f64 broadcast (2,3,4) (3,1)", X({2, 3, 4}, F64).dom(da), X({3, 1}, F64).dom(db)},
      {"f32 0-d (2,3)", X({}).dom(da), X({2, 3}).dom(db)},
      {"f32 empty (0,3) (3,)", X({0, 3}).dom(da), X({3}).dom(db)},
      {"f32 transposed (4,3) strided (4,3)", X({4, 3}).dom(da).lay(T_), X({4, 3}).dom(db).lay(S_)},
      {"f64 reversed (5,) 0-d", X({5}, F64).dom(da).lay(R_), X({}, F64).dom(db)},
      {"promotion int32 (3,4) f32 (4,) -> f64", IntLike({3, 4}, I32, da), X({4}).dom(db)},
      {"promotion f32 (2,3) f64 (3,)", X({2, 3}).dom(da), X({3}, F64).dom(db)},
  };
  if (ints) {
    v.push_back({"int32 (3,4) int64 (4,)", IntLike({3, 4}, I32, da), IntLike({4}, I64, db)});
    v.push_back({"int32 (2,3) int32 (2,3)", IntLike({2, 3}, I32, da), IntLike({2, 3}, I32, db)});
  }
  return v;
}

using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;
void binary(Table& t, const std::string& op, Binary f, Domain da, Domain db, bool ints) {
  for (auto& p : binary_shapes(da, db, ints))
    t.add(op, p.label, {p.a, p.b}, [f](const In& in) { return f(in[0], in[1]); });
  t.add(op, "f64 special values (nan, inf, -inf, -0.0) against (8,)", {Special(F64), X({8}, F64).dom(db).nodiff()},
        [f](const In& in) { return f(in[0], in[1]); });
  t.add(op, "f32 special values against (8,)", {Special(), X({8}).dom(db).nodiff()},
        [f](const In& in) { return f(in[0], in[1]); });
  t.add(op, "f32 special values against 0-d", {Special(), X({}).dom(db).nodiff()},
        [f](const In& in) { return f(in[0], in[1]); });
  t.add(op, "f32 0-d against special values", {X({}).dom(da).nodiff(), Special()},
        [f](const In& in) { return f(in[0], in[1]); });
  // one tensor as both operands: the two gradient contributions must accumulate
  t.add(op, "f64 same tensor as both operands", {X({3, 4}, F64).dom(da == Domain::Distinct ? Domain::Normal : da)},
        [f](const In& in) { return f(in[0], in[0]); }, "{\"operands\":[0,0]}");
}

void comparison(Table& t, const std::string& op, Binary f) {
  const Domain Ti = Domain::Ties;
  std::vector<Pair> v = {
      {"f32 ties (3,4) (4,)", X({3, 4}).dom(Ti), X({4}).dom(Ti)},
      {"f64 (2,3) (2,3)", X({2, 3}, F64).dom(Ti), X({2, 3}, F64).dom(Ti)},
      {"promotion int32 (3,4) f32 (4,)", X({3, 4}, I32), X({4}).dom(Ti)},
      {"int32 (3,1) int64 (4,)", X({3, 1}, I32), X({4}, I64)},
      {"bool (2,3) bool (3,)", X({2, 3}, B), X({3}, B)},
      {"f32 0-d (3,)", X({}).dom(Ti), X({3}).dom(Ti)},
      {"f32 empty (0,3) (3,)", X({0, 3}).dom(Ti), X({3}).dom(Ti)},
      {"f32 transposed (4,3) strided (4,3)", X({4, 3}).dom(Ti).lay(T_), X({4, 3}).dom(Ti).lay(S_)},
  };
  v.push_back({"f32 special values (nan, inf, -0.0) against themselves reversed", Special(), Special().lay(R_)});
  v.push_back({"promotion uint8 (3,) int32 (3,)", Idx({3}, 0, 256, DType::UInt8), X({3}, I32)});
  for (auto& p : v) t.add(op, p.label, {p.a, p.b}, [f](const In& in) { return f(in[0], in[1]); });
}

void logical(Table& t, const std::string& op, Binary f) {
  std::vector<Pair> v = {
      {"bool (3,4) (4,)", X({3, 4}, B), X({4}, B)},
      {"f32 (2,3) int32 (2,3) truthiness", X({2, 3}).dom(Domain::Ties), X({2, 3}, I32)},
      {"bool 0-d (3,)", X({}, B), X({3}, B)},
      {"bool empty (0,3) (3,)", X({0, 3}, B), X({3}, B)},
      {"bool transposed (4,3) reversed (4,3)", X({4, 3}, B).lay(T_), X({4, 3}, B).lay(R_)},
  };
  for (auto& p : v) t.add(op, p.label, {p.a, p.b}, [f](const In& in) { return f(in[0], in[1]); });
}

void elementwise_cases(Table& t) {
  const Domain N = Domain::Normal, P = Domain::Positive, A = Domain::AwayFromZero, D = Domain::Distinct;
  binary(t, "add", [](auto& a, auto& b) { return loom::add(a, b); }, N, N, true);
  t.add("add", "uint8 + uint8 wraps around", {Idx({4}, 0, 256, DType::UInt8), Idx({4}, 0, 256, DType::UInt8)},
        [](const In& in) { return loom::add(in[0], in[1]); });
  t.add("add", "promotion uint8 + int32 -> int32", {Idx({4}, 0, 256, DType::UInt8), X({4}, I32)},
        [](const In& in) { return loom::add(in[0], in[1]); });
  t.add("add", "promotion uint8 + f32 -> f32", {Idx({4}, 0, 256, DType::UInt8), X({4})},
        [](const In& in) { return loom::add(in[0], in[1]); });
  t.add("add", "promotion bool + f32 -> f32", {X({2, 3}, B), X({3})}, [](const In& in) { return loom::add(in[0], in[1]); });
  t.add("add", "promotion bool + int64 -> int64", {X({2, 3}, B), X({3}, I64)},
        [](const In& in) { return loom::add(in[0], in[1]); });
  t.add("add", "promotion int64 + f32 -> f64", {X({3}, I64), X({3})}, [](const In& in) { return loom::add(in[0], in[1]); });
  binary(t, "subtract", [](auto& a, auto& b) { return loom::subtract(a, b); }, N, N, true);
  binary(t, "multiply", [](auto& a, auto& b) { return loom::multiply(a, b); }, N, N, true);
  binary(t, "divide", [](auto& a, auto& b) { return loom::divide(a, b); }, N, A, true);
  t.add("divide", "int32 / int32 true division -> f64", {X({2, 3}, I32), X({2, 3}, I32).dom(Domain::NonzeroInt)},
        [](const In& in) { return loom::divide(in[0], in[1]); });
  binary(t, "power", [](auto& a, auto& b) { return loom::power(a, b); }, P, N, false);
  t.add("power", "int32 ** int32 (non-negative exponents)", {X({3, 4}, I32), Idx({4}, 0, 4, I32)},
        [](const In& in) { return loom::power(in[0], in[1]); });
  t.add("power", "zero base: d/db taken as 0", {X({4}).vals({0, 0, 1.5, 2}), X({4}).vals({2, 3, 0.5, 2.5})},
        [](const In& in) { return loom::power(in[0], in[1]); }, "{}", false);
  // PyTorch's masks: d/da is 0 where b == 0 (the formula's 0 * 0^-1 is NaN at a == 0), d/db is
  // 0 at a == 0 only for b >= 0 (-inf for b < 0)
  t.add("power", "f64 zero exponent and zero base with negative exponent",
        {X({6}, F64).vals({0, 0, 2, -1.5, 0, 0}), X({6}, F64).vals({0, 0, 0, 0, -1, 1})},
        [](const In& in) { return loom::power(in[0], in[1]); }, "{}", false);
  t.add("power", "f64 x ** x at 0 (same tensor as both operands)", {X({4}, F64).vals({0, 1, 2, 0.5})},
        [](const In& in) { return loom::power(in[0], in[0]); }, "{\"operands\":[0,0]}", false);
  binary(t, "maximum", [](auto& a, auto& b) { return loom::maximum(a, b); }, D, D, true);
  binary(t, "minimum", [](auto& a, auto& b) { return loom::minimum(a, b); }, D, D, true);
  for (const char* op : {"maximum", "minimum"}) {
    const bool mx = std::string(op) == "maximum";
    t.add(op, "f32 ties split the gradient 0.5/0.5", {X({3, 4}).dom(Domain::Ties), X({4}).dom(Domain::Ties)},
          [mx](const In& in) { return mx ? loom::maximum(in[0], in[1]) : loom::minimum(in[0], in[1]); }, "{}", false);
    t.add(op, "f64 NaN operands: the gradient goes to both (PyTorch)",
          {X({6}, F64).vals({kNaN, 1, kNaN, 1, 2, -kInf}), X({6}, F64).vals({1, kNaN, kNaN, 1, 3, -kInf})},
          [mx](const In& in) { return mx ? loom::maximum(in[0], in[1]) : loom::minimum(in[0], in[1]); }, "{}", false);
  }
  binary(t, "mod", [](auto& a, auto& b) { return loom::mod(a, b); }, N, A, true);
  t.add("mod", "f64 signs of dividend and divisor", {X({6}, F64).vals({5.5, -5.5, 5.5, -5.5, 0.25, -3}),
                                                     X({6}, F64).vals({2, 2, -2, -2, -1.5, 1.25})},
        [](const In& in) { return loom::mod(in[0], in[1]); });
  binary(t, "floor_divide", [](auto& a, auto& b) { return loom::floor_divide(a, b); }, N, A, true);
  t.add("floor_divide", "f64 boundaries 1 // 0.1 == 9 and signed zeros", {X({5}, F64).vals({1, -1, 0, -0.0, 7}), X({5}, F64).vals({0.1, 0.1, 3, 3, -0.5})},
        [](const In& in) { return loom::floor_divide(in[0], in[1]); });
  t.add("floor_divide", "int64 negative operands", {X({6}, I64).vals({7, -7, 7, -7, 0, -1}), X({6}, I64).vals({2, 2, -2, -2, 3, 5})},
        [](const In& in) { return loom::floor_divide(in[0], in[1]); });
  // the lowest value by -1 (traps in C++, wraps in NumPy) and division by zero (NumPy: 0)
  for (const char* op : {"floor_divide", "mod"}) {
    const bool fd = std::string(op) == "floor_divide";
    auto f = [fd](const In& in) { return fd ? loom::floor_divide(in[0], in[1]) : loom::mod(in[0], in[1]); };
    const double lo64 = -9223372036854775808.0, lo32 = -2147483648.0;
    t.add(op, "int64 lowest by -1, by 1 and by 0", {X({6}, I64).vals({lo64, lo64, lo64, 7, -7, 0}),
                                                    X({6}, I64).vals({-1, 1, 0, 0, -1, 0})}, f);
    t.add(op, "int32 lowest by -1 and by 0", {X({4}, I32).vals({lo32, lo32, 5, -5}), X({4}, I32).vals({-1, 0, 0, -1})}, f);
  }

  comparison(t, "equal", [](auto& a, auto& b) { return loom::equal(a, b); });
  comparison(t, "not_equal", [](auto& a, auto& b) { return loom::not_equal(a, b); });
  comparison(t, "less", [](auto& a, auto& b) { return loom::less(a, b); });
  comparison(t, "less_equal", [](auto& a, auto& b) { return loom::less_equal(a, b); });
  comparison(t, "greater", [](auto& a, auto& b) { return loom::greater(a, b); });
  comparison(t, "greater_equal", [](auto& a, auto& b) { return loom::greater_equal(a, b); });
  logical(t, "logical_and", [](auto& a, auto& b) { return loom::logical_and(a, b); });
  logical(t, "logical_or", [](auto& a, auto& b) { return loom::logical_or(a, b); });
  logical(t, "logical_xor", [](auto& a, auto& b) { return loom::logical_xor(a, b); });
  for (auto& [label, spec] : std::vector<Labeled>{{"bool (3,4)", X({3, 4}, B)},
                                                  {"f32 (3,4) truthiness", X({3, 4}).dom(Domain::Ties)},
                                                  {"int32 (2,3)", X({2, 3}, I32)},
                                                  {"bool 0-d", X({}, B)},
                                                  {"bool empty (0,3)", X({0, 3}, B)},
                                                  {"bool transposed (4,3)", X({4, 3}, B).lay(T_)}})
    t.add("logical_not", label, {spec}, [](const In& in) { return loom::logical_not(in[0]); });

  // where(cond, a, b)
  auto wf = [](const In& in) { return loom::where(in[0], in[1], in[2]); };
  t.add("where", "cond (3,1) a (3,4) b (4,)", {X({3, 1}, B), X({3, 4}), X({4})}, wf);
  t.add("where", "f64 (2,3) all same shape", {X({2, 3}, B), X({2, 3}, F64), X({2, 3}, F64)}, wf);
  t.add("where", "promotion int32 a f32 b -> f64", {X({2, 3}, B), X({2, 3}, I32), X({2, 3})}, wf);
  t.add("where", "0-d cond", {X({}, B), X({2, 2}), X({})}, wf);
  t.add("where", "empty (0,3)", {X({0, 3}, B), X({0, 3}), X({3})}, wf);
  t.add("where", "transposed cond, strided a, reversed b", {X({4, 3}, B).lay(T_), X({4, 3}).lay(S_), X({4, 3}).lay(R_)}, wf);
  t.add("where", "f32 condition (non-zero is true)", {X({2, 3}).dom(Domain::Ties).nodiff(), X({2, 3}), X({2, 3})}, wf);

  // clip(x, lo, hi)
  auto clip_case = [&t](const std::string& label, InputSpec s, std::optional<double> lo, std::optional<double> hi,
                        bool gc = true) {
    std::string attrs = std::string("{\"lo\":") + (lo ? jd(*lo) : "null") + ",\"hi\":" + (hi ? jd(*hi) : "null") + "}";
    t.add("clip", label, {s}, [lo, hi](const In& in) {
      return loom::clip(in[0], lo ? std::optional<Scalar>(*lo) : std::nullopt, hi ? std::optional<Scalar>(*hi) : std::nullopt);
    }, attrs, gc);
  };
  clip_case("f32 (3,4) [-0.5, 0.5]", X({3, 4}), -0.5, 0.5);
  clip_case("f64 (2,3,4) lower only 0.2", X({2, 3, 4}, F64), 0.2, nullopt);
  clip_case("f32 (3,4) upper only -0.1", X({3, 4}), nullopt, -0.1);
  clip_case("f32 0-d", X({}), -0.5, 0.5);
  clip_case("f32 empty (0,3)", X({0, 3}), -0.5, 0.5);
  clip_case("f32 special values", Special(), -0.5, 0.5);
  clip_case("f32 transposed (4,3)", X({4, 3}).lay(T_), -1.0, 0.3);
  clip_case("f64 values on the bounds keep their gradient", X({5}, F64).vals({-0.5, 0.5, 0.0, -1, 1}), -0.5, 0.5, false);
  clip_case("f32 lo > hi gives hi everywhere (no gradient)", X({3, 4}), 0.5, -0.5);
  t.add("clip", "int32 with integer bounds", {X({3, 4}, I32)},
        [](const In& in) { return loom::clip(in[0], Scalar(int64_t{-2}), Scalar(int64_t{3})); }, "{\"lo\":-2,\"hi\":3}");

  // unary math
  unary(t, "abs", [](auto& x) { return loom::abs(x); }, A, "{}", true);
  unary(t, "sign", [](auto& x) { return loom::sign(x); }, Domain::Ties, "{}", true);
  unary(t, "negative", [](auto& x) { return loom::negative(x); }, N, "{}", true);
  unary(t, "exp", [](auto& x) { return loom::exp(x); }, N, "{}", true);
  unary(t, "log", [](auto& x) { return loom::log(x); }, P, "{}", true);
  unary(t, "log1p", [](auto& x) { return loom::log1p(x); }, Domain::Unit);
  unary(t, "expm1", [](auto& x) { return loom::expm1(x); }, N);
  unary(t, "sqrt", [](auto& x) { return loom::sqrt(x); }, P, "{}", true);
  unary(t, "rsqrt", [](auto& x) { return loom::rsqrt(x); }, P);
  unary(t, "square", [](auto& x) { return loom::square(x); }, N, "{}", true);
  unary(t, "sin", [](auto& x) { return loom::sin(x); }, Domain::Wide, "{}", true);
  unary(t, "cos", [](auto& x) { return loom::cos(x); }, Domain::Wide);
  unary(t, "tanh", [](auto& x) { return loom::tanh(x); }, N);
  unary(t, "sigmoid", [](auto& x) { return loom::sigmoid(x); }, Domain::Wide);
  unary(t, "erf", [](auto& x) { return loom::erf(x); }, N);
  unary(t, "relu", [](auto& x) { return loom::relu(x); }, A, "{}", true);
  unary(t, "leaky_relu", [](auto& x) { return loom::leaky_relu(x, 0.1); }, A, "{\"negative_slope\":0.1}");
  unary(t, "elu", [](auto& x) { return loom::elu(x, 1.5); }, A, "{\"alpha\":1.5}");
  // gradient conventions at kinks and NaN (PyTorch's): relu'(0) = 0, relu'(NaN) = 1; abs'(0) =
  // abs'(NaN) = 0; elu'(0) = alpha, elu'(NaN) = 1; leaky_relu'(0) = leaky_relu'(NaN) = slope
  const std::vector<double> kinks = {kNaN, 0.0, -0.0, -1.0, 2.0, kInf, -kInf};
  t.add("relu", "f64 gradient at 0 and NaN", {X({7}, F64).vals(kinks)}, [](const In& in) { return loom::relu(in[0]); },
        "{}", false);
  t.add("abs", "f64 gradient at 0 and NaN", {X({7}, F64).vals(kinks)}, [](const In& in) { return loom::abs(in[0]); },
        "{}", false);
  t.add("elu", "f64 gradient at 0 and NaN", {X({7}, F64).vals(kinks)}, [](const In& in) { return loom::elu(in[0], 1.5); },
        "{\"alpha\":1.5}", false);
  t.add("elu", "f32 gradient at 0 and NaN", {X({7}).vals(kinks)}, [](const In& in) { return loom::elu(in[0], 0.5); },
        "{\"alpha\":0.5}", false);
  t.add("leaky_relu", "f64 gradient at 0 and NaN", {X({7}, F64).vals(kinks)},
        [](const In& in) { return loom::leaky_relu(in[0], 0.1); }, "{\"negative_slope\":0.1}", false);
  unary(t, "gelu", [](auto& x) { return loom::gelu(x); }, N, "{\"approximate\":\"none\"}");
  t.add("gelu", "f64 tanh approximation", {X({3, 4}, F64).dom(Domain::Wide)},
        [](const In& in) { return loom::gelu(in[0], true); }, "{\"approximate\":\"tanh\"}");
  t.add("gelu", "f32 tanh approximation", {X({2, 5})}, [](const In& in) { return loom::gelu(in[0], true); },
        "{\"approximate\":\"tanh\"}");
  unary(t, "silu", [](auto& x) { return loom::silu(x); }, Domain::Wide, "{}");
  unary(t, "softplus", [](auto& x) { return loom::softplus(x, 2.0, 5.0); }, Domain::Wide, "{\"beta\":2.0,\"threshold\":5.0}");
  t.add("softplus", "f64 default beta/threshold, large inputs", {X({2, 4}, F64).vals({-30, -5, 0.5, 19, 21, 25, -1, 3})},
        [](const In& in) { return loom::softplus(in[0]); }, "{\"beta\":1.0,\"threshold\":20.0}");
  unary(t, "floor", [](auto& x) { return loom::floor(x); }, Domain::Wide, "{}", true);
  unary(t, "ceil", [](auto& x) { return loom::ceil(x); }, Domain::Wide, "{}", true);
  unary(t, "round", [](auto& x) { return loom::round(x); }, Domain::Wide, "{}", true);
  t.add("round", "f32 halves round to even", {X({8}).vals({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51})},
        [](const In& in) { return loom::round(in[0]); });

  // astype
  auto cast = [&t](const std::string& label, InputSpec s, DType to, bool gc = true) {
    t.add("astype", label, {s}, [to](const In& in) { return loom::astype(in[0], to); },
          std::string("{\"dtype\":\"") + dtype_name(to) + "\"}", gc);
  };
  cast("f32 (3,4) -> f64", X({3, 4}), F64);
  cast("f64 transposed (4,3) -> f32", X({4, 3}, F64).lay(T_), F32, false);
  cast("f32 (2,3) -> int32 truncates toward zero", X({2, 3}).dom(Domain::Wide).nodiff(), I32);
  cast("f32 ties -> bool", X({2, 3}).dom(Domain::Ties).nodiff(), B);
  cast("int32 (2,3) -> f32", X({2, 3}, I32), F32);
  cast("bool (2,3) -> f64", X({2, 3}, B), F64);
  cast("int64 (4,) -> int32", X({4}, I64), I32);
  cast("f64 0-d -> f32", X({}, F64), F32, false);
  cast("f32 empty (0,3) -> f64", X({0, 3}), F64);
  cast("f32 strided (3,5) -> f64", X({3, 5}).lay(S_), F64);
}

// ------------------------------------------------------------------ reductions
using Red = std::function<Tensor(const Tensor&, const Axes&, bool)>;
std::string red_attrs(const Axes& axes, bool keepdims, const std::string& extra = "") {
  return "{\"axes\":" + jl(axes) + ",\"keepdims\":" + jb(keepdims) + extra + "}";
}
void reduction(Table& t, const std::string& op, Red f, Domain d, bool empty_identity, bool zero_d = true,
               const std::string& extra = "") {
  struct C {
    std::string label;
    InputSpec s;
    Axes axes;
    bool keep;
  };
  std::vector<C> cs = {
      {"f32 (3,4) all axes", X({3, 4}).dom(d), {}, false},
      {"f64 (2,3,4) axis 1", X({2, 3, 4}, F64).dom(d), {1}, false},
      {"f32 (2,3,4) axes (0,2) keepdims", X({2, 3, 4}).dom(d), {0, 2}, true},
      {"f64 (3,4) axis -1 keepdims", X({3, 4}, F64).dom(d), {-1}, true},
      {"f32 transposed (4,3) axis 0", X({4, 3}).dom(d).lay(T_), {0}, false},
      {"f64 strided (3,5) all axes keepdims", X({3, 5}, F64).dom(d).lay(S_), {}, true},
      {"f32 empty (0,3) axis 1", X({0, 3}).dom(d), {1}, false},
      {"int32 (3,4) axis 0", X({3, 4}, I32), {0}, false},
  };
  if (zero_d) cs.push_back({"f32 0-d", X({}).dom(d), {}, false});
  if (empty_identity) cs.push_back({"f32 empty (0,3) axis 0 (identity)", X({0, 3}).dom(d), {0}, false});
  for (auto& c : cs)
    t.add(op, c.label, {c.s}, [f, axes = c.axes, keep = c.keep](const In& in) { return f(in[0], axes, keep); },
          red_attrs(c.axes, c.keep, extra));
}

void reduction_cases(Table& t) {
  const Domain N = Domain::Normal, D = Domain::Distinct;
  reduction(t, "sum", [](auto& x, auto& a, bool k) { return loom::sum(x, a, k); }, N, true);
  t.add("sum", "bool (3,4) counts -> int64", {X({3, 4}, B)}, [](const In& in) { return loom::sum(in[0], {1}); },
        red_attrs({1}, false));
  reduction(t, "mean", [](auto& x, auto& a, bool k) { return loom::mean(x, a, k); }, N, false);
  reduction(t, "prod", [](auto& x, auto& a, bool k) { return loom::prod(x, a, k); }, N, true);
  t.add("prod", "f64 rows with one and two zeros", {X({3, 4}, F64).vals({1, 0, 2, 3, 0, 0, 2, -1, 1.5, 2, -0.5, 3})},
        [](const In& in) { return loom::prod(in[0], {1}); }, red_attrs({1}, false));
  reduction(t, "max", [](auto& x, auto& a, bool k) { return loom::max(x, a, k); }, D, false);
  reduction(t, "min", [](auto& x, auto& a, bool k) { return loom::min(x, a, k); }, D, false);
  t.add("max", "f32 ties split the gradient equally", {X({3, 4}).dom(Domain::Ties)},
        [](const In& in) { return loom::max(in[0], {1}); }, red_attrs({1}, false), false);
  t.add("min", "f32 ties split the gradient equally", {X({3, 4}).dom(Domain::Ties)},
        [](const In& in) { return loom::min(in[0], {}); }, red_attrs({}, false), false);
  for (int64_t ddof : {0, 1}) {
    const std::string ex = ",\"ddof\":" + std::to_string(ddof);
    const std::string sfx = " ddof=" + std::to_string(ddof);
    // an empty axis gives NaN (0 / 0), as NumPy and PyTorch
    reduction(t, "var", [ddof](auto& x, auto& a, bool k) { return loom::var(x, a, ddof, k); }, N, true, ddof == 0, ex);
    reduction(t, "std", [ddof](auto& x, auto& a, bool k) { return loom::std(x, a, ddof, k); }, N, true, false, ex);
    (void)sfx;
  }
  // zero variance: sqrt's rule would give 0 * inf = NaN; the gradient is 0 (PyTorch)
  t.add("std", "f64 constant row and a size-1 axis: zero gradient", {X({2, 3}, F64).vals({3, 3, 3, 1, 2, 4})},
        [](const In& in) { return loom::std(in[0], {1}); }, red_attrs({1}, false, ",\"ddof\":0"));
  t.add("std", "f32 size-1 axis ddof=0", {X({4, 1})}, [](const In& in) { return loom::std(in[0], {1}, 0, true); },
        red_attrs({1}, true, ",\"ddof\":0"));
  // found by random differential testing: a 0-d input is one value of zero deviation, gradient 0
  t.add("std", "f32 0-d ddof=0", {X({})}, [](const In& in) { return loom::std(in[0], {}, 0, false); },
        red_attrs({}, false, ",\"ddof\":0"));
  for (const char* op : {"sum", "max", "min", "prod", "mean"}) {
    const std::string o = op;
    t.add(op, "f32 special values, nan propagates", {X({2, 4}).vals({1, kNaN, 2, 3, kInf, 1, -2, 0.5}).nodiff()},
          [o](const In& in) {
            if (o == "sum") return loom::sum(in[0], {1});
            if (o == "max") return loom::max(in[0], {1});
            if (o == "min") return loom::min(in[0], {1});
            if (o == "prod") return loom::prod(in[0], {1});
            return loom::mean(in[0], {1});
          }, red_attrs({1}, false));
  }
  t.add("mean", "f32 empty (0,3) axis 0 gives nan", {X({0, 3})}, [](const In& in) { return loom::mean(in[0], {0}); },
        red_attrs({0}, false));
  // an empty axis gives log(0) = -inf (PyTorch), though max over it raises
  reduction(t, "logsumexp", [](auto& x, auto& a, bool k) { return loom::logsumexp(x, a, k); }, N, true);
  t.add("logsumexp", "f64 empty (2,0) all axes keepdims", {X({2, 0}, F64)},
        [](const In& in) { return loom::logsumexp(in[0], {}, true); }, red_attrs({}, true));
  t.add("logsumexp", "f64 rows of -inf and +inf", {X({3, 2}, F64).vals({-kInf, -kInf, kInf, 1, -kInf, 0}).nodiff()},
        [](const In& in) { return loom::logsumexp(in[0], {1}); }, red_attrs({1}, false));
  // found by random differential testing: a 0-d input's gradient was NaN (PyTorch: the upstream one)
  t.add("logsumexp", "f32 0-d input", {X({})}, [](const In& in) { return loom::logsumexp(in[0]); }, red_attrs({}, false));
  t.add("logsumexp", "f32 large values stay finite", {X({2, 3}).vals({100, 101, 99, -100, -101, -99})},
        [](const In& in) { return loom::logsumexp(in[0], {1}); }, red_attrs({1}, false));

  for (const char* op : {"all", "any"}) {
    const bool is_all = std::string(op) == "all";
    auto f = [is_all](const Tensor& x, const Axes& a, bool k) { return is_all ? loom::all(x, a, k) : loom::any(x, a, k); };
    struct C {
      std::string label;
      InputSpec s;
      Axes axes;
      bool keep;
    };
    for (auto& c : std::vector<C>{{"bool (3,4) all axes", X({3, 4}, B), {}, false},
                                  {"bool (3,4) axis 1 keepdims", X({3, 4}, B), {1}, true},
                                  {"f32 (3,4) truthiness axis 0", X({3, 4}).dom(Domain::Ties), {0}, false},
                                  {"int32 (2,3) axis -1", X({2, 3}, I32), {-1}, false},
                                  {"bool empty (0,3) all axes", X({0, 3}, B), {}, false},
                                  {"bool empty (0,3) axis 0", X({0, 3}, B), {0}, false},
                                  {"bool 0-d", X({}, B), {}, false},
                                  {"bool transposed (4,3) axis 1", X({4, 3}, B).lay(T_), {1}, false},
                                  {"f32 nan is true", Special(), {}, false}})
      t.add(op, c.label, {c.s}, [f, axes = c.axes, keep = c.keep](const In& in) { return f(in[0], axes, keep); },
            red_attrs(c.axes, c.keep));
  }

  for (const char* op : {"argmax", "argmin"}) {
    const bool is_max = std::string(op) == "argmax";
    auto f = [is_max](const Tensor& x, std::optional<int64_t> a, bool k) {
      return is_max ? loom::argmax(x, a, k) : loom::argmin(x, a, k);
    };
    struct C {
      std::string label;
      InputSpec s;
      std::optional<int64_t> axis;
      bool keep;
    };
    for (auto& c : std::vector<C>{{"f32 (3,4) flattened", X({3, 4}).dom(D), nullopt, false},
                                  {"f64 (2,3,4) axis 1", X({2, 3, 4}, F64).dom(D), 1, false},
                                  {"f32 (3,4) axis -1 keepdims", X({3, 4}).dom(D), -1, true},
                                  {"f32 ties: first index wins", X({3, 4}).dom(Domain::Ties), 1, false},
                                  {"int32 (3,4) axis 0", X({3, 4}, I32), 0, false},
                                  {"f32 transposed (4,3) axis 0", X({4, 3}).dom(D).lay(T_), 0, false},
                                  {"f32 flattened keepdims", X({2, 3}).dom(D), nullopt, true},
                                  {"f32 0-d", X({}), nullopt, false},
                                  {"f32 nan: the first nan wins", X({2, 4}).vals({1, kNaN, 3, kNaN, -kInf, 2, kInf, 0}), 1, false}})
      t.add(op, c.label, {c.s}, [f, axis = c.axis, keep = c.keep](const In& in) { return f(in[0], axis, keep); },
            "{\"axis\":" + jopt(c.axis) + ",\"keepdims\":" + jb(c.keep) + "}");
  }

  auto cs = [&t](const std::string& label, InputSpec s, int64_t axis) {
    t.add("cumsum", label, {s}, [axis](const In& in) { return loom::cumsum(in[0], axis); },
          "{\"axis\":" + std::to_string(axis) + "}");
  };
  cs("f32 (3,4) axis 0", X({3, 4}), 0);
  cs("f64 (2,3,4) axis -1", X({2, 3, 4}, F64), -1);
  cs("int32 (3,4) axis 1 -> int64", X({3, 4}, I32), 1);
  cs("f32 transposed (4,3) axis 1", X({4, 3}).lay(T_), 1);
  cs("f64 reversed (5,) axis 0", X({5}, F64).lay(R_), 0);
  cs("f32 empty (0,3) axis 0", X({0, 3}), 0);

  for (const char* op : {"softmax", "log_softmax"}) {
    const bool lsm = std::string(op) == "log_softmax";
    auto sm = [&t, op, lsm](const std::string& label, InputSpec s, int64_t axis) {
      t.add(op, label, {s}, [axis, lsm](const In& in) { return lsm ? loom::log_softmax(in[0], axis) : loom::softmax(in[0], axis); },
            "{\"axis\":" + std::to_string(axis) + "}");
    };
    sm("f32 (3,4) axis -1", X({3, 4}), -1);
    sm("f64 (2,3,4) axis 1", X({2, 3, 4}, F64), 1);
    sm("f32 (3,4) axis 0", X({3, 4}), 0);
    sm("f32 transposed (4,3) axis -1", X({4, 3}).lay(T_), -1);
    sm("f32 wide values (3,4)", X({3, 4}).vals({50, -50, 0, 1, 100, 100, 99, -3, -200, 1, 2, 3}), -1);
    sm("f32 empty (0,3) axis -1", X({0, 3}), -1);
    sm("f32 empty axis (3,0) axis 1", X({3, 0}), 1);  // max over the axis would raise
    sm("f64 empty (0,) axis 0", X({0}, F64), 0);
    sm("f32 0-d axis 0", X({}), 0);  // PyTorch: a 0-d tensor is one element along axis 0 / -1
    sm("f64 0-d axis -1", X({}, F64), -1);
    t.add(op, "f64 -inf entries (masking)", {X({2, 3}, F64).vals({0, -kInf, 1, -kInf, 2, 0.5})},
          [lsm](const In& in) { return lsm ? loom::log_softmax(in[0], -1) : loom::softmax(in[0], -1); }, "{\"axis\":-1}",
          false);
    sm("int32 (2,3) -> f32", X({2, 3}, I32), -1);
  }
}

// ------------------------------------------------------------------ linalg
void linalg_cases(Table& t) {
  auto mm = [](const In& in) { return loom::matmul(in[0], in[1]); };
  t.add("matmul", "f32 (3,4) @ (4,5)", {X({3, 4}), X({4, 5})}, mm);
  auto lin = [](const In& in) { return loom::linear(in[0], in[1], in[2]); };
  t.add("linear", "f32 (3,4) @ (4,5) + (5,)", {X({3, 4}), X({4, 5}), X({5})}, lin);
  t.add("linear", "f32 batched (2,3,4) @ (4,5) + (5,), transposed weight", {X({2, 3, 4}), X({4, 5}).lay(T_), X({5})}, lin);
  t.add("linear", "f64 (3,4) @ (4,2) + (2,) (the composite)", {X({3, 4}, F64), X({4, 2}, F64), X({2}, F64)}, lin);
  t.add("matmul", "f64 (4,) @ (4,3)", {X({4}, F64), X({4, 3}, F64)}, mm);
  t.add("matmul", "f32 (3,4) @ (4,)", {X({3, 4}), X({4})}, mm);
  t.add("matmul", "f64 (5,) @ (5,) -> 0-d", {X({5}, F64), X({5}, F64)}, mm);
  t.add("matmul", "f32 batched (2,3,4) @ (4,5)", {X({2, 3, 4}), X({4, 5})}, mm);
  t.add("matmul", "f64 broadcast batch (2,1,3,4) @ (3,4,2)", {X({2, 1, 3, 4}, F64), X({3, 4, 2}, F64)}, mm);
  t.add("matmul", "f32 (4,) @ batched (2,4,3)", {X({4}), X({2, 4, 3})}, mm);
  t.add("matmul", "f32 transposed (3,4) @ strided (4,5)", {X({3, 4}).lay(T_), X({4, 5}).lay(S_)}, mm);
  t.add("matmul", "f64 reversed (4,3) @ transposed (3,2)", {X({4, 3}, F64).lay(R_), X({3, 2}, F64).lay(T_)}, mm);
  t.add("matmul", "promotion f32 (2,3) @ f64 (3,2)", {X({2, 3}), X({3, 2}, F64)}, mm);
  t.add("matmul", "int32 (2,3) @ int32 (3,4)", {X({2, 3}, I32), X({3, 4}, I32)}, mm);
  t.add("matmul", "f32 empty inner (3,0) @ (0,4)", {X({3, 0}), X({0, 4})}, mm);
  t.add("matmul", "f32 empty rows (0,3) @ (3,2)", {X({0, 3}), X({3, 2})}, mm);
  // empty inner axis K = 0 with batch axes: zeros (NumPy), empty gradients
  t.add("matmul", "f32 batched empty inner (2,4,0) @ (0,3)", {X({2, 4, 0}), X({0, 3})}, mm);
  t.add("matmul", "f64 batched empty inner (1,2,0) @ (0,)", {X({1, 2, 0}, F64), X({0}, F64)}, mm);
  t.add("matmul", "f32 batched empty inner (2,4,0) @ (2,0,3)", {X({2, 4, 0}), X({2, 0, 3})}, mm);
  t.add("matmul", "f64 empty inner (0,) @ (0,3)", {X({0}, F64), X({0, 3}, F64)}, mm);
  t.add("matmul", "f32 empty batch (0,2,3) @ (3,4)", {X({0, 2, 3}), X({3, 4})}, mm);
  t.add("matmul", "f64 x @ x.T (one tensor, two uses)", {X({3, 4}, F64)},
        [](const In& in) { return loom::matmul(in[0], loom::transpose(in[0])); }, "{\"x_xt\":true}");

  auto dt = [](const In& in) { return loom::dot(in[0], in[1]); };
  t.add("dot", "f32 (4,) . (4,)", {X({4}), X({4})}, dt);
  t.add("dot", "f64 (2,3) . (3,4)", {X({2, 3}, F64), X({3, 4}, F64)}, dt);
  t.add("dot", "f32 0-d . (3,)", {X({}), X({3})}, dt);
  t.add("dot", "f64 (2,3,4) . (4,5)", {X({2, 3, 4}, F64), X({4, 5}, F64)}, dt);
  t.add("dot", "f32 (2,3,4) . (5,4,2)", {X({2, 3, 4}), X({5, 4, 2})}, dt);
  t.add("dot", "f32 transposed (3,4) . (4,)", {X({3, 4}).lay(T_), X({4}).lay(R_)}, dt);
  t.add("dot", "f64 empty inner (2,3,0) . (0,4)", {X({2, 3, 0}, F64), X({0, 4}, F64)}, dt);

  auto ou = [](const In& in) { return loom::outer(in[0], in[1]); };
  t.add("outer", "f32 (3,) (4,)", {X({3}), X({4})}, ou);
  t.add("outer", "f64 (2,2) (3,) flattened", {X({2, 2}, F64), X({3}, F64)}, ou);
  t.add("outer", "f32 strided (3,) 0-d", {X({3}).lay(S_), X({})}, ou);
  t.add("outer", "promotion int32 (3,) f32 (2,)", {X({3}, I32), X({2})}, ou);

  auto td = [&t](const std::string& label, std::vector<InputSpec> in, int64_t axes) {
    t.add("tensordot", label, in, [axes](const In& x) { return loom::tensordot(x[0], x[1], axes); },
          "{\"axes\":" + std::to_string(axes) + "}");
  };
  td("f32 axes=2 (2,3,4) (3,4,5)", {X({2, 3, 4}), X({3, 4, 5})}, 2);
  td("f64 axes=1 (3,4) (4,2)", {X({3, 4}, F64), X({4, 2}, F64)}, 1);
  td("f32 axes=0 outer (2,) (3,)", {X({2}), X({3})}, 0);
  td("f64 axes=2 empty contraction (2,0,3) (0,3,4)", {X({2, 0, 3}, F64), X({0, 3, 4}, F64)}, 2);
  auto tdp = [&t](const std::string& label, std::vector<InputSpec> in, Axes a, Axes b) {
    t.add("tensordot", label, in, [a, b](const In& x) { return loom::tensordot(x[0], x[1], a, b); },
          "{\"axes_a\":" + jl(a) + ",\"axes_b\":" + jl(b) + "}");
  };
  tdp("f32 axes ([1,0],[0,1]) (3,4,2) (4,3,5)", {X({3, 4, 2}), X({4, 3, 5})}, {1, 0}, {0, 1});
  tdp("f64 transposed axes ([-1],[0])", {X({4, 3}, F64).lay(T_), X({3, 2}, F64)}, {-1}, {0});
}

// ------------------------------------------------------------------ linalg (torch.linalg)
// Decompositions are compared gauge-fixed: the sign of each singular/eigen vector (each column
// of U / Q / V) is chosen so that its first entry is positive, in Loom and in the replay alike.
// Symmetric and positive-definite operands are built inside the case from a free matrix X
// (X + X^T, X X^T + n I), so that finite differences see the same function as the gradient.
Tensor flat_cat(const std::vector<Tensor>& xs) {
  std::vector<Tensor> f;
  for (const auto& x : xs) f.push_back(loom::reshape(x, {x.numel()}));
  return loom::concatenate(f, 0);
}
Tensor first_row_sign(const Tensor& v) { return loom::sign(loom::slice(v, -2, 0, 1)); }  // (..., 1, k)
Tensor shift_eye(const Tensor& x, double c) {  // x + c I
  return loom::add(x, loom::eye(x.shape().back(), std::nullopt, 0, x.dtype()) * c);
}
Tensor spd(const Tensor& x) {  // x x^T + n I: symmetric positive-definite
  return shift_eye(loom::matmul(x, loom::swapaxes(x, -1, -2)), static_cast<double>(x.shape().back()));
}
Tensor sym(const Tensor& x) { return loom::add(x, loom::swapaxes(x, -1, -2)); }

// sparse x dense (docs/sparse.md): inputs rows, cols (COO indices), values, dense
void sparse_cases(Table& t) {
  auto sp = [&t](const std::string& label, std::vector<InputSpec> in, int64_t m, int64_t k, bool csr = false) {
    t.add("sparse.mm", label, std::move(in), [=](const In& x) {
      SparseTensor s = SparseTensor::coo(loom::stack({x[0], x[1]}), x[2], {m, k});
      return loom::matmul(csr ? s.to_csr() : s, x[3]);
    }, "{\"m\":" + std::to_string(m) + ",\"k\":" + std::to_string(k) + "}");
  };
  sp("f32 (4,5) nnz 7 @ (5,3)", {Idx({7}, 0, 4), Idx({7}, 0, 5), X({7}), X({5, 3})}, 4, 5);
  sp("f64 duplicates (3,4) @ (4,2)", {IdxV({5}, {0, 2, 0, 2, 1}), IdxV({5}, {1, 3, 1, 3, 0}), X({5}, F64), X({4, 2}, F64)},
     3, 4);
  sp("f32 nnz 0 (3,4) @ (4,2)", {X({0}, I64), X({0}, I64), X({0}), X({4, 2})}, 3, 4);
  sp("f64 (4,6) @ transposed (6,3)", {Idx({9}, 0, 4), Idx({9}, 0, 6), X({9}, F64), X({6, 3}, F64).lay(T_)}, 4, 6);
  sp("f32 (3,5) @ strided (5,4)", {Idx({6}, 0, 3), Idx({6}, 0, 5), X({6}), X({5, 4}).lay(S_)}, 3, 5);
  sp("f64 CSR with duplicates (4,5) @ (5,2)", {IdxV({6}, {3, 0, 3, 1, 0, 3}), IdxV({6}, {4, 2, 4, 0, 1, 0}), X({6}, F64),
     X({5, 2}, F64)}, 4, 5, true);
  sp("promotion f32 values @ f64 (4,3)", {Idx({5}, 0, 2), Idx({5}, 0, 4), X({5}), X({4, 3}, F64)}, 2, 4);
  sp("f32 (3,4) @ empty columns (4,0)", {Idx({4}, 0, 3), Idx({4}, 0, 4), X({4}), X({4, 0})}, 3, 4);
}

void linalg_decomposition_cases(Table& t) {
  auto svd_fixed = [](const In& in) {
    auto r = linalg::svd(in[0], false);
    Tensor s = first_row_sign(r.U);
    return flat_cat({loom::multiply(r.U, s), r.S, loom::multiply(r.Vh, loom::swapaxes(s, -1, -2))});
  };
  t.add("linalg.svd", "f64 (4,3) thin", {X({4, 3}, F64)}, svd_fixed);
  t.add("linalg.svd", "f32 (3,5) wide", {X({3, 5})}, svd_fixed);
  t.add("linalg.svd", "f64 batched transposed (2,3,3)", {X({2, 3, 3}, F64).lay(T_)}, svd_fixed);
  t.add("linalg.svd", "f64 (1,1)", {X({1, 1}, F64).dom(Domain::AwayFromZero)}, svd_fixed);
  t.add("linalg.svd", "f32 empty batch (0,3,2)", {X({0, 3, 2})}, svd_fixed);
  t.add("linalg.svd", "f64 full_matrices (4,2) values", {X({4, 2}, F64).nodiff()},
        [](const In& in) {
          auto r = linalg::svd(in[0], true);
          // U's last columns are any orthonormal completion: compare U^T U = I and the product
          Tensor s = first_row_sign(r.U);
          return flat_cat({loom::matmul(loom::swapaxes(r.U, -1, -2), r.U), r.S, loom::multiply(r.Vh, loom::swapaxes(slice(s, -1, 0, 2), -1, -2))});
        },
        "{\"full\":true}");
  auto svdvals = [](const In& in) { return linalg::svdvals(in[0]); };
  t.add("linalg.svdvals", "f64 (3,4)", {X({3, 4}, F64)}, svdvals);
  t.add("linalg.svdvals", "f32 batched (2,4,3)", {X({2, 4, 3})}, svdvals);

  auto qr_fixed = [](const In& in) {
    auto r = linalg::qr(in[0]);
    Tensor s = first_row_sign(r.Q);
    return flat_cat({loom::multiply(r.Q, s), loom::multiply(r.R, loom::swapaxes(s, -1, -2))});
  };
  t.add("linalg.qr", "f64 (5,3) tall", {X({5, 3}, F64)}, qr_fixed);
  t.add("linalg.qr", "f64 (3,3) strided", {X({3, 3}, F64).lay(S_)}, qr_fixed);
  t.add("linalg.qr", "f64 (3,5) wide", {X({3, 5}, F64)}, qr_fixed);
  t.add("linalg.qr", "f32 batched (2,4,3)", {X({2, 4, 3})}, qr_fixed);
  t.add("linalg.qr", "f32 empty batch (0,2,2)", {X({0, 2, 2})}, qr_fixed);

  auto eigh_fixed = [](const In& in) {
    auto r = linalg::eigh(sym(in[0]));
    return flat_cat({r.eigenvalues, loom::multiply(r.eigenvectors, first_row_sign(r.eigenvectors))});
  };
  t.add("linalg.eigh", "f64 sym (4,4)", {X({4, 4}, F64)}, eigh_fixed, "{\"sym\":true}");
  t.add("linalg.eigh", "f32 sym batched (2,3,3)", {X({2, 3, 3})}, eigh_fixed, "{\"sym\":true}");
  t.add("linalg.eigh", "f64 sym transposed (3,3)", {X({3, 3}, F64).lay(T_)}, eigh_fixed, "{\"sym\":true}");
  t.add("linalg.eigh", "f64 UPLO=U of an unsymmetric matrix", {X({3, 3}, F64).nodiff()},
        [](const In& in) {
          auto r = linalg::eigh(in[0], "U");
          return flat_cat({r.eigenvalues, loom::multiply(r.eigenvectors, first_row_sign(r.eigenvectors))});
        },
        "{\"uplo\":\"U\"}");
  t.add("linalg.eigvalsh", "f64 sym (4,4)", {X({4, 4}, F64)}, [](const In& in) { return linalg::eigvalsh(sym(in[0])); },
        "{\"sym\":true}");
  t.add("linalg.eigvalsh", "f32 sym batched (2,3,3)", {X({2, 3, 3})},
        [](const In& in) { return linalg::eigvalsh(sym(in[0])); }, "{\"sym\":true}");

  auto chol = [](bool upper) {
    return [upper](const In& in) { return linalg::cholesky(spd(in[0]), upper); };
  };
  t.add("linalg.cholesky", "f64 spd (4,4)", {X({4, 4}, F64)}, chol(false));
  t.add("linalg.cholesky", "f32 spd batched (2,3,3)", {X({2, 3, 3})}, chol(false));
  t.add("linalg.cholesky", "f64 spd upper (3,3)", {X({3, 3}, F64).lay(T_)}, chol(true), "{\"upper\":true}");
  t.add("linalg.cholesky", "f64 (1,1)", {X({1, 1}, F64)}, chol(false));
  t.add("linalg.cholesky", "f32 empty batch (0,3,3)", {X({0, 3, 3})}, chol(false));

  // a + 4 I: well-conditioned for entries in [-2, 2]
  auto slv = [](const In& in) { return linalg::solve(shift_eye(in[0], 4), in[1]); };
  t.add("linalg.solve", "f64 (3,3) (3,2)", {X({3, 3}, F64), X({3, 2}, F64)}, slv, "{\"shift\":4}");
  t.add("linalg.solve", "f32 (3,3) vector (3,)", {X({3, 3}), X({3})}, slv, "{\"shift\":4}");
  t.add("linalg.solve", "f64 batched vectors (2,3,3) (2,3)", {X({2, 3, 3}, F64), X({2, 3}, F64)}, slv, "{\"shift\":4}");
  t.add("linalg.solve", "f64 broadcast batch (2,1,3,3) (4,3,1)", {X({2, 1, 3, 3}, F64), X({4, 3, 1}, F64).lay(T_)}, slv,
        "{\"shift\":4}");
  t.add("linalg.solve", "promotion f32 (2,2) f64 (2,)", {X({2, 2}), X({2}, F64)}, slv, "{\"shift\":4}");
  t.add("linalg.solve", "f32 empty batch (0,2,2) (0,2,3)", {X({0, 2, 2}), X({0, 2, 3})}, slv, "{\"shift\":4}");
  auto inv = [](const In& in) { return linalg::inv(shift_eye(in[0], 4)); };
  t.add("linalg.inv", "f64 (3,3)", {X({3, 3}, F64)}, inv, "{\"shift\":4}");
  t.add("linalg.inv", "f32 batched reversed (2,2,2)", {X({2, 2, 2}).lay(R_)}, inv, "{\"shift\":4}");
  t.add("linalg.inv", "f64 (1,1)", {X({1, 1}, F64)}, inv, "{\"shift\":4}");
  auto det = [](const In& in) { return linalg::det(in[0]); };
  t.add("linalg.det", "f64 (3,3)", {X({3, 3}, F64)}, det);
  t.add("linalg.det", "f32 batched (2,4,4)", {X({2, 4, 4})}, det);
  t.add("linalg.det", "f64 singular (3,3) value", {X({3, 3}, F64).vals({1, 2, 3, 2, 4, 6, 1, 0, 1}).nodiff()}, det);
  t.add("linalg.det", "f64 (0,0)", {X({0, 0}, F64)}, det);
  auto sld = [](const In& in) {
    auto r = linalg::slogdet(in[0]);
    return flat_cat({r.sign, r.logabsdet});
  };
  t.add("linalg.slogdet", "f64 (3,3)", {X({3, 3}, F64)}, sld);
  t.add("linalg.slogdet", "f32 batched transposed (2,3,3)", {X({2, 3, 3}).lay(T_)}, sld);
  auto lsq = [](const In& in) { return linalg::lstsq(in[0], in[1]); };
  t.add("linalg.lstsq", "f64 tall (5,3) (5,2)", {X({5, 3}, F64), X({5, 2}, F64)}, lsq);
  t.add("linalg.lstsq", "f64 wide (2,4) (2,)", {X({2, 4}, F64), X({2}, F64)}, lsq);
  t.add("linalg.lstsq", "f32 batched (2,4,2) (2,4,3)", {X({2, 4, 2}), X({2, 4, 3})}, lsq);
  t.add("linalg.lstsq", "f64 square transposed (3,3) (3,1)", {X({3, 3}, F64).lay(T_), X({3, 1}, F64)}, lsq);

  auto nrm = [&t](const std::string& label, InputSpec s, std::string ord_json, std::optional<Axes> axes, bool keep,
                  std::function<Tensor(const Tensor&)> f) {
    t.add("linalg.norm", label, {s}, [f](const In& in) { return f(in[0]); },
          "{\"ord\":" + ord_json + ",\"axes\":" + (axes ? jl(*axes) : std::string("null")) + ",\"keepdims\":" + jb(keep) + "}");
  };
  const double inf = std::numeric_limits<double>::infinity();
  nrm("f32 default (2,3,4)", X({2, 3, 4}), "null", nullopt, false, [](const Tensor& x) { return linalg::norm(x); });
  nrm("f64 default keepdims (3,4)", X({3, 4}, F64), "null", nullopt, true,
      [](const Tensor& x) { return linalg::norm(x, nullopt, nullopt, true); });
  nrm("f64 vector ord 3 axis 1", X({3, 4}, F64), "3", Axes{1}, false, [](const Tensor& x) { return linalg::norm(x, 3.0, Axes{1}); });
  nrm("f64 vector ord 1 axis -1 keepdims", X({2, 3}, F64).dom(Domain::AwayFromZero), "1", Axes{-1}, true,
      [](const Tensor& x) { return linalg::norm(x, 1.0, Axes{-1}, true); });
  nrm("f32 vector ord 0.5 (4,)", X({4}).dom(Domain::AwayFromZero), "0.5", nullopt, false, [](const Tensor& x) { return linalg::norm(x, 0.5); });
  nrm("f64 vector ord inf axis 0", X({3, 4}, F64).dom(Domain::Distinct), "\"inf\"", Axes{0}, false,
      [inf](const Tensor& x) { return linalg::norm(x, inf, Axes{0}); });
  nrm("f64 vector ord -inf axis 1", X({3, 4}, F64).dom(Domain::Distinct), "\"-inf\"", Axes{1}, false,
      [inf](const Tensor& x) { return linalg::norm(x, -inf, Axes{1}); });
  nrm("f64 vector ord 0 (count)", X({5}, F64).vals({0, 1, -2, 0, 3}), "0", nullopt, false,
      [](const Tensor& x) { return linalg::norm(x, 0.0); });
  nrm("f64 vector 2 of zeros (gradient 0)", X({3}, F64).vals({0, 0, 0}), "2", Axes{0}, false,
      [](const Tensor& x) { return linalg::norm(x, 2.0, Axes{0}); });
  nrm("f64 matrix fro (3,4)", X({3, 4}, F64), "\"fro\"", nullopt, false, [](const Tensor& x) { return linalg::norm(x, "fro"); });
  nrm("f64 matrix nuc axes (2,0) keepdims", X({3, 2, 4}, F64), "\"nuc\"", Axes{2, 0}, true,
      [](const Tensor& x) { return linalg::norm(x, "nuc", Axes{2, 0}, true); });
  nrm("f64 matrix ord 2 batched", X({2, 3, 3}, F64), "2", Axes{-2, -1}, false,
      [](const Tensor& x) { return linalg::norm(x, 2.0, Axes{-2, -1}); });
  nrm("f32 matrix ord -2 transposed", X({3, 4}).lay(T_), "-2", nullopt, false, [](const Tensor& x) { return linalg::norm(x, -2.0); });
  nrm("f64 matrix ord 1 (3,4)", X({3, 4}, F64).dom(Domain::Distinct), "1", nullopt, false, [](const Tensor& x) { return linalg::norm(x, 1.0); });
  nrm("f64 matrix ord -1 axes (1,0)", X({3, 4}, F64).dom(Domain::Distinct), "-1", Axes{1, 0}, false,
      [](const Tensor& x) { return linalg::norm(x, -1.0, Axes{1, 0}); });
  nrm("f64 matrix ord inf keepdims", X({2, 3, 4}, F64).dom(Domain::Distinct), "\"inf\"", Axes{1, 2}, true,
      [inf](const Tensor& x) { return linalg::norm(x, inf, Axes{1, 2}, true); });
  nrm("f32 matrix ord -inf", X({3, 4}).dom(Domain::Distinct), "\"-inf\"", nullopt, false,
      [inf](const Tensor& x) { return linalg::norm(x, -inf); });
  nrm("f32 empty (0,3) default", X({0, 3}), "null", nullopt, false, [](const Tensor& x) { return linalg::norm(x); });

  auto es = [&t](const std::string& subs, std::vector<InputSpec> in) {
    t.add("einsum", subs, std::move(in), [subs](const In& x) { return loom::einsum(subs, x); },
          "{\"subscripts\":" + json_str(subs) + "}");
  };
  es("ij,jk->ik", {X({3, 4}), X({4, 2})});
  es("ij,jk", {X({3, 4}, F64), X({4, 2}, F64).lay(T_)});
  es("ii->i", {X({3, 3}, F64)});
  es("ii", {X({4, 4}, F64)});
  es("ij->ji", {X({2, 3})});
  es("i,i->", {X({5}, F64), X({5}, F64)});
  es("i,j->ij", {X({3}), X({2})});
  es("bij,bjk->bik", {X({2, 3, 4}, F64), X({2, 4, 2}, F64)});
  es("...ij,...jk->...ik", {X({2, 1, 3, 4}, F64), X({3, 4, 2}, F64)});
  es("b...,b->...", {X({2, 3, 4}, F64), X({2}, F64)});
  es("ij,jk,kl->il", {X({2, 5}, F64), X({5, 6}, F64), X({6, 3}, F64)});
  es("ab,bc,cd,de->ae", {X({2, 3}), X({3, 4}), X({4, 2}), X({2, 3})});
  es("iij->j", {X({3, 3, 2}, F64).lay(T_)});
  es("ijk,ikl->jl", {X({2, 3, 4}, F64).lay(R_), X({2, 4, 2}, F64)});
  es("i,i,i->i", {X({4}, F64), X({4}, F64), X({4}, F64)});
  es("ij,ij->", {X({0, 3}, F64), X({0, 3}, F64)});
  es("ij,j->i", {X({3, 1}, F64), X({4}, F64)});

  auto kr = [](const In& in) { return loom::kron(in[0], in[1]); };
  t.add("kron", "f32 (2,3) (3,2)", {X({2, 3}), X({3, 2})}, kr);
  t.add("kron", "f64 (2,) (2,2) rank padding", {X({2}, F64), X({2, 2}, F64)}, kr);
  t.add("kron", "f64 transposed (3,2) 0-d", {X({3, 2}, F64).lay(T_), X({}, F64)}, kr);
  t.add("kron", "int32 (2,2) int32 (2,)", {X({2, 2}, I32), X({2}, I32)}, kr);
}

// ------------------------------------------------------------------ manipulation
void manipulation_cases(Table& t) {
  auto rs = [&t](const std::string& label, InputSpec s, Shape shape) {
    t.add("reshape", label, {s}, [shape](const In& in) { return loom::reshape(in[0], shape); },
          "{\"shape\":" + jl(shape) + "}");
  };
  rs("f32 (3,4) -> (2,6)", X({3, 4}), {2, 6});
  rs("f64 (2,3,4) -> (-1,4)", X({2, 3, 4}, F64), {-1, 4});
  rs("f32 transposed (4,3) -> (12,) copies", X({4, 3}).lay(T_), {12});
  rs("f32 strided (3,5) -> (5,3)", X({3, 5}).lay(S_), {5, 3});
  rs("f32 0-d -> (1,1)", X({}), {1, 1});
  rs("f32 empty (0,3) -> (3,0)", X({0, 3}), {3, 0});
  rs("int32 (2,3) -> (3,2)", X({2, 3}, I32), {3, 2});

  auto tr = [&t](const std::string& label, InputSpec s, Axes axes) {
    t.add("transpose", label, {s}, [axes](const In& in) { return loom::transpose(in[0], axes); },
          "{\"axes\":" + jl(axes) + "}");
  };
  tr("f32 (3,4) reversed axes", X({3, 4}), {});
  tr("f64 (2,3,4) perm (1,2,0)", X({2, 3, 4}, F64), {1, 2, 0});
  tr("f32 (2,3,4) negative axes (-1,0,-2)", X({2, 3, 4}), {-1, 0, -2});
  tr("f32 0-d", X({}), {});
  tr("f32 transposed (4,3) back", X({4, 3}).lay(T_), {});
  tr("bool (2,3)", X({2, 3}, B), {});

  auto sq = [&t](const std::string& label, InputSpec s, Axes axes) {
    t.add("squeeze", label, {s}, [axes](const In& in) { return loom::squeeze(in[0], axes); },
          "{\"axes\":" + jl(axes) + "}");
  };
  sq("f32 (1,3,1,4) all", X({1, 3, 1, 4}), {});
  sq("f64 (3,1,4) axis 1", X({3, 1, 4}, F64), {1});
  sq("f32 (1,3,1) axes (0,-1)", X({1, 3, 1}), {0, -1});
  sq("f32 0-d", X({}), {});
  sq("f32 empty (0,1) axis 1", X({0, 1}), {1});
  sq("f32 strided (1,5)", X({1, 5}).lay(S_), {});

  auto ed = [&t](const std::string& label, InputSpec s, int64_t axis) {
    t.add("expand_dims", label, {s}, [axis](const In& in) { return loom::expand_dims(in[0], axis); },
          "{\"axis\":" + std::to_string(axis) + "}");
  };
  ed("f32 (3,4) axis 0", X({3, 4}), 0);
  ed("f64 (3,4) axis -1", X({3, 4}, F64), -1);
  ed("f32 0-d axis 0", X({}), 0);
  ed("f32 transposed (4,3) axis 1", X({4, 3}).lay(T_), 1);
  ed("f32 empty (0,3) axis 2", X({0, 3}), 2);

  auto bt = [&t](const std::string& label, InputSpec s, Shape shape) {
    t.add("broadcast_to", label, {s}, [shape](const In& in) { return loom::broadcast_to(in[0], shape); },
          "{\"shape\":" + jl(shape) + "}");
  };
  bt("f32 (3,1) -> (2,3,4)", X({3, 1}), {2, 3, 4});
  bt("f64 0-d -> (2,2)", X({}, F64), {2, 2});
  bt("f32 (4,) -> (3,4)", X({4}), {3, 4});
  bt("f32 (1,3) -> (0,3) empty", X({1, 3}), {0, 3});
  bt("f32 reversed (3,) -> (2,3)", X({3}).lay(R_), {2, 3});
  bt("int32 (2,1) -> (2,3)", X({2, 1}, I32), {2, 3});

  auto sl = [&t](const std::string& label, InputSpec s, int64_t axis, std::optional<int64_t> b, std::optional<int64_t> e,
                 int64_t step) {
    t.add("slice", label, {s}, [=](const In& in) { return loom::slice(in[0], axis, b, e, step); },
          "{\"axis\":" + std::to_string(axis) + ",\"start\":" + jopt(b) + ",\"stop\":" + jopt(e) +
              ",\"step\":" + std::to_string(step) + "}");
  };
  sl("f32 (5,4) axis 0 [1:5:2]", X({5, 4}), 0, 1, 5, 2);
  sl("f64 (3,6) axis 1 [::-1]", X({3, 6}, F64), 1, nullopt, nullopt, -1);
  sl("f32 (3,6) axis -1 [5:0:-2]", X({3, 6}), -1, 5, 0, -2);
  sl("f32 (6,) [-4:-1]", X({6}), 0, -4, -1, 1);
  sl("f32 (4,3) empty result [3:1]", X({4, 3}), 0, 3, 1, 1);
  sl("f32 transposed (4,3) axis 1 [1:]", X({4, 3}).lay(T_), 1, 1, nullopt, 1);
  sl("f64 strided (3,5) axis 1 [::-2]", X({3, 5}, F64).lay(S_), 1, nullopt, nullopt, -2);
  sl("f32 (5,) out-of-range bounds [-10:10:3]", X({5}), 0, -10, 10, 3);

  auto cat = [](int64_t axis) { return [axis](const In& in) { return loom::concatenate(in, axis); }; };
  t.add("concatenate", "f32 two (2,3) (4,3) axis 0", {X({2, 3}), X({4, 3})}, cat(0), "{\"axis\":0}");
  t.add("concatenate", "f64 three axis 1", {X({2, 1}, F64), X({2, 3}, F64), X({2, 2}, F64)}, cat(1), "{\"axis\":1}");
  t.add("concatenate", "f32 axis -1 transposed and strided", {X({3, 2}).lay(T_), X({3, 4}).lay(S_)}, cat(-1), "{\"axis\":-1}");
  t.add("concatenate", "promotion int32 f32 -> f64", {X({2, 2}, I32), X({1, 2})}, cat(0), "{\"axis\":0}");
  t.add("concatenate", "f32 with an empty part", {X({0, 3}), X({2, 3})}, cat(0), "{\"axis\":0}");
  t.add("concatenate", "f32 single tensor", {X({3})}, cat(0), "{\"axis\":0}");

  auto stk = [](int64_t axis) { return [axis](const In& in) { return loom::stack(in, axis); }; };
  t.add("stack", "f32 two (3,) axis 0", {X({3}), X({3})}, stk(0), "{\"axis\":0}");
  t.add("stack", "f64 three (2,3) axis -1", {X({2, 3}, F64), X({2, 3}, F64), X({2, 3}, F64)}, stk(-1), "{\"axis\":-1}");
  t.add("stack", "f32 0-d scalars", {X({}), X({}), X({})}, stk(0), "{\"axis\":0}");
  t.add("stack", "f32 transposed (4,3) axis 1", {X({4, 3}).lay(T_), X({4, 3})}, stk(1), "{\"axis\":1}");
  t.add("stack", "f32 empty (0,2)", {X({0, 2}), X({0, 2})}, stk(1), "{\"axis\":1}");

  auto sp = [&t](const std::string& label, InputSpec s, int64_t sections, int64_t axis, size_t part) {
    t.add("split", label, {s}, [=](const In& in) { return loom::split(in[0], sections, axis).at(part); },
          "{\"sections\":" + std::to_string(sections) + ",\"axis\":" + std::to_string(axis) + ",\"part\":" +
              std::to_string(part) + "}");
  };
  auto spi = [&t](const std::string& label, InputSpec s, std::vector<int64_t> idx, int64_t axis, size_t part) {
    t.add("split", label, {s}, [=](const In& in) { return loom::split(in[0], idx, axis).at(part); },
          "{\"indices\":" + jl(idx) + ",\"axis\":" + std::to_string(axis) + ",\"part\":" + std::to_string(part) + "}");
  };
  sp("f32 (6,4) 3 sections part 1", X({6, 4}), 3, 0, 1);
  sp("f64 (2,6) 2 sections axis -1 part 0", X({2, 6}, F64), 2, -1, 0);
  spi("f32 (7,) indices [2,5] part 2", X({7}), {2, 5}, 0, 2);
  spi("f32 (3,6) indices [1,4] axis 1 part 1", X({3, 6}), {1, 4}, 1, 1);
  spi("f32 (5,) indices [3,1] empty part 1", X({5}), {3, 1}, 0, 1);
  spi("f32 (5,) unsorted indices [3,1] part 2 is x[1:]", X({5}), {3, 1}, 0, 2);
  sp("f32 transposed (4,3) 2 sections part 1", X({4, 3}).lay(T_), 2, 0, 1);

  auto pd = [&t](const std::string& label, InputSpec s, std::vector<std::pair<int64_t, int64_t>> pw, double value) {
    std::vector<int64_t> flat;
    for (auto& p : pw) {
      flat.push_back(p.first);
      flat.push_back(p.second);
    }
    t.add("pad", label, {s}, [pw, value](const In& in) { return loom::pad(in[0], pw, value); },
          "{\"pad_width\":" + jl(flat) + ",\"value\":" + jd(value) + "}");
  };
  pd("f32 (2,3) ((1,2),(0,3)) value 0", X({2, 3}), {{1, 2}, {0, 3}}, 0.0);
  pd("f64 (3,) ((2,1)) value 1.5", X({3}, F64), {{2, 1}}, 1.5);
  pd("f32 transposed (4,3) ((0,1),(2,0))", X({4, 3}).lay(T_), {{0, 1}, {2, 0}}, -1.0);
  pd("f32 empty (0,2) ((1,1),(0,0))", X({0, 2}), {{1, 1}, {0, 0}}, 2.0);
  pd("f32 (2,2,2) ((0,0),(1,0),(0,1))", X({2, 2, 2}), {{0, 0}, {1, 0}, {0, 1}}, 0.0);

  auto tl = [&t](const std::string& label, InputSpec s, std::vector<int64_t> reps) {
    t.add("tile", label, {s}, [reps](const In& in) { return loom::tile(in[0], reps); }, "{\"reps\":" + jl(reps) + "}");
  };
  tl("f32 (2,3) reps (2,1)", X({2, 3}), {2, 1});
  tl("f64 (3,) reps (2,2) adds an axis", X({3}, F64), {2, 2});
  tl("f32 (2,1,3) reps (2,) pads reps", X({2, 1, 3}), {2});
  tl("f32 0-d reps (3,)", X({}), {3});
  tl("f32 (2,3) reps (0,1) empty", X({2, 3}), {0, 1});
  tl("f32 strided (2,3) reps (1,2)", X({2, 3}).lay(S_), {1, 2});

  auto rp = [&t](const std::string& label, InputSpec s, int64_t repeats, std::optional<int64_t> axis) {
    t.add("repeat", label, {s}, [=](const In& in) { return loom::repeat(in[0], repeats, axis); },
          "{\"repeats\":" + std::to_string(repeats) + ",\"axis\":" + jopt(axis) + "}");
  };
  rp("f32 (2,3) flattened x2", X({2, 3}), 2, nullopt);
  rp("f64 (2,3) axis 1 x3", X({2, 3}, F64), 3, 1);
  rp("f32 (2,3) axis 0 x0 empty", X({2, 3}), 0, 0);
  rp("f32 transposed (4,3) axis -1 x2", X({4, 3}).lay(T_), 2, -1);
  rp("f32 0-d x4", X({}), 4, nullopt);

  auto fl = [&t](const std::string& label, InputSpec s, Axes axes) {
    t.add("flip", label, {s}, [axes](const In& in) { return loom::flip(in[0], axes); }, "{\"axes\":" + jl(axes) + "}");
  };
  fl("f32 (3,4) all axes", X({3, 4}), {});
  fl("f64 (2,3,4) axis 1", X({2, 3, 4}, F64), {1});
  fl("f32 (2,3,4) axes (0,-1)", X({2, 3, 4}), {0, -1});
  fl("f32 reversed (5,) back", X({5}).lay(R_), {});
  fl("f32 empty (0,3) axis 0", X({0, 3}), {0});
  fl("f32 0-d", X({}), {});
}

// ------------------------------------------------------------------ indexing
struct Ix {
  enum Kind { Int, Sl, Ell, New, Arr } k;
  int64_t v = 0;
  std::optional<int64_t> start, stop;
  int64_t step = 1;
  int input = 0;
};
Ix I(int64_t v) { return {Ix::Int, v}; }
Ix S(std::optional<int64_t> b = nullopt, std::optional<int64_t> e = nullopt, int64_t step = 1) {
  Ix x{Ix::Sl};
  x.start = b;
  x.stop = e;
  x.step = step;
  return x;
}
const Ix E{Ix::Ell}, NA{Ix::New};
Ix A(int input) {
  Ix x{Ix::Arr};
  x.input = input;
  return x;
}

std::vector<TensorIndex> build_index(const std::vector<Ix>& ix, const In& in) {
  std::vector<TensorIndex> out;
  for (const Ix& x : ix) {
    switch (x.k) {
      case Ix::Int: out.emplace_back(x.v); break;
      case Ix::Sl: out.emplace_back(Slice(x.start, x.stop, x.step)); break;
      case Ix::Ell: out.emplace_back(Ellipsis); break;
      case Ix::New: out.emplace_back(NewAxis); break;
      case Ix::Arr: out.emplace_back(in.at(x.input)); break;
    }
  }
  return out;
}

std::string index_json(const std::vector<Ix>& ix) {
  std::string s = "[";
  for (size_t i = 0; i < ix.size(); ++i) {
    const Ix& x = ix[i];
    if (i) s += ",";
    switch (x.k) {
      case Ix::Int: s += "{\"kind\":\"int\",\"value\":" + std::to_string(x.v) + "}"; break;
      case Ix::Sl:
        s += "{\"kind\":\"slice\",\"start\":" + jopt(x.start) + ",\"stop\":" + jopt(x.stop) + ",\"step\":" +
             std::to_string(x.step) + "}";
        break;
      case Ix::Ell: s += "{\"kind\":\"ellipsis\"}"; break;
      case Ix::New: s += "{\"kind\":\"newaxis\"}"; break;
      case Ix::Arr: s += "{\"kind\":\"array\",\"input\":" + std::to_string(x.input) + "}"; break;
    }
  }
  return s + "]";
}

void indexing_cases(Table& t) {
  auto ix = [&t](const std::string& label, std::vector<InputSpec> in, std::vector<Ix> spec) {
    t.add("index", label, in, [spec](const In& x) { return loom::index(x[0], build_index(spec, x)); },
          "{\"index\":" + index_json(spec) + "}");
  };
  ix("int and slice x[1, 1:3]", {X({3, 4})}, {I(1), S(1, 3)});
  ix("negative-step slices x[::-1, 3:0:-2]", {X({3, 4}, F64)}, {S(nullopt, nullopt, -1), S(3, 0, -2)});
  ix("Ellipsis and NewAxis x[..., None, 1]", {X({2, 3, 4})}, {E, NA, I(1)});
  ix("NewAxis first x[None, ..., ::2]", {X({2, 3, 4})}, {NA, E, S(nullopt, nullopt, 2)});
  ix("repeated integer array x[[0,2,0,0]] accumulates", {X({3, 4}), IdxV({4}, {0, 2, 0, 0})}, {A(1)});
  ix("negative indices x[:, [-1,0,-1]]", {X({3, 4}, F64), IdxV({3}, {-1, 0, -1})}, {S(), A(1)});
  ix("2-d index array x[idx(2,3)]", {X({4, 3}), Idx({2, 3}, 0, 4)}, {A(1)});
  ix("boolean mask x[mask(3,4)]", {X({3, 4}), X({3, 4}, B)}, {A(1)});
  ix("boolean mask on axis 1 x[:, mask(4)]", {X({3, 4}, F64), X({4}, B).vals({1, 0, 1, 1})}, {S(), A(1)});
  ix("all-false mask", {X({3, 4}), X({3}, B).vals({0, 0, 0})}, {A(1)});
  ix("two adjacent arrays x[:, i(2,1), j(3)]", {X({3, 4, 5}), Idx({2, 1}, 0, 4), Idx({3}, -5, 5)}, {S(), A(1), A(2)});
  ix("two non-adjacent arrays x[i, :, j] (advanced axes first)", {X({3, 4, 5}), Idx({2}, 0, 3), Idx({2}, 0, 5)},
     {A(1), S(), A(2)});
  ix("int and array separated by a slice x[1, :, i] (advanced axes first)", {X({3, 4, 5}), Idx({3}, 0, 5)},
     {I(1), S(), A(1)});
  ix("int and adjacent array x[:, 1, i]", {X({3, 4, 5}), Idx({2}, 0, 5)}, {S(), I(1), A(1)});
  ix("arrays separated by NewAxis x[i, None, j]", {X({3, 4}), Idx({2}, 0, 3), Idx({2}, 0, 4)}, {A(1), NA, A(2)});
  ix("NewAxis then array x[None, i]", {X({3, 4}), Idx({5}, 0, 3)}, {NA, A(1)});
  ix("array then Ellipsis x[i, ...]", {X({3, 2, 2}, F64), Idx({4}, -3, 3)}, {A(1), E});
  ix("empty index array x[[]]", {X({3, 4}), X({0}, I64)}, {A(1)});
  ix("transposed input x[:, i]", {X({4, 3}).lay(T_), Idx({5}, 0, 3)}, {S(), A(1)});
  ix("strided input x[1:, ::-1]", {X({3, 5}).lay(S_)}, {S(1), S(nullopt, nullopt, -1)});
  ix("int32 index array", {X({5}), Idx({3, 2}, 0, 5, I32)}, {A(1)});
  ix("0-d x[None]", {X({})}, {NA});
  ix("0-d x[...]", {X({}, F64)}, {E});
  ix("mask then slice x[mask, 1:]", {X({3, 4}, F64), X({3}, B).vals({1, 0, 1})}, {A(1), S(1)});
  // a 0-d mask adds an axis of size 1 (true) or 0 (false) and consumes none
  ix("0-d true mask x[True]", {X({2, 3}), X({}, B).vals({1})}, {A(1)});
  ix("0-d false mask x[False]", {X({2, 3}, F64), X({}, B).vals({0})}, {A(1)});
  ix("0-d mask beside an int x[:, True, 1]", {X({2, 3}), X({}, B).vals({1})}, {S(), A(1), I(1)});
  ix("0-d mask with an array x[True, i]", {X({2, 3}, F64), X({}, B).vals({1}), IdxV({3}, {0, 1, 1})}, {A(1), A(2)});
  ix("0-d mask, slice, array x[True, :, i] (advanced axes first)", {X({2, 3}), X({}, B).vals({1}), IdxV({2}, {2, 0})},
     {A(1), S(), A(2)});
  ix("0-d mask after Ellipsis x[..., True]", {X({2, 3}), X({}, B).vals({1})}, {E, A(1)});
  ix("int then 0-d false mask x[1, False]", {X({2, 3}), X({}, B).vals({0})}, {I(1), A(1)});
  ix("0-d mask of a 0-d tensor", {X({}, F64), X({}, B).vals({1})}, {A(1)});

  auto tk = [&t](const std::string& label, std::vector<InputSpec> in, std::optional<int64_t> axis) {
    t.add("take", label, in, [axis](const In& x) { return loom::take(x[0], x[1], axis); }, "{\"axis\":" + jopt(axis) + "}");
  };
  tk("flattened with 2-d indices", {X({3, 4}), Idx({2, 3}, 0, 12)}, nullopt);
  tk("axis 1 repeated and negative", {X({3, 4}), IdxV({4}, {-1, 0, 0, 2})}, 1);
  tk("f64 axis 0 with a 0-d index", {X({3, 4}, F64), IdxV({}, {2})}, 0);
  tk("empty indices axis 0", {X({3, 4}), X({0}, I64)}, 0);
  tk("transposed input axis -1", {X({4, 3}).lay(T_), Idx({5}, -3, 3)}, -1);
  tk("int32 values", {X({2, 3}, I32), Idx({4}, 0, 3, I32)}, 1);

  auto ta = [&t](const std::string& label, std::vector<InputSpec> in, int64_t axis) {
    t.add("take_along_axis", label, in, [axis](const In& x) { return loom::take_along_axis(x[0], x[1], axis); },
          "{\"axis\":" + std::to_string(axis) + "}");
  };
  ta("axis 1 (3,4) idx (3,2) with negatives", {X({3, 4}), Idx({3, 2}, -4, 4)}, 1);
  ta("axis 0 idx (2,1) broadcast", {X({3, 4}), Idx({2, 1}, 0, 3)}, 0);
  ta("x broadcast (3,1) idx (2,4) axis 0", {X({3, 1}), Idx({2, 4}, 0, 3)}, 0);
  ta("f64 3-d axis -1 repeated", {X({2, 3, 4}, F64), Idx({2, 3, 6}, 0, 4)}, -1);
  ta("empty idx (3,0) axis 1", {X({3, 4}), X({3, 0}, I64)}, 1);
  ta("transposed input axis 0", {X({4, 3}).lay(T_), Idx({2, 3}, 0, 4)}, 0);

  auto sa = [&t](const std::string& label, std::vector<InputSpec> in, int64_t axis) {
    t.add("scatter_add", label, in, [axis](const In& x) { return loom::scatter_add(x[0], axis, x[1], x[2]); },
          "{\"axis\":" + std::to_string(axis) + "}");
  };
  sa("axis 0 repeated indices accumulate", {X({3, 4}), Idx({4, 4}, 0, 3), X({4, 4})}, 0);
  sa("axis 1 indices smaller than src", {X({3, 5}), Idx({2, 3}, 0, 5), X({3, 4})}, 1);
  sa("f64 3-d axis -1", {X({2, 3, 4}, F64), Idx({2, 3, 5}, 0, 4), X({2, 3, 5}, F64)}, -1);
  sa("empty indices", {X({3, 4}), X({0, 4}, I64), X({0, 4})}, 0);
  sa("transposed x, strided src", {X({4, 3}).lay(T_), Idx({2, 3}, 0, 4), X({2, 3}).lay(S_)}, 0);

  auto ip = [&t](const std::string& label, std::vector<InputSpec> in, std::vector<Ix> spec, int values, bool acc) {
    t.add("index_put", label, in,
          [spec, values, acc](const In& x) { return loom::index_put(x[0], build_index(spec, x), x.at(values), acc); },
          "{\"index\":" + index_json(spec) + ",\"values\":" + std::to_string(values) + ",\"accumulate\":" + jb(acc) + "}");
  };
  ip("repeated int array, accumulate", {X({3, 4}), IdxV({3}, {0, 2, 0}), X({3, 4})}, {A(1)}, 2, true);
  ip("boolean mask set from a 0-d value", {X({3, 4}), X({3, 4}, B), X({})}, {A(1)}, 2, false);
  ip("slice and array set x[:, i, 1:3] = v(2,1)", {X({3, 4, 5}), IdxV({2}, {2, 0}), X({2, 1})}, {S(), A(1), S(1, 3)}, 2, false);
  ip("f64 two arrays accumulate", {X({4, 3}, F64), IdxV({3}, {1, 1, 3}), IdxV({3}, {0, 0, 2}), X({3}, F64)}, {A(1), A(2)}, 3, true);
  ip("transposed x, int index set", {X({4, 3}).lay(T_), X({3}).lay(R_)}, {I(1)}, 1, false);
  ip("empty index array", {X({3, 4}), X({0}, I64), X({4})}, {A(1)}, 2, false);
  ip("negative-step slice set", {X({5}, F64), X({2}, F64)}, {S(nullopt, nullopt, -3)}, 1, false);
  ip("0-d true mask set x[True] = v(3,)", {X({2, 3}), X({}, B).vals({1}), X({3})}, {A(1)}, 2, false);
}


// ------------------------------------------------------------------ neural-network ops
std::string jpad(const std::vector<int64_t>& v, const std::string& mode) { return mode.empty() ? jl(v) : "\"" + mode + "\""; }

void nn_cases(Table& t) {
  // conv1d / conv2d: inputs x, weight[, bias]
  auto conv = [&t](const std::string& op, const std::string& label, std::vector<InputSpec> in, std::vector<int64_t> stride,
                   std::vector<int64_t> pad, std::string pad_mode, std::vector<int64_t> dil, int64_t groups) {
    const bool bias = in.size() == 3;
    const bool two_d = op == "conv2d";
    t.add(op, label, in, [=](const In& x) {
      ConvPadding p = pad_mode.empty() ? ConvPadding(pad) : ConvPadding(pad_mode);
      Tensor b = bias ? x[2] : Tensor();
      return two_d ? loom::conv2d(x[0], x[1], b, IntList(stride), p, IntList(dil), groups)
                   : loom::conv1d(x[0], x[1], b, IntList(stride), p, IntList(dil), groups);
    }, "{\"stride\":" + jl(stride) + ",\"padding\":" + jpad(pad, pad_mode) + ",\"dilation\":" + jl(dil) +
           ",\"groups\":" + std::to_string(groups) + "}");
  };
  conv("conv1d", "f32 (2,3,7) k3 with bias", {X({2, 3, 7}), X({4, 3, 3}), X({4})}, {1}, {0}, "", {1}, 1);
  conv("conv1d", "f64 stride 2 padding 1 dilation 2 groups 3", {X({1, 3, 9}, F64), X({6, 1, 3}, F64), X({6}, F64)}, {2}, {1}, "",
       {2}, 3);
  conv("conv1d", "f32 padding same, even kernel, no bias", {X({2, 2, 6}), X({3, 2, 4})}, {1}, {}, "same", {1}, 1);
  conv("conv1d", "f32 strided input view", {X({1, 2, 5}).lay(S_), X({2, 2, 2}).lay(T_)}, {1}, {1}, "", {1}, 1);
  conv("conv2d", "f32 (2,3,5,5) k3 pad 1 with bias", {X({2, 3, 5, 5}), X({4, 3, 3, 3}), X({4})}, {1, 1}, {1, 1}, "", {1, 1}, 1);
  conv("conv2d", "f64 groups 2 stride (2,1) pad (1,0) dilation (1,2)", {X({1, 4, 6, 5}, F64), X({4, 2, 3, 2}, F64), X({4}, F64)},
       {2, 1}, {1, 0}, "", {1, 2}, 2);
  conv("conv2d", "f32 padding same, even kernel, no bias", {X({1, 2, 5, 5}), X({3, 2, 2, 4})}, {1, 1}, {}, "same", {1, 1}, 1);
  conv("conv2d", "f32 transposed input view", {X({2, 2, 4, 3}).lay(T_), X({3, 2, 2, 2}), X({3})}, {1, 1}, {0, 0}, "", {1, 1}, 1);
  conv("conv2d", "f64 stride 2 valid", {X({2, 1, 6, 6}, F64), X({2, 1, 3, 3}, F64)}, {2, 2}, {}, "valid", {1, 1}, 1);

  auto convt = [&t](const std::string& label, std::vector<InputSpec> in, std::vector<int64_t> stride, std::vector<int64_t> pad,
                    std::vector<int64_t> opad, int64_t groups, std::vector<int64_t> dil) {
    const bool bias = in.size() == 3;
    t.add("conv2d_transpose", label, in, [=](const In& x) {
      return loom::conv2d_transpose(x[0], x[1], bias ? x[2] : Tensor(), IntList(stride), IntList(pad), IntList(opad), groups,
                                    IntList(dil));
    }, "{\"stride\":" + jl(stride) + ",\"padding\":" + jl(pad) + ",\"output_padding\":" + jl(opad) +
           ",\"groups\":" + std::to_string(groups) + ",\"dilation\":" + jl(dil) + "}");
  };
  convt("f32 stride 2 pad 1 output_padding 1 with bias", {X({2, 3, 4, 4}), X({3, 2, 3, 3}), X({2})}, {2, 2}, {1, 1}, {1, 1}, 1,
        {1, 1});
  convt("f64 groups 2 dilation 2 with bias", {X({1, 4, 3, 3}, F64), X({4, 1, 2, 2}, F64), X({2}, F64)}, {1, 1}, {0, 0}, {0, 0}, 2,
        {2, 2});
  convt("f32 no bias stride (1,2)", {X({1, 2, 3, 4}), X({2, 3, 2, 3})}, {1, 2}, {0, 1}, {0, 0}, 1, {1, 1});

  // pooling
  auto mp = [&t](const std::string& label, InputSpec x, std::vector<int64_t> k, std::vector<int64_t> stride,
                 std::vector<int64_t> pad, std::vector<int64_t> dil, bool ceil, bool gc = true) {
    t.add("max_pool2d", label, {x}, [=](const In& in) {
      return loom::max_pool2d(in[0], IntList(k), IntList(stride), IntList(pad), IntList(dil), ceil);
    }, "{\"kernel_size\":" + jl(k) + ",\"stride\":" + jl(stride) + ",\"padding\":" + jl(pad) + ",\"dilation\":" + jl(dil) +
           ",\"ceil_mode\":" + jb(ceil) + "}", gc);
  };
  const Domain D = Domain::Distinct;
  mp("f32 (2,3,6,6) k2", X({2, 3, 6, 6}).dom(D), {2, 2}, {}, {0, 0}, {1, 1}, false);
  mp("f64 k3 stride 2 pad 1", X({1, 2, 7, 7}, F64).dom(D), {3, 3}, {2, 2}, {1, 1}, {1, 1}, false);
  mp("f32 dilation 2 ceil_mode", X({1, 1, 7, 8}).dom(D), {2, 2}, {2, 2}, {0, 0}, {2, 2}, true);
  mp("f32 unbatched (3,5,5) k (2,3)", X({3, 5, 5}).dom(D), {2, 3}, {1, 2}, {0, 1}, {1, 1}, false);
  mp("f32 ties: first maximum gets the gradient", X({1, 1, 4, 4}).dom(Domain::Ties), {2, 2}, {}, {0, 0}, {1, 1}, false, false);
  mp("f32 transposed input view", X({2, 2, 4, 4}).dom(D).lay(T_), {2, 2}, {1, 1}, {0, 0}, {1, 1}, false);
  // float32 vector kernels: 2x2 rows of one full vector and a tail; the padded general kernel
  mp("f32 (2,2,9,42) k2: full vectors and tails", X({2, 2, 9, 42}).dom(D), {2, 2}, {}, {0, 0}, {1, 1}, false);
  mp("f32 (1,2,20,37) k3 stride 2 pad 1", X({1, 2, 20, 37}).dom(D), {3, 3}, {2, 2}, {1, 1}, {1, 1}, false);
  mp("f32 (1,1,9,35) k3 stride 3 pad 1 ceil_mode", X({1, 1, 9, 35}).dom(D), {3, 3}, {3, 3}, {1, 1}, {1, 1}, true);

  auto ap = [&t](const std::string& label, InputSpec x, std::vector<int64_t> k, std::vector<int64_t> stride,
                 std::vector<int64_t> pad, bool ceil, bool count_pad, int64_t div) {
    t.add("avg_pool2d", label, {x}, [=](const In& in) {
      return loom::avg_pool2d(in[0], IntList(k), IntList(stride), IntList(pad), ceil, count_pad, div);
    }, "{\"kernel_size\":" + jl(k) + ",\"stride\":" + jl(stride) + ",\"padding\":" + jl(pad) + ",\"ceil_mode\":" + jb(ceil) +
           ",\"count_include_pad\":" + jb(count_pad) + ",\"divisor_override\":" + std::to_string(div) + "}");
  };
  ap("f32 (2,3,6,6) k2", X({2, 3, 6, 6}), {2, 2}, {}, {0, 0}, false, true, 0);
  ap("f64 k3 stride 2 pad 1 count_include_pad", X({1, 2, 7, 7}, F64), {3, 3}, {2, 2}, {1, 1}, false, true, 0);
  ap("f32 k3 stride 2 pad 1 exclude pad, ceil_mode", X({1, 2, 6, 7}), {3, 3}, {2, 2}, {1, 1}, true, false, 0);
  ap("f32 divisor_override 3", X({1, 1, 4, 4}), {2, 2}, {}, {0, 0}, false, true, 3);
  ap("f32 unbatched (2,5,4) strided view", X({2, 5, 4}).lay(S_), {2, 2}, {1, 1}, {0, 0}, false, true, 0);
  // float32 on oneDNN, and the ceil_mode window past the padding that stays on Loom's loops
  ap("f32 (2,3,8,36) k2 (oneDNN)", X({2, 3, 8, 36}), {2, 2}, {}, {0, 0}, false, true, 0);
  ap("f32 (1,2,9,9) k3 stride 2 pad 1 count_include_pad (oneDNN)", X({1, 2, 9, 9}), {3, 3}, {2, 2}, {1, 1}, false, true, 0);
  ap("f32 (1,1,5,5) k2 ceil_mode count_include_pad", X({1, 1, 5, 5}), {2, 2}, {}, {0, 0}, true, true, 0);

  for (const char* op : {"global_avg_pool2d", "global_max_pool2d"}) {
    const bool avg = std::string(op) == "global_avg_pool2d";
    auto f = [avg](const In& in) { return avg ? loom::global_avg_pool2d(in[0]) : loom::global_max_pool2d(in[0]); };
    const Domain d = avg ? Domain::Normal : D;
    t.add(op, "f32 (2,3,4,5)", {X({2, 3, 4, 5}).dom(d)}, f);
    t.add(op, "f64 (1,2,3,3)", {X({1, 2, 3, 3}, F64).dom(d)}, f);
    t.add(op, "f32 transposed input view", {X({2, 3, 2, 4}).dom(d).lay(T_)}, f);
  }

  // batch_norm(x, running_mean, running_var, weight, bias): unused slots are 0-d placeholders
  auto bn = [&t](const std::string& label, std::vector<InputSpec> in, bool running, bool affine, bool training) {
    t.add("batch_norm", label, in, [=](const In& x) {
      const Tensor rm = running ? x[1] : Tensor(), rv = running ? x[2] : Tensor();
      const Tensor w = affine ? x[running ? 3 : 1] : Tensor(), b = affine ? x[running ? 4 : 2] : Tensor();
      // a copy of the running statistics: the case must not change its own inputs
      Tensor rmc = rm.defined() ? rm.copy() : rm, rvc = rv.defined() ? rv.copy() : rv;
      return loom::batch_norm(x[0], rmc, rvc, w, b, training, 0.1, 1e-5);
    }, "{\"running\":" + jb(running) + ",\"affine\":" + jb(affine) + ",\"training\":" + jb(training) +
           ",\"momentum\":0.1,\"eps\":1e-05}");
  };
  bn("f32 training (4,3) affine", {X({4, 3}), X({3}), X({3})}, false, true, true);
  bn("f64 training (2,3,4,4) affine", {X({2, 3, 4, 4}, F64), X({3}, F64), X({3}, F64)}, false, true, true);
  bn("f32 training with running stats, no affine", {X({3, 2, 5}), X({2}).nodiff(), X({2}).dom(Domain::Positive).nodiff()}, true,
     false, true);
  bn("f32 eval with running stats, affine", {X({2, 3, 5}), X({3}).nodiff(), X({3}).dom(Domain::Positive).nodiff(), X({3}), X({3})},
     true, true, false);
  bn("f32 training transposed input view", {X({4, 3, 2}).lay(T_), X({3}), X({3})}, false, true, true);

  // layer_norm(x, normalized_shape, weight, bias): inputs x, then weight and / or bias as given
  auto ln = [&t](const std::string& label, std::vector<InputSpec> in, Shape ns, bool has_w, bool has_b) {
    t.add("layer_norm", label, in, [=](const In& x) {
      return loom::layer_norm(x[0], ns, has_w ? x[1] : Tensor(), has_b ? x[has_w ? 2 : 1] : Tensor(), 1e-5);
    }, "{\"normalized_shape\":" + jl(ns) + ",\"eps\":1e-05,\"weight\":" + jb(has_w) + ",\"bias\":" + jb(has_b) + "}");
  };
  ln("f32 (2,3,4) over (4,) affine", {X({2, 3, 4}), X({4}), X({4})}, {4}, true, true);
  ln("f64 (2,3,4) over (3,4) affine", {X({2, 3, 4}, F64), X({3, 4}, F64), X({3, 4}, F64)}, {3, 4}, true, true);
  ln("f32 (5,6) no affine", {X({5, 6})}, {6}, false, false);
  ln("f32 transposed input view (4,3)", {X({4, 3}).lay(T_), X({3}), X({3})}, {3}, true, true);
  // the fused kernels: wide rows (full vectors, then a tail), rows far from 0 (the mean's
  // refinement; offsets where torch 1.13's own rounding stays inside the tolerance), weight or
  // bias alone, strided views, an empty batch
  ln("f32 (6,1000) affine", {X({6, 1000}), X({1000}), X({1000})}, {1000}, true, true);
  auto offset = [](double off, int64_t n) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = off + 2.0 * std::sin(0.7 * static_cast<double>(i) + 0.3 * static_cast<double>(i % 7));
    return v;
  };
  ln("f32 (4,300) rows at 30 + [-2, 2], affine", {X({4, 300}).vals(offset(30, 1200)), X({300}), X({300})}, {300}, true, true);
  ln("f64 (3,257) rows at 1000 + [-2, 2], weight only", {X({3, 257}, F64).vals(offset(1000, 771)), X({257}, F64)}, {257},
     true, false);
  ln("f64 (3,257) bias only", {X({3, 257}, F64), X({257}, F64)}, {257}, false, true);
  ln("f32 (2,3,40) over (3,40) strided view, affine", {X({2, 3, 40}).lay(S_), X({3, 40}), X({3, 40})}, {3, 40}, true, true);
  ln("f32 (5,33) reversed view, no affine", {X({5, 33}).lay(R_)}, {33}, false, false);
  ln("f32 empty batch (0,8) affine", {X({0, 8}), X({8}), X({8})}, {8}, true, true);

  // rms_norm(x, normalized_shape, weight): inputs x, then the weight when given
  auto rms = [&t](const std::string& label, std::vector<InputSpec> in, Shape ns, bool has_w, double eps) {
    t.add("rms_norm", label, in, [=](const In& x) { return loom::rms_norm(x[0], ns, has_w ? x[1] : Tensor(), eps); },
          "{\"normalized_shape\":" + jl(ns) + ",\"eps\":" + std::to_string(eps) + ",\"weight\":" + jb(has_w) + "}");
  };
  rms("f32 (2,3,8) over (8,) weight", {X({2, 3, 8}), X({8})}, {8}, true, 1e-6);
  rms("f64 (2,3,4) over (3,4) weight", {X({2, 3, 4}, F64), X({3, 4}, F64)}, {3, 4}, true, 1e-5);
  rms("f32 (5,6) no weight", {X({5, 6})}, {6}, false, 1e-6);
  rms("f32 transposed input view (4,3)", {X({4, 3}).lay(T_), X({3})}, {3}, true, 1e-6);
  rms("f32 empty batch (0,8)", {X({0, 8}), X({8})}, {8}, true, 1e-6);

  // rotary_embedding(x (..., T, D), offset, base, scaling): Llama's rotate-half pairs
  auto rope = [&t](const std::string& label, std::vector<InputSpec> in, int64_t offset, RotaryOptions o) {
    t.add("rotary_embedding", label, in, [=](const In& x) { return loom::rotary_embedding(x[0], offset, o); },
          "{\"offset\":" + std::to_string(offset) + ",\"base\":" + std::to_string(o.base) + ",\"linear_factor\":" +
              std::to_string(o.linear_factor) + ",\"llama3_factor\":" + std::to_string(o.llama3_factor) + ",\"low_freq_factor\":" +
              std::to_string(o.low_freq_factor) + ",\"high_freq_factor\":" + std::to_string(o.high_freq_factor) +
              ",\"original_max_positions\":" + std::to_string(o.original_max_positions) + "}");
  };
  rope("f32 (2,3,5,8) heads, positions 0..4", {X({2, 3, 5, 8})}, 0, {});
  rope("f64 (4,6) offset 7, base 500000", {X({4, 6}, F64)}, 7, {.base = 500000.0});
  rope("f32 (2,4,16) linear scaling 4, offset 100", {X({2, 4, 16})}, 100, {.linear_factor = 4.0});
  rope("f64 (3,64) Llama 3 scaling", {X({3, 64}, F64)}, 2000, {.base = 500000.0, .llama3_factor = 8.0, .original_max_positions = 64});
  rope("f32 (2,5,8) strided view", {X({2, 5, 8}).lay(S_)}, 3, {});

  // lstm_cell(gates (B, 4n), c (B, n)) -> [h2, c2]: batch 1, one unit, widths around the
  // vector lengths (tails), saturating gates, strided / transposed / reversed views, empty batch
  auto lc = [&t](const std::string& label, std::vector<InputSpec> in) {
    t.add("lstm_cell", label, in, [](const In& x) { return loom::lstm_cell(x[0], x[1]); });
  };
  lc("f32 (3,20) n=5", {X({3, 20}), X({3, 5})});
  lc("f64 (2,12) n=3", {X({2, 12}, F64), X({2, 3}, F64)});
  lc("f32 batch 1, one unit", {X({1, 4}), X({1, 1})});
  lc("f32 (5,148) n=37", {X({5, 148}), X({5, 37})});
  lc("f64 (3,68) n=17", {X({3, 68}, F64), X({3, 17}, F64)});
  lc("f32 wide gates (saturating)", {X({4, 36}).dom(Domain::Wide), X({4, 9})});
  lc("f32 transposed gates, strided c", {X({3, 8}).lay(T_), X({3, 2}).lay(S_)});
  lc("f64 reversed gates and c", {X({2, 12}, F64).lay(R_), X({2, 3}, F64).lay(R_)});
  lc("f32 gates only differentiable", {X({2, 8}), X({2, 2}).nodiff()});
  lc("f32 empty batch (0,8)", {X({0, 8}), X({0, 2})});

  auto dp = [&t](const std::string& label, InputSpec x, double p, bool training) {
    t.add("dropout", label, {x}, [=](const In& in) {
      Generator g(1234);  // the same mask on every call (finite differences need it)
      return loom::dropout(in[0], p, training, &g);
    }, "{\"p\":" + jd(p) + ",\"training\":" + jb(training) + "}");
  };
  dp("f32 eval is the identity", X({3, 4}), 0.5, false);
  dp("f32 training p=0 is the identity", X({3, 4}), 0.0, true);
  dp("f64 training p=1 gives zeros", X({3, 4}, F64), 1.0, true);
  dp("f32 training p=0.3: zeros or x / 0.7", X({6, 8}).dom(Domain::AwayFromZero), 0.3, true);

  // padding_idx: the row gets no gradient by convention (not the derivative): no gradcheck
  auto em = [&t](const std::string& label, std::vector<InputSpec> in, int64_t pad) {
    t.add("embedding", label, in, [=](const In& x) { return loom::embedding(x[0], x[1], pad); },
          "{\"padding_idx\":" + std::to_string(pad) + "}", pad < 0);
  };
  em("f32 (5,3) ids (2,4) repeated", {X({5, 3}), Idx({2, 4}, 0, 5)}, -1);
  em("f64 padding_idx 1 gets no gradient", {X({4, 2}, F64), IdxV({5}, {1, 0, 1, 3, 3})}, 1);
  em("f32 int32 0-d id", {X({4, 3}), IdxV({}, {2}, I32)}, -1);
  em("f32 empty ids", {X({4, 3}), X({0}, I64)}, -1);

  auto red = [](const std::string& r) {
    return r == "none" ? loom::Reduction::None : r == "sum" ? loom::Reduction::Sum : loom::Reduction::Mean;
  };
  // cross_entropy / nll_loss: x, target[, weight]
  for (const char* op : {"cross_entropy", "nll_loss"}) {
    const bool ce = std::string(op) == "cross_entropy";
    auto lc = [&t, op, ce, red](const std::string& label, std::vector<InputSpec> in, std::string reduction, int64_t ignore,
                                double smoothing, bool gc = true) {
      const bool weighted = in.size() == 3;
      t.add(op, label, in, [=](const In& x) {
        const Tensor w = weighted ? x[2] : Tensor();
        return ce ? loom::cross_entropy(x[0], x[1], w, red(reduction), ignore, smoothing)
                  : loom::nll_loss(x[0], x[1], w, red(reduction), ignore);
      }, "{\"reduction\":\"" + reduction + "\",\"ignore_index\":" + std::to_string(ignore) +
             (ce ? ",\"label_smoothing\":" + jd(smoothing) : std::string()) + "}", gc);
    };
    lc("f32 (4,5) mean", {X({4, 5}), Idx({4}, 0, 5)}, "mean", -100, 0.0);
    lc("f64 (4,5) sum with class weights", {X({4, 5}, F64), Idx({4}, 0, 5), X({5}, F64).dom(Domain::Positive).nodiff()}, "sum",
       -100, 0.0);
    lc("f32 (3,4) none", {X({3, 4}), Idx({3}, 0, 4)}, "none", -100, 0.0);
    lc("f32 ignore_index 2, weighted mean", {X({5, 3}), IdxV({5}, {2, 0, 2, 1, 0}), X({3}).dom(Domain::Positive).nodiff()}, "mean",
       2, 0.0);
    lc("f32 (2,4,3) spatial target (2,3)", {X({2, 4, 3}), Idx({2, 3}, 0, 4)}, "mean", -100, 0.0);
    lc("f32 transposed logits (4,3)", {X({4, 3}).lay(T_), Idx({4}, 0, 3)}, "mean", -100, 0.0);
    // every target ignored: the mean is NaN (0 / 0) and the gradient 0, as PyTorch
    lc("f64 every target ignored, mean", {X({3, 4}, F64), IdxV({3}, {-100, -100, -100})}, "mean", -100, 0.0, false);
    lc("f32 every target ignored, weighted mean", {X({3, 4}), IdxV({3}, {1, 1, 1}), X({4}).dom(Domain::Positive).nodiff()},
       "mean", 1, 0.0, false);
    if (ce) {
      lc("f32 label smoothing 0.1, weighted", {X({4, 5}), Idx({4}, 0, 5), X({5}).dom(Domain::Positive).nodiff()}, "mean", -100,
         0.1);
      lc("f64 every target ignored, label smoothing 0.1", {X({2, 3}, F64), IdxV({2}, {-100, -100})}, "mean", -100, 0.1, false);
      lc("f64 probability targets", {X({3, 4}, F64), X({3, 4}, F64).dom(Domain::Positive)}, "mean", -100, 0.0);
      lc("f32 probability targets, smoothing 0.2, sum", {X({3, 4}), X({3, 4}).dom(Domain::Positive)}, "sum", -100, 0.2);
    }
  }

  auto bce = [&t, red](const std::string& label, std::vector<InputSpec> in, std::string reduction, bool weight, bool pos) {
    t.add("binary_cross_entropy_with_logits", label, in, [=](const In& x) {
      const Tensor w = weight ? x[2] : Tensor(), pw = pos ? x[weight ? 3 : 2] : Tensor();
      return loom::binary_cross_entropy_with_logits(x[0], x[1], w, pw, red(reduction));
    }, "{\"reduction\":\"" + reduction + "\",\"weight\":" + jb(weight) + ",\"pos_weight\":" + jb(pos) + "}");
  };
  const Domain U = Domain::Unit;
  bce("f32 (3,4) mean", {X({3, 4}).dom(Domain::Wide), X({3, 4}).dom(U)}, "mean", false, false);
  bce("f64 weight and pos_weight, sum", {X({3, 4}, F64), X({3, 4}, F64).dom(U), X({4}, F64).dom(Domain::Positive),
                                         X({4}, F64).dom(Domain::Positive)}, "sum", true, true);
  bce("f32 pos_weight (4,), none", {X({2, 4}), X({2, 4}).dom(U), X({4}).dom(Domain::Positive)}, "none", false, true);
  bce("f32 0-d", {X({}), X({}).dom(U)}, "mean", false, false);

  auto sdpa = [&t](const std::string& label, std::vector<InputSpec> in, bool causal, std::optional<double> scale, bool gc = true,
                   bool gqa = false) {
    const bool mask = in.size() == 4;
    t.add("scaled_dot_product_attention", label, in, [=](const In& x) {
      return loom::scaled_dot_product_attention(x[0], x[1], x[2], mask ? x[3] : Tensor(), causal, scale, 0.0, gqa);
    }, "{\"is_causal\":" + jb(causal) + ",\"scale\":" + (scale ? jd(*scale) : "null") + ",\"enable_gqa\":" + jb(gqa) + "}", gc);
  };
  sdpa("f32 (2,3,4) (2,5,4) (2,5,6)", {X({2, 3, 4}), X({2, 5, 4}), X({2, 5, 6})}, false, nullopt);
  sdpa("f64 float mask (3,5), scale 0.5", {X({2, 3, 4}, F64), X({2, 5, 4}, F64), X({2, 5, 2}, F64), X({3, 5}, F64)}, false, 0.5);
  sdpa("f32 bool mask (3,4)", {X({1, 3, 2}), X({1, 4, 2}), X({1, 4, 3}),
                               X({3, 4}, B).vals({1, 0, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0})}, false, nullopt);
  sdpa("f32 causal (4,4)", {X({2, 4, 3}), X({2, 4, 3}), X({2, 4, 3})}, true, nullopt);
  sdpa("f64 broadcast batch (2,1,3,4) (3,5,4)", {X({2, 1, 3, 4}, F64), X({3, 5, 4}, F64), X({3, 5, 4}, F64)}, false, nullopt);
  sdpa("f32 transposed q view", {X({4, 3}).lay(T_), X({5, 3}), X({5, 2}).lay(S_)}, false, nullopt);
  // the fused kernel's tiles (64 x 64): several of them, partial ones, causal ones skipped, a
  // padding mask (N, 1, 1, S) masking whole tiles; grouped-query and multi-query heads
  sdpa("f32 causal (1,2,70,16) (1,2,90,16), tiles", {X({1, 2, 70, 16}), X({1, 2, 90, 16}), X({1, 2, 90, 8})}, true, nullopt, false);
  sdpa("f64 float mask (2,1,1,130), tiles", {X({2, 1, 5, 8}, F64), X({2, 1, 130, 8}, F64), X({2, 1, 130, 4}, F64), X({2, 1, 1, 130}, F64)},
       false, nullopt, false);
  // causal with L = S: the tiles on the diagonal run their products in bands (two whole tiles,
  // then one of 2 x 2), here with grouped-query heads
  sdpa("f32 gqa causal (1,4,130,32) on 2 heads, banded diagonal tiles", {X({1, 4, 130, 32}), X({1, 2, 130, 32}), X({1, 2, 130, 24})},
       true, nullopt, false, true);
  sdpa("f32 gqa 4 query heads on 2", {X({1, 4, 3, 8}), X({1, 2, 5, 8}), X({1, 2, 5, 6})}, false, nullopt, true, true);
  sdpa("f64 gqa causal, multi-query (1 kv head)", {X({2, 3, 4, 4}, F64), X({2, 1, 4, 4}, F64), X({2, 1, 4, 4}, F64)}, true, nullopt,
       true, true);
  // the fused kernel at the head sizes of GPT-2 and Llama (32 to 128), many heads, L != S both
  // ways, causal and masked, float32 and float64; under torch 2 (reference_pytorch2) these
  // replay through F.scaled_dot_product_attention itself
  sdpa("f32 head size 64, 4 heads, L 96 > S 80", {X({2, 4, 96, 64}), X({2, 4, 80, 64}), X({2, 4, 80, 64})}, false, nullopt, false);
  sdpa("f64 head size 128, causal, L 70 < S 150", {X({1, 2, 70, 128}, F64), X({1, 2, 150, 128}, F64), X({1, 2, 150, 128}, F64)}, true,
       nullopt, false);
  sdpa("f32 head size 128, causal, L 150 > S 100, 3 heads", {X({1, 3, 150, 128}), X({1, 3, 100, 128}), X({1, 3, 100, 128})}, true, nullopt,
       false);
  sdpa("f32 head size 32, Ev 48, 1 head, L 33, S 129", {X({3, 1, 33, 32}), X({3, 1, 129, 32}), X({3, 1, 129, 48})}, false, nullopt, false);
  {  // a bool (L, S) mask whose queries 3 and 66 (in the second query tile) see no key
    std::vector<double> keep(70 * 90);
    for (size_t i = 0; i < keep.size(); ++i) keep[i] = (i * 2654435761u >> 7) % 3 != 0;
    for (int64_t j = 0; j < 90; ++j) keep[3 * 90 + j] = keep[66 * 90 + j] = 0;
    sdpa("f32 bool mask (70, 90), two queries that see no key", {X({1, 2, 70, 32}), X({1, 2, 90, 32}), X({1, 2, 90, 32}), X({70, 90}, B).vals(keep)},
         false, nullopt, false);
  }
  {  // a float padding mask (N, 1, 1, S) of 0 and -inf: sequence 0 keeps its first 100 keys, sequence 1 none
    std::vector<double> pad(2 * 130, 0.0);
    for (int64_t j = 100; j < 260; ++j) pad[static_cast<size_t>(j)] = -INFINITY;
    sdpa("f64 float padding mask (2,1,1,130), 8 heads, head size 64, a sequence all padding",
         {X({2, 8, 40, 64}, F64), X({2, 8, 130, 64}, F64), X({2, 8, 130, 64}, F64), X({2, 1, 1, 130}, F64).vals(pad).nodiff()}, false, nullopt,
         false);
  }
  sdpa("f32 gqa causal, 8 query heads on 2, head size 64, L = S = 64", {X({2, 8, 64, 64}), X({2, 2, 64, 64}), X({2, 2, 64, 64})}, true,
       nullopt, false, true);
  sdpa("f64 gqa, 6 query heads on 3, head size 96, scale 0.1, L 65, S 127", {X({1, 6, 65, 96}, F64), X({1, 3, 127, 96}, F64),
                                                                             X({1, 3, 127, 96}, F64)},
       false, 0.1, false, true);
}

}  // namespace

// ------------------------------------------------------------------ input generation
uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::vector<double> gen_values(const InputSpec& s, int64_t n, std::mt19937_64& rng) {
  if (!s.values.empty()) {
    if (static_cast<int64_t>(s.values.size()) != n)
      throw std::logic_error("op_cases: explicit values do not fill shape " + shape_str(s.shape));
    return s.values;
  }
  std::vector<double> v(static_cast<size_t>(n));
  auto U = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto I = [&](int64_t lo, int64_t hi) { return static_cast<double>(std::uniform_int_distribution<int64_t>(lo, hi)(rng)); };
  if (s.domain == Domain::Distinct) {
    std::vector<int64_t> perm(static_cast<size_t>(n));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    const double off = U(0.01, 0.09);
    for (int64_t i = 0; i < n; ++i) v[i] = (static_cast<double>(perm[i]) - n / 2.0) * 0.1 + off;
    return v;
  }
  for (auto& x : v) {
    switch (s.domain) {
      case Domain::Normal: x = U(-2, 2); break;
      case Domain::Positive: x = U(0.5, 2.5); break;
      case Domain::AwayFromZero: x = U(0.5, 2) * (I(0, 1) ? 1 : -1); break;
      case Domain::Unit: x = U(-0.9, 0.9); break;
      case Domain::Wide: x = U(-6, 6); break;
      case Domain::Ties: x = I(-1, 1); break;
      case Domain::SmallInt: x = I(-5, 5); break;
      case Domain::NonzeroInt: x = I(1, 5) * (I(0, 1) ? 1 : -1); break;
      case Domain::Bool: x = I(0, 1); break;
      case Domain::Index: x = I(s.lo, s.hi - 1); break;
      case Domain::Distinct: break;
    }
  }
  return v;
}

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = [] {
    Table t;
    elementwise_cases(t);
    reduction_cases(t);
    linalg_cases(t);
    sparse_cases(t);
    linalg_decomposition_cases(t);
    manipulation_cases(t);
    indexing_cases(t);
    nn_cases(t);
    return t.cases;
  }();
  return cases;
}

std::vector<Tensor> make_inputs(const OpCase& c, uint64_t seed, bool to_float64) {
  NoGrad off;
  std::vector<Tensor> out;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const InputSpec& s = c.inputs[k];
    std::mt19937_64 rng(splitmix(seed * 1000003ULL + k));
    const int64_t nd = static_cast<int64_t>(s.shape.size());
    Layout layout = s.layout;
    if (nd == 0 || (layout == Layout::Transposed && nd < 2)) layout = Layout::Contiguous;
    Shape base = s.shape;
    if (layout == Layout::Transposed) std::reverse(base.begin(), base.end());
    if (layout == Layout::Strided) base.back() = base.back() * 2 + 1;
    const DType dt = to_float64 && is_floating(s.dtype) ? Float64 : s.dtype;
    Tensor b = astype(from_vector<double>(gen_values(s, shape_numel(base), rng), base), dt);
    Tensor v = b;
    switch (layout) {
      case Layout::Contiguous: break;
      case Layout::Transposed: v = transpose(b); break;
      case Layout::Strided: v = slice(b, -1, 1, std::nullopt, 2); break;
      case Layout::Reversed: v = slice(b, 0, std::nullopt, std::nullopt, -1); break;
    }
    if (v.shape() != s.shape) throw std::logic_error("op_cases: layout changed the shape of an input");
    v = v.detach();
    if (s.diff && is_floating(dt)) v.requires_grad_(true);
    out.push_back(v);
  }
  return out;
}

Tensor random_cotangent(const Shape& shape, DType dtype, uint64_t seed) {
  NoGrad off;
  std::mt19937_64 rng(splitmix(seed ^ 0xc0ffeeULL));
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (auto& x : v) x = u(rng);
  return astype(from_vector<double>(v, shape), dtype);
}

std::vector<std::string> ops_without_cases() {
  std::set<std::string> have;
  for (const auto& c : op_cases()) have.insert(c.op);
  std::vector<std::string> missing;
  for (const auto& op : op_registry())
    if (!have.count(op.name)) missing.push_back(op.name);
  return missing;
}

std::vector<std::string> differentiable_ops_without_grad_cases(bool gradcheck) {
  std::set<std::string> have;
  for (const auto& c : op_cases()) {
    if (gradcheck && !c.gradcheck) continue;
    for (const auto& s : c.inputs)
      if (s.diff && is_floating(s.dtype)) have.insert(c.op);
  }
  std::vector<std::string> missing;
  for (const auto& op : op_registry())
    if (op.differentiable && !have.count(op.name)) missing.push_back(op.name);
  return missing;
}

}  // namespace loom::reftest
