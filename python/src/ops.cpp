// The registry's elementwise, reduction, manipulation and indexing ops under their NumPy names
// (loom.exp, loom.sum, ...), and creation (zeros, arange, ...). Python scalars next to tensors
// follow Loom's weak-scalar promotion (Scalar::result_dtype_with).
#include <string>

#include "common.h"
#include "loom/core/error.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/indexing.h"
#include "loom/ops/linalg.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"

namespace loom::python {

Tensor binary(Tensor (*f)(const Tensor&, const Tensor&), nb::handle a, nb::handle b);  // tensor.cpp
Tensor operand_for(nb::handle obj, const Tensor& other);                               // tensor.cpp
void weak_scalar_operands(nb::handle a, nb::handle b, Tensor& ta, Tensor& tb);         // tensor.cpp

namespace {

using Unary = Tensor (*)(const Tensor&);
using Binary = Tensor (*)(const Tensor&, const Tensor&);

template <Unary F>
void def_unary(nb::module_& m, const char* name, const char* doc) {
  m.def(name, [](ArrayLike x) {
    const Tensor t = as_tensor(x);
    MaybeRelease release(elements_of(t));
    return F(t);
  }, nb::arg("x"), doc);
}

template <Binary F>
void def_binary(nb::module_& m, const char* name, const char* doc) {
  m.def(name, [](ArrayLike a, ArrayLike b) { return binary(F, a, b); }, nb::arg("x1"), nb::arg("x2"), doc);
}

// Reductions over axis=None (all), an int or a tuple, as NumPy's.
using Reduce = Tensor (*)(const Tensor&, const Axes&, bool);
template <Reduce F>
void def_reduce(nb::module_& m, const char* name, const char* doc) {
  m.def(name, [](ArrayLike x, AxesLike axis, bool keepdims) {
    const Tensor t = as_tensor(x);
    const Axes axes = to_axes(axis);
    MaybeRelease release(elements_of(t));
    return F(t, axes, keepdims);
  }, nb::arg("x"), nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, doc);
}

#define LOOM_UNARY(name) \
  Tensor name##_fn(const Tensor& x) { return loom::name(x); }
#define LOOM_BINARY(name) \
  Tensor name##_fn(const Tensor& a, const Tensor& b) { return loom::name(a, b); }
#define LOOM_REDUCE(name) \
  Tensor name##_fn(const Tensor& x, const Axes& axes, bool keepdims) { return loom::name(x, axes, keepdims); }

LOOM_BINARY(add) LOOM_BINARY(subtract) LOOM_BINARY(multiply) LOOM_BINARY(divide) LOOM_BINARY(power)
LOOM_BINARY(maximum) LOOM_BINARY(minimum) LOOM_BINARY(mod) LOOM_BINARY(floor_divide) LOOM_BINARY(equal)
LOOM_BINARY(not_equal) LOOM_BINARY(less) LOOM_BINARY(less_equal) LOOM_BINARY(greater) LOOM_BINARY(greater_equal)
LOOM_BINARY(logical_and) LOOM_BINARY(logical_or) LOOM_BINARY(logical_xor) LOOM_BINARY(matmul) LOOM_BINARY(dot)
LOOM_BINARY(outer) LOOM_BINARY(kron)
LOOM_UNARY(logical_not) LOOM_UNARY(abs) LOOM_UNARY(sign) LOOM_UNARY(negative) LOOM_UNARY(exp) LOOM_UNARY(log)
LOOM_UNARY(log1p) LOOM_UNARY(expm1) LOOM_UNARY(sqrt) LOOM_UNARY(rsqrt) LOOM_UNARY(square) LOOM_UNARY(sin)
LOOM_UNARY(cos) LOOM_UNARY(tanh) LOOM_UNARY(sigmoid) LOOM_UNARY(relu) LOOM_UNARY(erf) LOOM_UNARY(floor)
LOOM_UNARY(ceil) LOOM_UNARY(round) LOOM_UNARY(flatten) LOOM_UNARY(count_nonzero)
LOOM_REDUCE(sum) LOOM_REDUCE(mean) LOOM_REDUCE(prod) LOOM_REDUCE(max) LOOM_REDUCE(min) LOOM_REDUCE(logsumexp)
LOOM_REDUCE(all) LOOM_REDUCE(any)

// Runs f with the GIL released when the operands are large (MaybeRelease's rule).
template <class F>
Tensor released(int64_t elements, F&& f) {
  MaybeRelease release(elements);
  return f();
}

std::optional<Scalar> optional_scalar(nb::handle obj) {
  if (obj.is_none()) return std::nullopt;
  return to_scalar(obj);
}

std::vector<Tensor> tensors(nb::handle seq) {
  std::vector<Tensor> out;
  for (nb::handle item : seq) out.push_back(as_tensor(item));
  return out;
}

std::optional<DType> optional_dtype(nb::handle dtype) {
  if (dtype.is_none()) return std::nullopt;
  return to_dtype(dtype);
}

// The ops of one signature each, bound by def_binary, def_unary and def_reduce: NumPy's
// elementwise arithmetic, comparisons, logic and functions, and the reductions over axis.
void bind_elementwise_and_reductions(nb::module_& m) {
  def_binary<add_fn>(m, "add", "x1 + x2, elementwise, broadcasting and promoting as NumPy.");
  def_binary<subtract_fn>(m, "subtract", "x1 - x2, elementwise, broadcasting and promoting as NumPy.");
  def_binary<multiply_fn>(m, "multiply", "x1 * x2, elementwise, broadcasting and promoting as NumPy.");
  def_binary<divide_fn>(m, "divide", "x1 / x2, elementwise (true division: integers give float64), broadcasting as NumPy.");
  def_binary<power_fn>(m, "power", "x1 ** x2, elementwise, broadcasting and promoting as NumPy.");
  def_binary<maximum_fn>(m, "maximum", "The larger of x1 and x2, elementwise.");
  def_binary<minimum_fn>(m, "minimum", "The smaller of x1 and x2, elementwise.");
  def_binary<mod_fn>(m, "mod", "x1 % x2, elementwise, with the sign of x2 as NumPy's mod.");
  def_binary<floor_divide_fn>(m, "floor_divide", "x1 // x2, elementwise: the floor of the quotient.");
  def_binary<equal_fn>(m, "equal", "x1 == x2, elementwise: a bool tensor.");
  def_binary<not_equal_fn>(m, "not_equal", "x1 != x2, elementwise: a bool tensor.");
  def_binary<less_fn>(m, "less", "x1 < x2, elementwise: a bool tensor.");
  def_binary<less_equal_fn>(m, "less_equal", "x1 <= x2, elementwise: a bool tensor.");
  def_binary<greater_fn>(m, "greater", "x1 > x2, elementwise: a bool tensor.");
  def_binary<greater_equal_fn>(m, "greater_equal", "x1 >= x2, elementwise: a bool tensor.");
  def_binary<logical_and_fn>(m, "logical_and", "x1 and x2 (as truth values), elementwise: a bool tensor.");
  def_binary<logical_or_fn>(m, "logical_or", "x1 or x2 (as truth values), elementwise: a bool tensor.");
  def_binary<logical_xor_fn>(m, "logical_xor", "x1 xor x2 (as truth values), elementwise: a bool tensor.");
  def_binary<matmul_fn>(m, "matmul", "x1 @ x2: the matrix product, batched over leading axes as NumPy's matmul.");
  def_binary<dot_fn>(m, "dot", "NumPy's dot: the inner product of vectors, the matrix product of matrices.");
  def_binary<outer_fn>(m, "outer", "The outer product of two vectors (flattened first, as NumPy's).");
  def_binary<kron_fn>(m, "kron", "The Kronecker product of x1 and x2.");
  def_unary<logical_not_fn>(m, "logical_not", "not x (as a truth value), elementwise: a bool tensor.");
  def_unary<abs_fn>(m, "abs", "|x|, elementwise.");
  def_unary<sign_fn>(m, "sign", "-1, 0 or 1 by the sign of x, elementwise.");
  def_unary<negative_fn>(m, "negative", "-x, elementwise.");
  def_unary<exp_fn>(m, "exp", "e ** x, elementwise.");
  def_unary<log_fn>(m, "log", "The natural logarithm of x, elementwise.");
  def_unary<log1p_fn>(m, "log1p", "log(1 + x), elementwise, accurate near 0.");
  def_unary<expm1_fn>(m, "expm1", "exp(x) - 1, elementwise, accurate near 0.");
  def_unary<sqrt_fn>(m, "sqrt", "The square root of x, elementwise.");
  def_unary<rsqrt_fn>(m, "rsqrt", "1 / sqrt(x), elementwise.");
  def_unary<square_fn>(m, "square", "x * x, elementwise.");
  def_unary<sin_fn>(m, "sin", "The sine of x (radians), elementwise.");
  def_unary<cos_fn>(m, "cos", "The cosine of x (radians), elementwise.");
  def_unary<tanh_fn>(m, "tanh", "The hyperbolic tangent of x, elementwise.");
  def_unary<sigmoid_fn>(m, "sigmoid", "1 / (1 + exp(-x)), elementwise.");
  def_unary<relu_fn>(m, "relu", "max(x, 0), elementwise.");
  def_unary<erf_fn>(m, "erf", "The error function of x, elementwise.");
  def_unary<floor_fn>(m, "floor", "The largest integer not above x, elementwise.");
  def_unary<ceil_fn>(m, "ceil", "The smallest integer not below x, elementwise.");
  def_unary<round_fn>(m, "round", "x rounded to the nearest integer, halves to even (NumPy's round), elementwise.");
  def_unary<flatten_fn>(m, "flatten", "x as one axis: reshape(x, -1), a view where the strides allow.");
  def_unary<count_nonzero_fn>(m, "count_nonzero", "How many elements of x are not zero (a scalar tensor).");
  def_reduce<sum_fn>(m, "sum", "The sum over axis (None: every axis; an int or a tuple), keepdims as NumPy's.");
  def_reduce<mean_fn>(m, "mean", "The mean over axis (None: every axis; an int or a tuple), keepdims as NumPy's.");
  def_reduce<prod_fn>(m, "prod", "The product over axis (None: every axis; an int or a tuple), keepdims as NumPy's.");
  def_reduce<max_fn>(m, "max", "The largest element over axis (None: every axis; an int or a tuple), keepdims as NumPy's.");
  def_reduce<min_fn>(m, "min", "The smallest element over axis (None: every axis; an int or a tuple), keepdims as NumPy's.");
  def_reduce<logsumexp_fn>(m, "logsumexp", "log(sum(exp(x))) over axis, computed without overflow; keepdims as NumPy's.");
  def_reduce<all_fn>(m, "all", "Whether every element over axis is true (a bool tensor); keepdims as NumPy's.");
  def_reduce<any_fn>(m, "any", "Whether some element over axis is true (a bool tensor); keepdims as NumPy's.");
}

// Elementwise ops with arguments of their own (a condition, bounds, an activation's constants)
// and the dtype conversion.
void bind_elementwise_with_arguments(nb::module_& m) {
  m.def("where", [](ArrayLike condition, ArrayLike a, ArrayLike b) {
    const Tensor c = as_tensor(condition);
    Tensor ta, tb;
    weak_scalar_operands(a, b, ta, tb);
    MaybeRelease release(elements_of(c, ta, tb));
    return where(c, ta, tb);
  }, nb::arg("condition"), nb::arg("x"), nb::arg("y"), "Elementwise: x where condition holds, y elsewhere (broadcasting the three).");
  m.def("clip", [](ArrayLike x, ArrayLike lo, ArrayLike hi) {
    const Tensor t = as_tensor(x);
    MaybeRelease release(elements_of(t));
    return clip(t, optional_scalar(lo), optional_scalar(hi));
  }, nb::arg("x"), nb::arg("a_min") = nb::none(), nb::arg("a_max") = nb::none(), "x limited to [a_min, a_max] elementwise (None: no bound on that side).");
  m.def("leaky_relu", [](ArrayLike x, double slope) {
    const Tensor t = as_tensor(x);
    return released(elements_of(t), [&] { return leaky_relu(t, slope); });
  }, nb::arg("x"),
        nb::arg("negative_slope") = 0.01, "x where x > 0, negative_slope * x elsewhere (torch's leaky_relu).");
  m.def("elu", [](ArrayLike x, double alpha) {
    const Tensor t = as_tensor(x);
    return released(elements_of(t), [&] { return elu(t, alpha); });
  }, nb::arg("x"), nb::arg("alpha") = 1.0, "x where x > 0, alpha * (exp(x) - 1) elsewhere (torch's elu).");
  m.def("gelu", [](ArrayLike x, bool approximate) {
    const Tensor t = as_tensor(x);
    return released(elements_of(t), [&] { return gelu(t, approximate); });
  }, nb::arg("x"),
        nb::arg("approximate") = false, "approximate=True: the tanh approximation.");
  m.def("silu", [](ArrayLike x) {
    const Tensor t = as_tensor(x);
    return released(elements_of(t), [&] { return silu(t); });
  }, nb::arg("x"), "x * sigmoid(x).");
  m.def("softplus", [](ArrayLike x, double beta, double threshold) {
    const Tensor t = as_tensor(x);
    return released(elements_of(t), [&] { return softplus(t, beta, threshold); });
  },
        nb::arg("x"), nb::arg("beta") = 1.0, nb::arg("threshold") = 20.0, "log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold (torch's softplus).");
  m.def("astype", [](ArrayLike x, DTypeLike dtype) {
    const Tensor t = as_tensor(x);
    const DType d = to_dtype(dtype);
    MaybeRelease release(elements_of(t));
    return astype(t, d);
  }, nb::arg("x"), nb::arg("dtype"), "x converted to dtype (a new tensor).");
}

// Reductions with arguments of their own (ddof, one optional axis) and the softmaxes.
void bind_reductions_with_arguments(nb::module_& m) {
  m.def("var", [](ArrayLike x, AxesLike axis, int64_t ddof, bool keepdims) {
    const Tensor t = as_tensor(x);
    MaybeRelease release(elements_of(t));
    return var(t, to_axes(axis), ddof, keepdims);
  }, nb::arg("x"), nb::arg("axis") = nb::none(), nb::arg("ddof") = 0, nb::arg("keepdims") = false, "The variance over axis, dividing by n - ddof; keepdims as NumPy's.");
  m.def("std", [](ArrayLike x, AxesLike axis, int64_t ddof, bool keepdims) {
    const Tensor t = as_tensor(x);
    MaybeRelease release(elements_of(t));
    return loom::std(t, to_axes(axis), ddof, keepdims);
  }, nb::arg("x"), nb::arg("axis") = nb::none(), nb::arg("ddof") = 0, nb::arg("keepdims") = false, "The standard deviation over axis, dividing by n - ddof; keepdims as NumPy's.");
  m.def("argmax", [](ArrayLike x, std::optional<int64_t> axis, bool keepdims) {
    const Tensor t = as_tensor(x);
    return released(elements_of(t), [&] { return argmax(t, axis, keepdims); });
  },
        nb::arg("x"), nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, "The index of the largest element along axis (None: of the flattened x).");
  m.def("argmin", [](ArrayLike x, std::optional<int64_t> axis, bool keepdims) {
    const Tensor t = as_tensor(x);
    return released(elements_of(t), [&] { return argmin(t, axis, keepdims); });
  },
        nb::arg("x"), nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, "The index of the smallest element along axis (None: of the flattened x).");
  m.def("cumsum", [](ArrayLike x, std::optional<int64_t> axis) {
    const Tensor t = as_tensor(x);
    MaybeRelease release(elements_of(t));
    return axis ? cumsum(t, *axis) : cumsum(flatten(t), 0);  // NumPy: no axis, the flattened array
  }, nb::arg("x"), nb::arg("axis") = nb::none(), "The running sum along axis (None: of the flattened x).");
  m.def("softmax", [](ArrayLike x, int64_t axis) {
    const Tensor t = as_tensor(x);
    MaybeRelease release(elements_of(t));
    return softmax(t, axis);
  }, nb::arg("x"), nb::arg("axis") = -1, "exp(x) / sum(exp(x)) along axis, computed without overflow.");
  m.def("log_softmax", [](ArrayLike x, int64_t axis) {
    const Tensor t = as_tensor(x);
    MaybeRelease release(elements_of(t));
    return log_softmax(t, axis);
  }, nb::arg("x"), nb::arg("axis") = -1, "log(softmax(x)) along axis, computed without overflow.");
}

// Manipulation that gives another view of one tensor (views where NumPy's are views).
void bind_views(nb::module_& m) {
  m.def("reshape", [](ArrayLike x, ShapeLike shape) {
    const Tensor t = as_tensor(x);
    const Shape s = to_shape(shape);
    return released(elements_of(t), [&] { return reshape(t, s); });  // copies when no view fits
  }, nb::arg("x"),
        nb::arg("shape"), "x with a new shape of the same size (-1: inferred); a view where the strides allow, else a copy.");
  m.def("transpose", [](ArrayLike x, AxesLike axes) { return transpose(as_tensor(x), to_axes(axes)); }, nb::arg("x"),
        nb::arg("axes") = nb::none(), "x with its axes permuted (None: reversed), a view.");
  m.def("permute_dims", [](ArrayLike x, AxesLike axes) { return permute(as_tensor(x), to_axes(axes)); }, nb::arg("x"),
        nb::arg("axes"), "x with its axes in the order axes, a view (the array API's permute_dims).");
  m.def("swapaxes", [](ArrayLike x, int64_t a, int64_t b) { return swapaxes(as_tensor(x), a, b); }, nb::arg("x"),
        nb::arg("axis1"), nb::arg("axis2"), "x with axis1 and axis2 exchanged, a view.");
  m.def("moveaxis", [](ArrayLike x, int64_t s, int64_t d) { return moveaxis(as_tensor(x), s, d); }, nb::arg("x"),
        nb::arg("source"), nb::arg("destination"), "x with axis source moved to position destination, a view.");
  m.def("squeeze", [](ArrayLike x, AxesLike axis) { return squeeze(as_tensor(x), to_axes(axis)); }, nb::arg("x"),
        nb::arg("axis") = nb::none(), "x without its axes of size 1 (None: all of them), a view.");
  m.def("expand_dims", [](ArrayLike x, int64_t axis) { return expand_dims(as_tensor(x), axis); }, nb::arg("x"),
        nb::arg("axis"), "x with a new axis of size 1 at position axis, a view.");
  m.def("broadcast_to", [](ArrayLike x, ShapeLike shape) { return broadcast_to(as_tensor(x), to_shape(shape)); },
        nb::arg("x"), nb::arg("shape"), "x broadcast to shape (NumPy's rules), a view with zero strides.");
  m.def("slice", [](ArrayLike x, int64_t axis, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) {
    return slice(as_tensor(x), axis, start, stop, step);
  }, nb::arg("x"), nb::arg("axis"), nb::arg("start") = nb::none(), nb::arg("stop") = nb::none(), nb::arg("step") = 1,
        "x[start:stop:step] along one axis, a view.");
}

// Manipulation that joins, cuts, pads or repeats tensors.
void bind_joins_and_repeats(nb::module_& m) {
  m.def("concatenate", [](ArraySequence xs, int64_t axis) {
    const auto ts = tensors(xs);
    nb::gil_scoped_release release;
    return concatenate(ts, axis);
  }, nb::arg("arrays"), nb::arg("axis") = 0, "The tensors joined along an existing axis.");
  m.def("stack", [](ArraySequence xs, int64_t axis) {
    const auto ts = tensors(xs);
    nb::gil_scoped_release release;
    return stack(ts, axis);
  }, nb::arg("arrays"), nb::arg("axis") = 0, "The tensors, of one shape, joined along a new axis.");
  m.def("split", [](ArrayLike x, ShapeLike sections, int64_t axis) {
    const Tensor t = as_tensor(x);
    if (PyLong_Check(sections.ptr())) return split(t, nb::cast<int64_t>(sections), axis);
    return split(t, to_shape(sections), axis);
  }, nb::arg("x"), nb::arg("indices_or_sections"), nb::arg("axis") = 0, "x cut along axis into a list of views: into n equal parts (an int) or at the given indices.");
  m.def("unbind", [](ArrayLike x, int64_t axis) { return unbind(as_tensor(x), axis); }, nb::arg("x"), nb::arg("axis") = 0, "The slices of x along axis, as a list of views with that axis removed.");
  m.def("pad", [](ArrayLike x, nb::handle pad_width, ArrayLike constant_values) {
    const Tensor t = as_tensor(x);
    // NumPy's forms: n, (before, after), or one (before, after) per axis
    std::vector<std::pair<int64_t, int64_t>> widths;
    if (PyLong_Check(pad_width.ptr())) {
      widths.assign(static_cast<size_t>(t.ndim()), {nb::cast<int64_t>(pad_width), nb::cast<int64_t>(pad_width)});
    } else {
      const auto items = nb::cast<std::vector<nb::object>>(pad_width);
      const bool one_pair = items.size() == 2 && PyLong_Check(items[0].ptr());
      if (one_pair) {
        widths.assign(static_cast<size_t>(t.ndim()), {nb::cast<int64_t>(items[0]), nb::cast<int64_t>(items[1])});
      } else {
        for (const auto& item : items) {
          const Shape pair = to_shape(item);
          if (pair.size() != 2) throw ValueError("loom.pad: each axis's pad_width is (before, after), got " + std::to_string(pair.size()) + " numbers");
          widths.emplace_back(pair[0], pair[1]);
        }
      }
    }
    const Scalar value = to_scalar(constant_values);
    return released(elements_of(t), [&] { return pad(t, widths, value); });
  }, nb::arg("x"), nb::arg("pad_width"), nb::arg("constant_values") = 0, "x padded with constant_values: pad_width is n, (before, after), or one (before, after) per axis.");
  m.def("tile", [](ArrayLike x, ShapeLike reps) {
    const Tensor t = as_tensor(x);
    const Shape r = to_shape(reps);
    return released(elements_of(t), [&] { return tile(t, r); });
  }, nb::arg("x"), nb::arg("reps"), "x repeated reps times along each axis, as NumPy's tile.");
  m.def("repeat", [](ArrayLike x, int64_t repeats, std::optional<int64_t> axis) {
    const Tensor t = as_tensor(x);
    return released(elements_of(t), [&] { return repeat(t, repeats, axis); });
  },
        nb::arg("x"), nb::arg("repeats"), nb::arg("axis") = nb::none(), "Each element of x repeated repeats times along axis (None: of the flattened x).");
  m.def("flip", [](ArrayLike x, AxesLike axis) {
    const Tensor t = as_tensor(x);
    const Axes a = to_axes(axis);
    return released(elements_of(t), [&] { return flip(t, a); });
  }, nb::arg("x"),
        nb::arg("axis") = nb::none(), "x with the order of its elements reversed along axis (None: every axis).");
}

void bind_indexing(nb::module_& m) {
  m.def("index", [](ArrayLike x, nb::handle key) {
    const Tensor t = as_tensor(x);
    const auto k = to_index(key);
    return released(elements_of(t), [&] { return index(t, k); });
  }, nb::arg("x"), nb::arg("key"),
        "x[key] (basic indices give views, arrays and masks copies).");
  m.def("index_put", [](ArrayLike x, nb::handle key, ArrayLike values, bool accumulate) {
    const Tensor t = as_tensor(x);
    const auto k = to_index(key);
    const Tensor v = operand_for(values, t);
    return released(elements_of(t, v), [&] { return index_put(t, k, v, accumulate); });
  }, nb::arg("x"), nb::arg("key"), nb::arg("values"), nb::arg("accumulate") = false,
        "A copy of x with x[key] = values (or +=, accumulate=True), differentiable.");
  m.def("take", [](ArrayLike x, ArrayLike indices, std::optional<int64_t> axis) {
    const Tensor t = as_tensor(x), i = as_tensor(indices);
    return released(elements_of(t, i), [&] { return take(t, i, axis); });
  }, nb::arg("x"), nb::arg("indices"), nb::arg("axis") = nb::none(), "The elements of x at indices along axis (None: of the flattened x), as NumPy's take.");
  m.def("take_along_axis", [](ArrayLike x, ArrayLike indices, int64_t axis) {
    const Tensor t = as_tensor(x), i = as_tensor(indices);
    return released(elements_of(t, i), [&] { return take_along_axis(t, i, axis); });
  }, nb::arg("x"), nb::arg("indices"), nb::arg("axis"), "The elements of x at indices along axis, indices broadcasting with x (NumPy's take_along_axis).");
  m.def("scatter_add", [](ArrayLike x, int64_t axis, ArrayLike indices, ArrayLike src) {
    const Tensor t = as_tensor(x), i = as_tensor(indices), v = as_tensor(src);
    return released(elements_of(t, i, v), [&] { return scatter_add(t, axis, i, v); });
  }, nb::arg("x"), nb::arg("axis"), nb::arg("indices"), nb::arg("src"), "A copy of x where src is added at indices along axis (torch's scatter_add).");
  m.def("nonzero", [](ArrayLike x) -> nb::typed<nb::tuple, Tensor, nb::ellipsis> {
    nb::list out;
    for (auto& t : nonzero(as_tensor(x))) out.append(nb::cast(t));
    return nb::tuple(out);
  }, nb::arg("x"), "The indices of the non-zero elements: a tuple of one index tensor per axis, as NumPy's.");
}

// Linear algebra at the top level, as NumPy's (loom.linalg is linalg_random_autograd.cpp's).
void bind_top_level_linear_algebra(nb::module_& m) {
  m.def("tensordot", [](ArrayLike a, ArrayLike b, AxesLike axes) {
    const Tensor ta = as_tensor(a), tb = as_tensor(b);
    if (PyLong_Check(axes.ptr())) {
      const int64_t n = nb::cast<int64_t>(axes);
      nb::gil_scoped_release release;
      return tensordot(ta, tb, n);
    }
    const auto pair = nb::cast<std::vector<nb::object>>(axes);  // NumPy's (axes_a, axes_b)
    if (pair.size() != 2) throw ValueError("loom.tensordot: axes is an int or a pair (axes_a, axes_b), got " + std::to_string(pair.size()) + " items");
    const Axes axes_a = to_axes(pair[0]), axes_b = to_axes(pair[1]);
    nb::gil_scoped_release release;
    return tensordot(ta, tb, axes_a, axes_b);
  }, nb::arg("a"), nb::arg("b"), nb::arg("axes") = 2, "The sum of products over axes: an int n (the last n of a with the first n of b) or a pair (axes_a, axes_b).");
  m.def("einsum", [](const std::string& subscripts, nb::args operands) {
    const auto ts = tensors(operands);
    nb::gil_scoped_release release;
    return einsum(subscripts, ts);
  }, nb::arg("subscripts"), nb::arg("operands"), "Einstein summation over the operands, in NumPy's subscripts notation (\"ij,jk->ik\").");
  m.def("linear", [](ArrayLike x, ArrayLike w, ArrayLike bias) {
    const Tensor tx = as_tensor(x), tw = as_tensor(w);
    if (bias.is_none()) {
      nb::gil_scoped_release release;
      return matmul(tx, tw);
    }
    const Tensor tb = as_tensor(bias);
    nb::gil_scoped_release release;
    return linear(tx, tw, tb);
  }, nb::arg("x"), nb::arg("weight"), nb::arg("bias") = nb::none(),
        "x @ weight + bias, weight shaped (in, out) as a Linear layer's (torch's linear takes it transposed); "
        "without a bias, x @ weight.");
}

void bind_creation(nb::module_& m) {
  m.def("zeros", [](ShapeLike shape, DTypeLike dtype) { return zeros(to_shape(shape), optional_dtype(dtype).value_or(Float32)); },
        nb::arg("shape"), nb::arg("dtype") = nb::none(), "A new tensor of shape filled with 0 (dtype: float32 unless given).");
  m.def("ones", [](ShapeLike shape, DTypeLike dtype) { return ones(to_shape(shape), optional_dtype(dtype).value_or(Float32)); },
        nb::arg("shape"), nb::arg("dtype") = nb::none(), "A new tensor of shape filled with 1 (dtype: float32 unless given).");
  m.def("empty", [](ShapeLike shape, DTypeLike dtype) { return empty(to_shape(shape), optional_dtype(dtype).value_or(Float32)); },
        nb::arg("shape"), nb::arg("dtype") = nb::none(), "A new tensor of shape whose values are not set (dtype: float32 unless given).");
  m.def("full", [](ShapeLike shape, ArrayLike value, DTypeLike dtype) {
    const Scalar s = to_scalar(value);
    return full(to_shape(shape), s, optional_dtype(dtype).value_or(s.natural_dtype()));
  }, nb::arg("shape"), nb::arg("fill_value"), nb::arg("dtype") = nb::none(), "A new tensor of shape filled with fill_value (dtype: that of the value unless given).");
  m.def("zeros_like", [](ArrayLike x) { return zeros_like(as_tensor(x)); }, nb::arg("x"), "A new tensor of x's shape and dtype filled with 0.");
  m.def("ones_like", [](ArrayLike x) { return ones_like(as_tensor(x)); }, nb::arg("x"), "A new tensor of x's shape and dtype filled with 1.");
  m.def("full_like", [](ArrayLike x, ArrayLike value) { return full_like(as_tensor(x), to_scalar(value)); }, nb::arg("x"),
        nb::arg("fill_value"), "A new tensor of x's shape and dtype filled with fill_value.");
  m.def("arange", [](Number start, Number stop, Number step, DTypeLike dtype) {
    // NumPy's forms: arange(stop), arange(start, stop[, step]); integers give int64
    const bool ints = PyLong_Check(start.ptr()) && (stop.is_none() || PyLong_Check(stop.ptr())) && PyLong_Check(step.ptr());
    const double lo = stop.is_none() ? 0.0 : nb::cast<double>(start);
    const double hi = stop.is_none() ? nb::cast<double>(start) : nb::cast<double>(stop);
    return arange(lo, hi, nb::cast<double>(step), optional_dtype(dtype).value_or(ints ? Int64 : Float32));
  }, nb::arg("start"), nb::arg("stop") = nb::none(), nb::arg("step") = 1, nb::arg("dtype") = nb::none(), "Evenly spaced values in [start, stop) by step: arange(stop) or arange(start, stop, step); integers give int64, else float32.");
  m.def("linspace", [](double start, double stop, int64_t num, bool endpoint, DTypeLike dtype) {
    return linspace(start, stop, num, endpoint, optional_dtype(dtype).value_or(Float32));
  }, nb::arg("start"), nb::arg("stop"), nb::arg("num") = 50, nb::arg("endpoint") = true, nb::arg("dtype") = nb::none(), "num evenly spaced values from start to stop (stop included unless endpoint=False).");
  m.def("eye", [](int64_t n, std::optional<int64_t> mm, int64_t k, DTypeLike dtype) {
    return eye(n, mm, k, optional_dtype(dtype).value_or(Float32));
  }, nb::arg("N"), nb::arg("M") = nb::none(), nb::arg("k") = 0, nb::arg("dtype") = nb::none(), "An N x M matrix (M: N when None) with ones on diagonal k and zeros elsewhere.");
  m.def("allclose", [](ArrayLike a, ArrayLike b, double rtol, double atol, bool equal_nan) {
    return allclose(as_tensor(a), as_tensor(b), rtol, atol, equal_nan);
  }, nb::arg("a"), nb::arg("b"), nb::arg("rtol") = 1e-5, nb::arg("atol") = 1e-8, nb::arg("equal_nan") = false, "Whether |a - b| <= atol + rtol * |b| everywhere (NaNs equal with equal_nan=True).");
  m.def("array_equal", [](ArrayLike a, ArrayLike b) { return array_equal(as_tensor(a), as_tensor(b)); }, nb::arg("a1"),
        nb::arg("a2"), "Whether a1 and a2 have one shape and equal elements.");
}

}  // namespace

// The groups in a fixed order: the module's namespace, and so its stubs (scripts/python_stubs.sh),
// list the names in the order they are defined.
void bind_ops(nb::module_& m) {
  bind_elementwise_and_reductions(m);
  bind_elementwise_with_arguments(m);
  bind_reductions_with_arguments(m);
  bind_views(m);
  bind_joins_and_repeats(m);
  bind_indexing(m);
  bind_top_level_linear_algebra(m);
  bind_creation(m);
}

}  // namespace loom::python
