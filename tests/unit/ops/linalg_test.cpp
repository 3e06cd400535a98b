// loom::linalg: reconstructions, batches (empty too), layouts, dtypes and the errors. Values and
// gradients against PyTorch are in tests/reference/op_cases.cpp; this file asks what PyTorch
// cannot answer for Loom (messages, error types, memory of einsum's contraction order).
#include <gtest/gtest.h>
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/memory.h>
#include <loom/core/node.h>
#include <loom/core/parallel.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/linalg.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

#include <cmath>

#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;

namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return max(abs(subtract(astype(a, Float64), astype(b, Float64)))).item<double>();
}
Tensor mT(const Tensor& x) { return swapaxes(x, -1, -2); }
Tensor spd(const Tensor& x) {  // x x^T + n I
  const int64_t n = x.shape()[x.ndim() - 2];
  return add(matmul(x, mT(x)), eye(n, std::nullopt, 0, x.dtype()) * static_cast<double>(n));
}

TEST(Linalg, ReconstructionsBatchedAndTransposed) {
  manual_seed(3);
  for (DType dt : {Float32, Float64}) {
    const double tol = dt == Float32 ? 1e-4 : 1e-11;
    Tensor a = mT(randn({3, 5, 4}, dt));  // (3, 4, 5), non-contiguous
    auto s = linalg::svd(a, false);
    EXPECT_EQ(s.U.shape(), (Shape{3, 4, 4}));
    EXPECT_EQ(s.Vh.shape(), (Shape{3, 4, 5}));
    EXPECT_LT(max_abs_diff(matmul(multiply(s.U, expand_dims(s.S, -2)), s.Vh), a), tol);
    auto f = linalg::svd(a, true);
    EXPECT_EQ(f.Vh.shape(), (Shape{3, 5, 5}));
    EXPECT_LT(max_abs_diff(matmul(f.Vh, mT(f.Vh)), eye(5, std::nullopt, 0, dt)), tol);
    auto q = linalg::qr(a);
    EXPECT_LT(max_abs_diff(matmul(q.Q, q.R), a), tol);
    EXPECT_LT(max_abs_diff(matmul(mT(q.Q), q.Q), eye(4, std::nullopt, 0, dt)), tol);
    Tensor p = spd(a);
    auto e = linalg::eigh(p);
    EXPECT_LT(max_abs_diff(matmul(multiply(e.eigenvectors, expand_dims(e.eigenvalues, -2)), mT(e.eigenvectors)), p), 1e2 * tol);
    Tensor L = linalg::cholesky(p);
    EXPECT_LT(max_abs_diff(matmul(L, mT(L)), p), 1e2 * tol);
    EXPECT_EQ(max_abs_diff(L, linalg::cholesky(p, true).astype(dt).transpose({0, 2, 1})), 0.0);
    EXPECT_LT(max_abs_diff(matmul(p, linalg::inv(p)), eye(4, std::nullopt, 0, dt)), 1e2 * tol);
    Tensor b = randn({3, 4, 2}, dt);
    EXPECT_LT(max_abs_diff(matmul(p, linalg::solve(p, b)), b), 1e2 * tol);
    // det = product of the eigenvalues; slogdet agrees
    Tensor d = linalg::det(p);
    EXPECT_LT(max_abs_diff(divide(d, prod(e.eigenvalues, {-1})), ones({3}, dt)), 1e2 * tol);
    auto sl = linalg::slogdet(p);
    EXPECT_LT(max_abs_diff(multiply(sl.sign, exp(sl.logabsdet)), d), 1e-3 * max(abs(d)).item<double>());
    // lstsq: the normal equations hold
    Tensor A = randn({6, 3}, dt), B = randn({6, 2}, dt);
    Tensor x = linalg::lstsq(A, B);
    EXPECT_LT(max_abs_diff(matmul(mT(A), subtract(matmul(A, x), B)), zeros({3, 2}, dt)), 1e2 * tol);
  }
}

TEST(Linalg, LargeBatchMatchesItemByItem) {  // the batch runs in the thread pool
  manual_seed(4);
  Tensor a = spd(randn({37, 5, 5}, Float64));
  Tensor L = linalg::cholesky(a), w = linalg::eigvalsh(a);
  for (int64_t i : {0, 17, 36}) {
    Tensor ai = a.index({i});
    EXPECT_EQ(max_abs_diff(L.index({i}), linalg::cholesky(ai)), 0.0);
    EXPECT_EQ(max_abs_diff(w.index({i}), linalg::eigvalsh(ai)), 0.0);
  }
}

TEST(Linalg, EmptyBatchesAndEmptyMatrices) {
  EXPECT_EQ(linalg::solve(zeros({0, 3, 3}), zeros({0, 3})).shape(), (Shape{0, 3}));
  EXPECT_EQ(linalg::inv(zeros({0, 0})).shape(), (Shape{0, 0}));
  Tensor d = linalg::det(zeros({2, 0, 0}, Float64));
  EXPECT_EQ(d.shape(), (Shape{2}));
  EXPECT_EQ(max_abs_diff(d, ones({2}, Float64)), 0.0);  // the empty product
  EXPECT_EQ(linalg::eigh(zeros({0, 0})).eigenvectors.shape(), (Shape{0, 0}));
  EXPECT_EQ(linalg::svd(zeros({4, 3, 0}), false).S.shape(), (Shape{4, 0}));
  EXPECT_EQ(linalg::qr(zeros({3, 0})).Q.shape(), (Shape{3, 0}));
  EXPECT_EQ(linalg::cholesky(zeros({0, 2, 2})).shape(), (Shape{0, 2, 2}));
  Tensor x = linalg::lstsq(zeros({0, 2}), zeros({0, 1}));
  EXPECT_EQ(x.shape(), (Shape{2, 1}));
  EXPECT_EQ(max_abs_diff(x, zeros({2, 1})), 0.0);
}

TEST(Linalg, SingularAndNotPositiveDefiniteNameTheBatchItem) {
  Tensor a = stack({eye(2), from_vector<float>({1, 2, 2, 4}, {2, 2})});  // item 1 singular
  std::string m = error_message<LinAlgError>([&] { linalg::solve(a, ones({2, 2})); });
  EXPECT_TRUE(contains_all(m, {"linalg.solve", "singular", "batch index (1,)"}));
  m = error_message<LinAlgError>([&] { linalg::inv(a); });
  EXPECT_TRUE(contains_all(m, {"linalg.inv", "singular"}));
  m = error_message<LinAlgError>([&] { linalg::cholesky(from_vector<double>({1, 2, 2, 1}, {2, 2})); });
  EXPECT_TRUE(contains_all(m, {"linalg.cholesky", "not positive-definite", "order 2"}));
  // det and slogdet of a singular matrix are values, not errors
  EXPECT_EQ(linalg::det(a).index({1}).item<float>(), 0.0f);
  EXPECT_EQ(linalg::slogdet(a).logabsdet.index({1}).item<float>(), -std::numeric_limits<float>::infinity());
  // LinAlgError is a ValueError is a loom::Error
  EXPECT_FALSE(error_message<ValueError>([&] { linalg::inv(a); }).empty());
}

TEST(Linalg, BadOperandsThrowTypedErrors) {
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { linalg::inv(zeros({2, 3})); }), {"linalg.inv", "square", "(2, 3)"}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { linalg::det(zeros({3})); }), {"linalg.det", "at least 2"}));
  EXPECT_TRUE(contains_all(error_message<DTypeError>([] { linalg::svd(zeros({2, 2}, Int64)); }), {"linalg.svd", "int64"}));
  EXPECT_TRUE(contains_all(error_message<DTypeError>([] { linalg::solve(eye(2), zeros({2}, Int32)); }), {"linalg.solve"}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { linalg::solve(eye(2), zeros({3, 1})); }), {"2 rows", "has 3"}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { linalg::solve(zeros({2, 2, 2}), zeros({3, 2, 1})); }),
                           {"batch axes"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { linalg::eigh(eye(2), "X"); }), {"uplo"}));
  Tensor w = zeros({3, 2}).requires_grad_(true);
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { linalg::svd(w, true); }), {"full_matrices=false"}));
  EXPECT_NO_THROW(linalg::svd(w, false));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { linalg::norm(zeros({3}), "fro"); }), {"matrix norm"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { linalg::norm(zeros({3, 3}), "max"); }), {"\"max\""}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { linalg::norm(zeros({3, 3}), 3.0); }), {"ord 3"}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { linalg::norm(zeros({2, 3, 4}), 2.0); }), {"axes"}));
  EXPECT_TRUE(contains_all(error_message<DTypeError>([] { linalg::norm(zeros({3}, Int32)); }), {"int32"}));
}

TEST(Einsum, ErrorsNameTheProblem) {
  Tensor a = zeros({2, 3}), b = zeros({3, 4});
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { einsum("ij->ij", {a, b}); }), {"1 operand term", "2 operand"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { einsum("i1,jk", {a, b}); }), {"'1'"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { einsum("ijk,jk", {a, b}); }), {"operand 0", "names 3"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { einsum("ij,ik->jk", {a, b}); }), {"label i", "2 and 3"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { einsum("ij,jk->iz", {a, b}); }), {"output label z"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { einsum("ij,jk->ii", {a, b}); }), {"repeated"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { einsum("ij", {zeros({2, 3, 4})}); }), {"3 dimension"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { einsum("ii", {zeros({2, 3})}); }), {"label i", "2 and 3"}));
  // sizes 1 and 3 broadcast between operands, but a diagonal needs equal sizes
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { einsum("ii", {zeros({1, 3})}); }), {"diagonal"}));
}

TEST(Einsum, GreedyOrderAvoidsTheLargeIntermediate) {
  // "i,j,ij->": left to right would build the (n, n) outer product of the vectors first; the
  // greedy order contracts the matrix with one vector (an (n,) intermediate) instead.
  const int64_t n = 600;
  Tensor x = ones({n}, Float64), y = ones({n}, Float64), m = ones({n, n}, Float64);
  reset_peak_memory();
  const int64_t before = memory_stats().current_bytes;
  Tensor r = einsum("i,j,ij->", {x, y, m});
  EXPECT_EQ(r.item<double>(), static_cast<double>(n * n));
  EXPECT_LT(memory_stats().peak_bytes - before, n * n * 8 / 2);  // no (n, n) temporary
}

TEST(Einsum, ImplicitOutputAndTrace) {
  Tensor a = from_vector<double>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(einsum("ii", {a}).item<double>(), 5.0);  // label used twice: summed
  EXPECT_EQ(einsum("ba", {a}).index({0, 1}).item<double>(), 3.0);  // implicit output sorted: "ab"
  EXPECT_EQ(max_abs_diff(einsum("ij,jk", {a, a}), matmul(a, a)), 0.0);
}

TEST(Kron, ShapesAndValues) {
  Tensor a = from_vector<double>({1, 2}, {2}), b = eye(2, std::nullopt, 0, Float64);
  Tensor k = kron(a, b);
  EXPECT_EQ(k.shape(), (Shape{2, 4}));
  EXPECT_EQ(max_abs_diff(k, from_vector<double>({1, 0, 2, 0, 0, 1, 0, 2}, {2, 4})), 0.0);
}

}  // namespace

// The float32 product's every grid (matmul.cpp's gemm_grid: one call, row tiles, column
// tiles, both, and K in parts when K is the longest edge) against the float64 product: each
// operand as stored or transposed, a batch, at 1 and 2 threads. Entries in [-1, 1], so an
// element's float32 error stays far below 1e-5 * K.
TEST(Matmul, EveryTileGridAndEveryPartOfKMatchesTheFloat64Product) {
  const int saved = get_num_threads();
  Generator g(5);
  struct Case {
    int64_t batch, m, n, k;
  };
  for (const Case& c : std::vector<Case>{{1, 40, 30, 20},       // one call
                                         {1, 600, 200, 64},     // row tiles
                                         {1, 130, 900, 64},     // column tiles
                                         {1, 512, 512, 128},    // both
                                         {1, 384, 256, 2048},   // K in 4 parts
                                         {1, 96, 128, 1100},    // K in parts, the last shorter
                                         {2, 64, 100, 1500}}) { // K in 2 parts, a batch
    for (int layout = 0; layout < 4; ++layout) {
      Tensor a = uniform({c.batch, c.m, c.k}, -1, 1, Float32, Device::cpu(), &g);
      Tensor b = uniform({c.batch, c.k, c.n}, -1, 1, Float32, Device::cpu(), &g);
      if (layout & 1) a = mT(mT(a).copy());  // the same values, stored transposed
      if (layout & 2) b = mT(mT(b).copy());
      const Tensor want = matmul(astype(a, Float64), astype(b, Float64));
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        const Tensor got = matmul(a, b);
        EXPECT_LT(max_abs_diff(got, want), 1e-5 * static_cast<double>(c.k))
            << c.batch << " x " << c.m << " x " << c.n << " x " << c.k << ", layout " << layout << ", " << threads << " threads";
      }
    }
  }
  set_num_threads(saved);
}

// A weight's gradient over many rows (K = 4096 here) takes K in parts, whose sums need scratch
// (matmul.cpp): the backward computes it before the input's gradient, so the scratch is freed
// before that larger tensor is allocated and the step's peak does not grow by it. For matmul
// and for linear.
TEST(Matmul, AWeightGradientInPartsOfKDoesNotRaiseTheBackwardsPeak) {
  Generator g(9);
  for (const bool with_bias : {false, true}) {
    Tensor x = uniform({4096, 256}, -1, 1, Float32, Device::cpu(), &g).requires_grad_();
    Tensor w = uniform({256, 128}, -1, 1, Float32, Device::cpu(), &g).requires_grad_();
    Tensor b = zeros({128}).requires_grad_();
    Tensor y = with_bias ? linear(x, w, b) : matmul(x, w);
    const Tensor seed = ones({4096, 128});
    reset_peak_memory(Device::cpu());
    const int64_t before = memory_stats(Device::cpu()).current_bytes;
    y.backward(seed);
    const int64_t grads = x.grad().nbytes() + w.grad().nbytes() + (with_bias ? b.grad().nbytes() : 0);
    // the parts' scratch of w's gradient alone is 3 x 128 KiB
    EXPECT_LE(memory_stats(Device::cpu()).peak_bytes, before + grads + 64 * 1024) << (with_bias ? "linear" : "matmul");
  }
}

// linear(x, w, b) adds the bias inside the float32 product: values and gradients must be
// bit for bit those of matmul then add, for 2-d and 3-d inputs, a non-contiguous input and a
// transposed weight, shapes with vector tails and row blocks of 16 plus a rest, at 1 and 2
// threads; other dtypes take the composite.
TEST(Linear, BiasInsideTheProductIsMatmulThenAddBitForBit) {
  const int saved = get_num_threads();
  Generator g(21);
  struct Case {
    Shape x;
    int64_t n;
    bool strided_x, transposed_w;
  };
  for (const Case& c : std::vector<Case>{{{37, 19}, 23, false, false},
                                         {{4, 5, 33}, 70, false, false},
                                         {{20, 200}, 800, false, true},
                                         {{33, 18}, 17, true, false},
                                         {{1, 7}, 1, false, false},
                                         {{64, 1100}, 96, false, false},   // K in parts
                                         {{64, 1100}, 96, true, false}}) {
    const int64_t k = c.x.back();
    Tensor xv = randn(c.x, Float32, default_device(), &g);
    if (c.strided_x) xv = xv.transpose().copy().transpose();  // the same values, column-major
    Tensor wv = c.transposed_w ? randn({c.n, k}, Float32, default_device(), &g).transpose()
                               : randn({k, c.n}, Float32, default_device(), &g);
    Tensor bv = randn({c.n}, Float32, default_device(), &g);
    Shape ys = c.x;
    ys.back() = c.n;
    Tensor seed = randn(ys, Float32, default_device(), &g);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      const std::string what = shape_str(c.x) + " x " + std::to_string(c.n) + ", " + std::to_string(threads) + " threads";
      Tensor x1 = xv.detach().requires_grad_(), w1 = wv.detach().requires_grad_(), b1 = bv.detach().requires_grad_();
      Tensor x2 = xv.detach().requires_grad_(), w2 = wv.detach().requires_grad_(), b2 = bv.detach().requires_grad_();
      Tensor fused = linear(x1, w1, b1), plain = add(matmul(x2, w2), b2);
      EXPECT_STREQ(fused.impl()->grad_fn->name(), "linear") << what;
      ASSERT_EQ(fused.shape(), plain.shape()) << what;
      EXPECT_TRUE(array_equal(fused, plain)) << what;
      fused.backward(seed);
      plain.backward(seed);
      EXPECT_TRUE(array_equal(x1.grad(), x2.grad())) << what;
      EXPECT_TRUE(array_equal(w1.grad(), w2.grad())) << what;
      EXPECT_TRUE(array_equal(b1.grad(), b2.grad())) << what;
      // without gradients too
      NoGrad off;
      EXPECT_TRUE(array_equal(linear(xv, wv, bv), add(matmul(xv, wv), bv))) << what;
    }
  }
  set_num_threads(saved);
  // float64 and mismatched shapes go the composite's way (its errors included)
  Tensor x64 = randn({3, 4}, Float64, default_device(), &g), w64 = randn({4, 2}, Float64, default_device(), &g);
  Tensor b64 = randn({2}, Float64, default_device(), &g);
  EXPECT_TRUE(array_equal(linear(x64, w64, b64), add(matmul(x64, w64), b64)));
  EXPECT_THROW(linear(randn({3, 5}), randn({4, 2}), randn({2})), ShapeError);
}
