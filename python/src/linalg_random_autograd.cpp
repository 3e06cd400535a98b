// loom.linalg (NumPy's names), loom.random (a Generator per stream, NumPy's default_rng
// style, and the process-wide one) and the functional gradient.
#include <string>

#include "common.h"
#include "loom/autograd/autograd.h"
#include "loom/core/error.h"
#include "loom/ops/linalg.h"
#include "loom/ops/random.h"

namespace loom::python {

namespace {

template <class F>
Tensor released(const Tensor& a, F&& f) {
  MaybeRelease release(elements_of(a));
  return f();
}

Shape size_of(nb::handle size) { return size.is_none() ? Shape{} : to_shape(size); }
DType dtype_or(nb::handle dtype, DType fallback) { return dtype.is_none() ? fallback : to_dtype(dtype); }

// loom.linalg's norms and decompositions (la: the submodule).
void bind_linalg_decompositions(nb::module_& la) {
  la.def("norm", [](ArrayLike x, OrdArg ord, AxesLike axis, bool keepdims) {
    const Tensor t = as_tensor(x);
    const std::optional<Axes> axes = axis.is_none() ? std::nullopt : std::optional<Axes>(to_axes(axis));
    if (nb::isinstance<nb::str>(ord)) {
      const std::string o = nb::cast<std::string>(ord);
      return released(t, [&] { return linalg::norm(t, o, axes, keepdims); });
    }
    const std::optional<double> o = ord.is_none() ? std::nullopt : std::optional<double>(nb::cast<double>(ord));
    return released(t, [&] { return linalg::norm(t, o, axes, keepdims); });
  }, nb::arg("x"), nb::arg("ord") = nb::none(), nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, "The vector or matrix norm of x (torch.linalg.norm's rules): vector norms (one axis, or a 1-d x) with ord = p, inf, -inf or 0; matrix norms (two axes) with ord = 1, -1, 2, -2, inf, -inf, \"fro\" or \"nuc\"; no ord and no axis: the 2-norm of the flattened x.");
  la.def("svd", [](ArrayLike a, bool full_matrices) -> TupleOf<Tensor, Tensor, Tensor> {
    const Tensor t = as_tensor(a);
    linalg::SVD r;
    {
      nb::gil_scoped_release release;
      r = linalg::svd(t, full_matrices);
    }
    return nb::make_tuple(r.U, r.S, r.Vh);
  }, nb::arg("a"), nb::arg("full_matrices") = true, "(U, S, Vh) with a = U @ diag(S) @ Vh.");
  la.def("svdvals", [](ArrayLike a) {
    const Tensor t = as_tensor(a);
    nb::gil_scoped_release release;
    return linalg::svdvals(t);
  }, nb::arg("a"), "The singular values of a, descending.");
  la.def("qr", [](ArrayLike a) -> TupleOf<Tensor, Tensor> {
    const Tensor t = as_tensor(a);
    linalg::QR r;
    {
      nb::gil_scoped_release release;
      r = linalg::qr(t);
    }
    return nb::make_tuple(r.Q, r.R);
  }, nb::arg("a"), "(Q, R), reduced.");
  la.def("eigh", [](ArrayLike a, const std::string& uplo) -> TupleOf<Tensor, Tensor> {
    const Tensor t = as_tensor(a);
    linalg::Eigh r;
    {
      nb::gil_scoped_release release;
      r = linalg::eigh(t, uplo);
    }
    return nb::make_tuple(r.eigenvalues, r.eigenvectors);
  }, nb::arg("a"), nb::arg("UPLO") = "L", "(eigenvalues ascending, eigenvectors).");
  la.def("eigvalsh", [](ArrayLike a, const std::string& uplo) {
    const Tensor t = as_tensor(a);
    nb::gil_scoped_release release;
    return linalg::eigvalsh(t, uplo);
  }, nb::arg("a"), nb::arg("UPLO") = "L", "The eigenvalues of the symmetric matrix a, ascending (UPLO: the triangle read).");
  la.def("cholesky", [](ArrayLike a, bool upper) {
    const Tensor t = as_tensor(a);
    nb::gil_scoped_release release;
    return linalg::cholesky(t, upper);
  }, nb::arg("a"), nb::arg("upper") = false, "The Cholesky factor of the symmetric positive-definite a: lower L with a = L @ L.T, or upper U with a = U.T @ U (upper=True).");
}

// loom.linalg's solves, inverse, determinants and product.
void bind_linalg_solves(nb::module_& la) {
  la.def("solve", [](ArrayLike a, ArrayLike b) {
    const Tensor ta = as_tensor(a), tb = as_tensor(b);
    nb::gil_scoped_release release;
    return linalg::solve(ta, tb);
  }, nb::arg("a"), nb::arg("b"), "x with a @ x = b, for square non-singular a (LinAlgError otherwise).");
  la.def("inv", [](ArrayLike a) {
    const Tensor t = as_tensor(a);
    nb::gil_scoped_release release;
    return linalg::inv(t);
  }, nb::arg("a"), "The inverse of the square non-singular a (LinAlgError otherwise).");
  la.def("det", [](ArrayLike a) {
    const Tensor t = as_tensor(a);
    nb::gil_scoped_release release;
    return linalg::det(t);
  }, nb::arg("a"), "The determinant of a (batched over leading axes).");
  la.def("slogdet", [](ArrayLike a) -> TupleOf<Tensor, Tensor> {
    const Tensor t = as_tensor(a);
    linalg::SlogDet r;
    {
      nb::gil_scoped_release release;
      r = linalg::slogdet(t);
    }
    return nb::make_tuple(r.sign, r.logabsdet);
  }, nb::arg("a"), "(sign, logabsdet).");
  la.def("lstsq", [](ArrayLike a, ArrayLike b, std::optional<double> rcond) {
    const Tensor ta = as_tensor(a), tb = as_tensor(b);
    nb::gil_scoped_release release;
    return linalg::lstsq(ta, tb, rcond);
  }, nb::arg("a"), nb::arg("b"), nb::arg("rcond") = nb::none(),
         "The minimum-norm least-squares solution x alone (NumPy returns (x, residuals, rank, s)).");
  la.def("matmul", [](ArrayLike a, ArrayLike b) {
    const Tensor ta = as_tensor(a), tb = as_tensor(b);
    nb::gil_scoped_release release;
    return matmul(ta, tb);
  }, nb::arg("x1"), nb::arg("x2"), "x1 @ x2 (numpy.linalg.matmul).");
}

void bind_random(nb::module_& m) {
  nb::module_ rnd = m.def_submodule("random", "Random tensors: loom.random.Generator streams and the process-wide one.");
  nb::class_<Generator>(rnd, "Generator", "A counter-based stream: the same seed draws the same values at any thread count.")
      .def(nb::init<uint64_t>(), nb::arg("seed") = 0)
      .def_prop_ro("seed", &Generator::seed, "The seed the generator was made with.")
      .def_prop_ro("counter", &Generator::counter, "How many draws the generator has made: with the seed, its state.")
      .def("set_state", &Generator::set_state, nb::arg("seed"), nb::arg("counter"), "Puts the generator at (seed, counter), as saved from its seed and counter properties.");
  // Each draw takes generator=None (the process-wide stream) or a loom.random.Generator.
  auto gen = [](GeneratorArg g) -> Generator* { return g.is_none() ? nullptr : &nb::cast<Generator&>(g); };
  rnd.def("seed", &manual_seed, nb::arg("seed"), "Resets the process-wide stream.");
  rnd.def("default_rng", [](uint64_t seed) { return Generator(seed); }, nb::arg("seed") = 0, "A new Generator(seed), as numpy.random.default_rng.");
  rnd.def("uniform", [gen](double low, double high, ShapeLike size, DTypeLike dtype, GeneratorArg g) {
    return uniform(size_of(size), low, high, dtype_or(dtype, Float32), default_device(), gen(g));
  }, nb::arg("low") = 0.0, nb::arg("high") = 1.0, nb::arg("size") = nb::none(), nb::arg("dtype") = nb::none(),
          nb::arg("generator") = nb::none(), "Values drawn uniformly from [low, high) of shape size (None: one value), float32 unless dtype says.");
  rnd.def("random", [gen](ShapeLike size, DTypeLike dtype, GeneratorArg g) {
    return uniform(size_of(size), 0.0, 1.0, dtype_or(dtype, Float32), default_device(), gen(g));
  }, nb::arg("size") = nb::none(), nb::arg("dtype") = nb::none(), nb::arg("generator") = nb::none(), "Values drawn uniformly from [0, 1) of shape size (None: one value).");
  rnd.def("normal", [gen](double loc, double scale, ShapeLike size, DTypeLike dtype, GeneratorArg g) {
    return normal(size_of(size), loc, scale, dtype_or(dtype, Float32), default_device(), gen(g));
  }, nb::arg("loc") = 0.0, nb::arg("scale") = 1.0, nb::arg("size") = nb::none(), nb::arg("dtype") = nb::none(),
          nb::arg("generator") = nb::none(), "Values drawn from the normal distribution N(loc, scale**2) of shape size (None: one value).");
  rnd.def("standard_normal", [gen](ShapeLike size, DTypeLike dtype, GeneratorArg g) {
    return randn(size_of(size), dtype_or(dtype, Float32), default_device(), gen(g));
  }, nb::arg("size") = nb::none(), nb::arg("dtype") = nb::none(), nb::arg("generator") = nb::none(), "Values drawn from N(0, 1) of shape size (None: one value).");
  rnd.def("integers", [gen](int64_t low, std::optional<int64_t> high, ShapeLike size, DTypeLike dtype, GeneratorArg g) {
    const int64_t lo = high ? low : 0, hi = high ? *high : low;  // NumPy: integers(high) draws from [0, high)
    return randint(lo, hi, size_of(size), dtype_or(dtype, Int64), default_device(), gen(g));
  }, nb::arg("low"), nb::arg("high") = nb::none(), nb::arg("size") = nb::none(), nb::arg("dtype") = nb::none(),
          nb::arg("generator") = nb::none(), "Integers in [low, high).");
  rnd.def("bernoulli", [gen](double p, ShapeLike size, DTypeLike dtype, GeneratorArg g) {
    return bernoulli(size_of(size), p, dtype_or(dtype, Float32), default_device(), gen(g));
  }, nb::arg("p"), nb::arg("size") = nb::none(), nb::arg("dtype") = nb::none(), nb::arg("generator") = nb::none(), "1 with probability p, 0 otherwise, of shape size (None: one value).");
  rnd.def("permutation", [gen](int64_t n, GeneratorArg g) { return permutation(n, default_device(), gen(g)); }, nb::arg("n"),
          nb::arg("generator") = nb::none(), "The integers 0..n-1 in a random order.");
}

// loom.grad's core (python/loom/__init__.py adds the form that takes a function): the
// gradients of output with respect to inputs, returned, not accumulated.
void bind_grad(nb::module_& m) {
  m.def("_grad", [](const Tensor& output, const std::vector<Tensor>& inputs, ArrayLike seed) {
    const Tensor s = seed.is_none() ? Tensor() : as_tensor(seed);
    nb::gil_scoped_release release;  // a backward pass runs no Python code
    return grad(output, inputs, s);
  }, nb::arg("output"), nb::arg("inputs"), nb::arg("grad_output") = nb::none());
}

}  // namespace

// The groups in a fixed order: the module's namespace, and so its stubs (scripts/python_stubs.sh),
// list the names in the order they are defined.
void bind_linalg_random_autograd(nb::module_& m) {
  nb::module_ la = m.def_submodule("linalg", "NumPy's linalg: decompositions and solves, differentiable.");
  bind_linalg_decompositions(la);
  bind_linalg_solves(la);
  bind_random(m);
  bind_grad(m);
}

}  // namespace loom::python
