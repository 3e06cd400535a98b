// torch.linalg's factorizations and solvers on LAPACK: cholesky, solve, inv, det, slogdet,
// qr, svd, svdvals, eigh, eigvalsh, lstsq. Each op copies its operand once into LAPACK's
// column-major layout (LAPACK overwrites it anyway) and returns views of the kernel's
// buffers. Gradients are PyTorch's formulas (torch/csrc/autograd/FunctionsManual.cpp),
// written with differentiable ops; ops with several outputs record one rule for all of them
// (record_outputs).
#include <cmath>
#include <functional>
#include <limits>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"
#include "ops/internal.h"
#include "ops/linalg_internal.h"
#include "ops/registry_parts.h"

namespace loom::linalg {

using Grads = std::vector<Tensor>;
using detail::diag_embed;
using detail::mT;

namespace {

using detail::KernelSlot;
using detail::LinalgStatus;

// The kernels' slots, declared beside their ops (src/ops/backend.h, KernelSlot), filled by
// src/ops/cpu/linalg.cpp. Float32 or float64; every matrix operand is a contiguous batch in
// LAPACK's column-major order: an r x c matrix is stored as a (batch, c, r) tensor. Inputs are
// overwritten. Each returns the first failing batch item (others are still computed).
// a <- L (lower, upper triangle zeroed) with a = L L^T; fails when a is not positive-definite.
constinit const KernelSlot<LinalgStatus(const Tensor& a)> kCholesky{"linalg.cholesky"};
// b (n x k) <- a^-1 b, a (n x n) <- its LU factors; fails when a is singular.
constinit const KernelSlot<LinalgStatus(const Tensor& a, const Tensor& b)> kLuSolve{"linalg.lu_solve"};
// sign and logabs (batch) <- slogdet(a) from its LU factors (a singular matrix: 0, -inf).
constinit const KernelSlot<void(const Tensor& a, const Tensor& sign, const Tensor& logabs)> kSlogdet{"linalg.slogdet"};
// a (m x n) <- Q in its first k = min(m, n) columns; r (k x n) <- R.
constinit const KernelSlot<LinalgStatus(const Tensor& a, const Tensor& r)> kQr{"linalg.qr"};
// a (m x n) = u diag(s) vt with s (batch, k) descending; u is m x k and vt k x n (thin), or
// m x m and n x n (full); u and vt undefined: singular values only. a is destroyed.
constinit const KernelSlot<LinalgStatus(const Tensor& a, const Tensor& u, const Tensor& s, const Tensor& vt)> kSvd{"linalg.svd"};
// Symmetric a (n x n, read from its lower triangle) <- its eigenvectors; w (batch, n) <- the
// eigenvalues, ascending.
constinit const KernelSlot<LinalgStatus(const Tensor& a, const Tensor& w)> kEigh{"linalg.eigh"};
// Minimum-norm least squares: b (max(m, n) x k) <- the solution in its first n rows, for
// a (m x n), singular values below rcond * s_max treated as zero.
constinit const KernelSlot<LinalgStatus(const Tensor& a, const Tensor& b, double rcond)> kLstsq{"linalg.lstsq"};

Shape batch_of(const Tensor& a) { return Shape(a.shape().begin(), a.shape().end() - 2); }
int64_t rows_of(const Tensor& a) { return a.shape()[a.ndim() - 2]; }
int64_t cols_of(const Tensor& a) { return a.shape().back(); }
Shape with(Shape s, std::initializer_list<int64_t> tail) {
  s.insert(s.end(), tail);
  return s;
}
// The batch index as the tuple of the batch axes, "(1, 0)", for messages.
std::string batch_index(const Shape& batch, int64_t flat) {
  if (batch.empty()) return "";
  Shape idx(batch.size());
  for (int64_t i = static_cast<int64_t>(batch.size()) - 1; i >= 0; --i) {
    idx[i] = flat % batch[i];
    flat /= batch[i];
  }
  return " (batch index " + shape_str(idx) + ")";
}

// Several outputs of one op application with one backward rule: the outputs are packed into one
// flat tensor on which the rule is recorded, and the returned outputs are differentiable views
// of it, so their gradients (zero for the unused ones) meet in one call of fn.
using MultiFn = std::function<Grads(const std::vector<Tensor>& grads)>;
std::vector<Tensor> record_outputs(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outs,
                                   MultiFn fn) {
  if (!detail::needs_grad(inputs)) return outs;
  std::vector<Shape> shapes;
  Tensor flat;
  {
    NoGrad off;
    std::vector<Tensor> parts;
    for (const Tensor& o : outs) {
      shapes.push_back(o.shape());
      parts.push_back(reshape(o, {o.numel()}));
    }
    flat = concatenate(parts, 0);
  }
  flat = detail::record(op, inputs, flat, [shapes, fn = std::move(fn)](const Tensor& g) {
    std::vector<Tensor> gs;
    int64_t off = 0;
    for (const Shape& s : shapes) {
      const int64_t n = shape_numel(s);
      gs.push_back(reshape(slice(g, 0, off, off + n), s));
      off += n;
    }
    return fn(gs);
  });
  std::vector<Tensor> res;
  int64_t off = 0;
  for (const Shape& s : shapes) {
    const int64_t n = shape_numel(s);
    res.push_back(reshape(slice(flat, 0, off, off + n), s));
    off += n;
  }
  return res;
}

// z @ r^-T for invertible r (solve r y = z^T, transpose back)
Tensor right_solve_t(const Tensor& z, const Tensor& r) { return mT(solve(r, mT(z))); }

// A matrix right-hand side b (..., n, k) for a (..., n, n); vector: b was (..., n).
struct Rhs {
  Tensor b;
  bool vector = false;
};
Rhs matrix_rhs(const Tensor& a, const Tensor& b, const char* op) {
  detail::check_defined(b, op);
  if (!is_floating(b.dtype()) || detail::is_half_float(b.dtype()))
    throw DTypeError(std::string(op) + ": expected a float32 or float64 right-hand side, got " + detail::describe_operands({&b}));
  if (b.ndim() == 0) throw ShapeError(std::string(op) + ": the right-hand side must have at least 1 dimension, got a 0-d tensor");
  const Shape a_rows(a.shape().begin(), a.shape().end() - 1);
  if (b.ndim() == 1 || b.shape() == a_rows) return {expand_dims(b, -1), true};
  return {b, false};
}

// Broadcasts the batch axes of a (..., m, n) and b (..., m', k); returns the batch shape.
Shape broadcast_batch(const Tensor& a, const Tensor& b, const char* op) {
  const Shape ba = batch_of(a), bb(b.shape().begin(), b.shape().end() - 2);
  return broadcast_shapes(ba, bb, (std::string(op) + " (batch axes)").c_str());
}

// --- solve: x = a^-1 b for matrices b, broadcast batch axes (op names the user-facing op)
Tensor solve_matrix(const Tensor& a, const Tensor& b, const char* op) {
  const int64_t n = rows_of(a), k = cols_of(b);
  if (rows_of(b) != n)
    throw ShapeError(std::string(op) + ": a has " + std::to_string(n) + " rows but b has " + std::to_string(rows_of(b)) +
                     " (" + detail::describe_operands({&a, &b}) + ")");
  const Shape batch = broadcast_batch(a, b, op);
  const DType dt = promote_types(a.dtype(), b.dtype());
  Tensor ab = detail::lapack_copy(detail::broadcast_view(a, with(batch, {n, n})), dt);
  Tensor bb = detail::lapack_copy(detail::broadcast_view(b, with(batch, {n, k})), dt);
  const detail::LinalgStatus st = kLuSolve(a.device())(ab, bb);
  if (st.item >= 0)
    throw LinAlgError(std::string(op) + ": the matrix" + batch_index(batch, st.item) +
                      " is singular (U[" + std::to_string(st.info - 1) + ", " + std::to_string(st.info - 1) +
                      "] of its LU factorization is exactly zero), " + detail::describe_operands({&a}));
  Tensor x = detail::lapack_view(bb, batch, n, k, n, n * k);
  if (!detail::needs_grad({&a, &b})) return x;
  return detail::record(op, {a, b}, x, [ad = detail::save(a), xd = detail::save(x), op](const Tensor& g) {
    const Tensor& A = ad;
    Tensor gb = solve_matrix(mT(A), g, op);
    return Grads{negative(matmul(gb, mT(xd.get()))), gb};
  });
}

}  // namespace

// ------------------------------------------------------------------ cholesky
Tensor cholesky(const Tensor& a, bool upper) {
  detail::check_matrix(a, "linalg.cholesky", true);
  if (upper) return mT(cholesky(mT(a), false));  // a = U^T U with U = L(a^T)^T: a's upper triangle
  const int64_t n = rows_of(a);
  const Shape batch = batch_of(a);
  Tensor buf = detail::lapack_copy(a, a.dtype());
  const detail::LinalgStatus st = kCholesky(a.device())(buf);
  if (st.item >= 0)
    throw LinAlgError("linalg.cholesky: the matrix" + batch_index(batch, st.item) +
                      " is not positive-definite (its leading minor of order " + std::to_string(st.info) +
                      " is not positive), " + detail::describe_operands({&a}));
  Tensor L = detail::lapack_view(buf, batch, n, n, n, n * n);
  if (!detail::needs_grad({&a})) return L;
  return detail::record("linalg.cholesky", {a}, L, [ld = detail::save(L)](const Tensor& g) {
    // gA = L^-T Phi L^-1, Phi = the symmetric matrix with lower triangle tril(L^T g), halved diagonal
    const Tensor& l = ld;
    Tensor p = detail::tril(matmul(mT(l), g));
    Tensor phi = add(p, mT(detail::tril(p, -1))) * 0.5;
    Tensor li = inv(l);
    return Grads{matmul(matmul(mT(li), phi), li)};
  });
}

// ------------------------------------------------------------------ solve, inv
Tensor solve(const Tensor& a, const Tensor& b) {
  detail::check_matrix(a, "linalg.solve", true);
  Rhs r = matrix_rhs(a, b, "linalg.solve");
  if (r.b.ndim() < 2)
    throw ShapeError("linalg.solve: b must be (..., n) or (..., n, k), got " + detail::describe_operands({&a, &b}));
  Tensor x = solve_matrix(a, r.b, "linalg.solve");
  return r.vector ? squeeze(x, {-1}) : x;
}

Tensor inv(const Tensor& a) {
  detail::check_matrix(a, "linalg.inv", true);
  const int64_t n = rows_of(a);
  return solve_matrix(a, eye(n, std::nullopt, 0, a.dtype(), a.device()), "linalg.inv");
}

// ------------------------------------------------------------------ det, slogdet
namespace {
void slogdet_raw(const Tensor& a, Tensor& sign, Tensor& logabs) {
  const Shape batch = batch_of(a);
  Tensor buf = detail::lapack_copy(a, a.dtype());
  sign = detail::alloc(batch, a.dtype(), a.device());
  logabs = detail::alloc(batch, a.dtype(), a.device());
  kSlogdet(a.device())(buf, reshape(sign, {shape_numel(batch)}), reshape(logabs, {shape_numel(batch)}));
}
// g[..., None, None] * a^-T (the derivative of log|det a| times g)
Tensor times_inv_t(const Tensor& g, const Tensor& a, const char* op) {
  return multiply(expand_dims(expand_dims(g, -1), -1),
                  mT(solve_matrix(a, eye(rows_of(a), std::nullopt, 0, a.dtype(), a.device()), op)));
}
}  // namespace

Tensor det(const Tensor& a) {
  detail::check_matrix(a, "linalg.det", true);
  Tensor sign, logabs;
  slogdet_raw(a, sign, logabs);
  Tensor d;
  {
    NoGrad off;
    d = multiply(sign, exp(logabs));
  }
  if (!detail::needs_grad({&a})) return d;
  return detail::record("linalg.det", {a}, d, [ad = detail::save(a), dd = detail::save(d)](const Tensor& g) {
    return Grads{times_inv_t(multiply(g, dd.get()), ad, "linalg.det (backward)")};
  });
}

SlogDet slogdet(const Tensor& a) {
  detail::check_matrix(a, "linalg.slogdet", true);
  Tensor sign, logabs;
  slogdet_raw(a, sign, logabs);
  if (!detail::needs_grad({&a})) return {sign, logabs};
  logabs = detail::record("linalg.slogdet", {a}, logabs, [ad = detail::save(a)](const Tensor& g) {
    return Grads{times_inv_t(g, ad, "linalg.slogdet (backward)")};
  });
  return {sign, logabs};
}

// ------------------------------------------------------------------ qr
QR qr(const Tensor& a) {
  detail::check_matrix(a, "linalg.qr", false);
  const int64_t m = rows_of(a), n = cols_of(a), k = std::min(m, n);
  const Shape batch = batch_of(a);
  Tensor buf = detail::lapack_copy(a, a.dtype());
  Tensor rbuf = detail::alloc({shape_numel(batch), n, k}, a.dtype(), a.device());
  kQr(a.device())(buf, rbuf);
  Tensor Q = detail::lapack_view(buf, batch, m, k, m, m * n);
  Tensor R = detail::lapack_view(rbuf, batch, k, n, k, k * n);
  auto outs = record_outputs("linalg.qr", {a}, {Q, R}, [qd = detail::save(Q), rd = detail::save(R), m, n](const Grads& g) {
    const Tensor &q = qd, &r = rd;
    // m >= n: gA = (gQ + Q copyltu(M)) R^-T, M = gR R^T - Q^T gQ, copyltu: the upper triangle
    // mirrored to the lower one. m < n: A = Q [U | V] gives the same on the square part with
    // gQ + Y gV^T, and gY = Q gV.
    auto square_part = [](const Tensor& q, const Tensor& u, const Tensor& gq, const Tensor& gu) {
      Tensor M = subtract(matmul(gu, mT(u)), matmul(mT(q), gq));
      Tensor N = add(detail::triu(M), mT(detail::triu(M, 1)));
      return right_solve_t(add(gq, matmul(q, N)), u);
    };
    if (m >= n) return Grads{square_part(q, r, g[0], g[1])};
    Tensor u = slice(r, -1, 0, m), v = slice(r, -1, m, std::nullopt);
    Tensor gu = slice(g[1], -1, 0, m), gv = slice(g[1], -1, m, std::nullopt);
    Tensor y = matmul(q, v);
    Tensor gx = square_part(q, u, add(g[0], matmul(y, mT(gv))), gu);
    return Grads{concatenate({gx, matmul(q, gv)}, -1)};
  });
  return {outs[0], outs[1]};
}

// ------------------------------------------------------------------ svd
namespace {
struct SvdRaw {
  Tensor U, S, Vh;
};
SvdRaw svd_raw(const Tensor& a, bool vectors, bool full, const char* op) {
  const int64_t m = rows_of(a), n = cols_of(a), k = std::min(m, n);
  const Shape batch = batch_of(a);
  const int64_t nb = shape_numel(batch);
  const int64_t ucols = full ? m : k, vtrows = full ? n : k;
  Tensor buf = detail::lapack_copy(a, a.dtype());
  Tensor s = detail::alloc({nb, k}, a.dtype(), a.device());
  Tensor u, vt;
  if (vectors) {
    u = detail::alloc({nb, ucols, m}, a.dtype(), a.device());
    vt = detail::alloc({nb, n, vtrows}, a.dtype(), a.device());
  }
  const detail::LinalgStatus st = kSvd(a.device())(buf, u, s, vt);
  if (st.item >= 0)
    throw LinAlgError(std::string(op) + ": the SVD of the matrix" + batch_index(batch, st.item) +
                      " did not converge (LAPACK gesdd info " + std::to_string(st.info) + "; are there NaN or inf values?), " +
                      detail::describe_operands({&a}));
  SvdRaw r;
  r.S = reshape(s, with(batch, {k}));
  if (vectors) {
    r.U = detail::lapack_view(u, batch, m, ucols, m, m * ucols);
    r.Vh = detail::lapack_view(vt, batch, vtrows, n, vtrows, n * vtrows);
  }
  return r;
}

// PyTorch's svd_backward (reduced SVD, real): gA = U [(skew(U^T gU) S + S skew(V^T gV)) / E +
// diag(gS)] V^T plus the projections of gU and gV off the spans of U and V, E_jk = s_k^2 - s_j^2.
Tensor svd_backward(const Tensor& gU, const Tensor& gS, const Tensor& gVh, const Tensor& U, const Tensor& S,
                    const Tensor& Vh) {
  const int64_t m = rows_of(U), n = cols_of(Vh), k = cols_of(U);
  auto skew = [](const Tensor& x) { return subtract(x, mT(x)); };
  Tensor V = mT(Vh), gV = mT(gVh);
  Tensor s_row = expand_dims(S, -2), s_col = expand_dims(S, -1);
  Tensor S2 = square(S);
  Tensor E = add(subtract(expand_dims(S2, -2), expand_dims(S2, -1)), eye(k, std::nullopt, 0, S.dtype(), S.device()));
  Tensor gA = divide(add(multiply(skew(matmul(mT(U), gU)), s_row), multiply(s_col, skew(matmul(mT(V), gV)))), E);
  gA = add(gA, diag_embed(gS));
  if (m > k) {
    gA = matmul(U, gA);
    Tensor gUSinv = divide(gU, s_row);
    gA = subtract(add(gA, gUSinv), matmul(U, matmul(mT(U), gUSinv)));
    return matmul(gA, Vh);
  }
  if (n > k) {
    gA = matmul(gA, Vh);
    Tensor SinvgVh = divide(gVh, s_col);
    gA = subtract(add(gA, SinvgVh), matmul(matmul(SinvgVh, V), Vh));
    return matmul(U, gA);
  }
  return matmul(U, matmul(gA, Vh));
}
}  // namespace

SVD svd(const Tensor& a, bool full_matrices) {
  detail::check_matrix(a, "linalg.svd", false);
  const int64_t m = rows_of(a), n = cols_of(a);
  if (full_matrices && m != n && detail::needs_grad({&a}))
    throw ValueError("linalg.svd: gradients need full_matrices=false for a non-square matrix (the extra columns of U "
                     "or rows of Vh are not unique), got " + detail::describe_operands({&a}));
  SvdRaw r = svd_raw(a, true, full_matrices && m != n, "linalg.svd");
  auto outs = record_outputs("linalg.svd", {a}, {r.U, r.S, r.Vh},
                             [ud = detail::save(r.U), sd = detail::save(r.S), vd = detail::save(r.Vh)](const Grads& g) {
                               return Grads{svd_backward(g[0], g[1], g[2], ud, sd, vd)};
                             });
  return {outs[0], outs[1], outs[2]};
}

Tensor svdvals(const Tensor& a) {
  detail::check_matrix(a, "linalg.svdvals", false);
  if (!detail::needs_grad({&a})) return svd_raw(a, false, false, "linalg.svdvals").S;
  SvdRaw r = svd_raw(a, true, false, "linalg.svdvals");
  return detail::record("linalg.svdvals", {a}, r.S, [ud = detail::save(r.U), vd = detail::save(r.Vh)](const Tensor& g) {
    return Grads{matmul(multiply(ud.get(), expand_dims(g, -2)), vd.get())};  // U diag(g) Vh
  });
}

// ------------------------------------------------------------------ eigh
namespace {
Eigh eigh_impl(const Tensor& a, const std::string& uplo, bool vectors_wanted, const char* op) {
  detail::check_matrix(a, op, true);
  if (uplo != "L" && uplo != "U")
    throw ValueError(std::string(op) + ": uplo must be \"L\" or \"U\", got \"" + uplo + "\"");
  if (uplo == "U") return eigh_impl(mT(a), "L", vectors_wanted, op);  // a's upper triangle is a^T's lower one
  const int64_t n = rows_of(a);
  const Shape batch = batch_of(a);
  Tensor buf = detail::lapack_copy(a, a.dtype());
  Tensor w = detail::alloc({shape_numel(batch), n}, a.dtype(), a.device());
  const detail::LinalgStatus st = kEigh(a.device())(buf, w);
  if (st.item >= 0)
    throw LinAlgError(std::string(op) + ": the eigenvalue algorithm did not converge for the matrix" +
                      batch_index(batch, st.item) + " (LAPACK syevd info " + std::to_string(st.info) +
                      "; are there NaN or inf values?), " + detail::describe_operands({&a}));
  Tensor W = reshape(w, with(batch, {n}));
  Tensor V = detail::lapack_view(buf, batch, n, n, n, n * n);
  if (!vectors_wanted) {
    if (!detail::needs_grad({&a})) return {W, Tensor()};
    W = detail::record(op, {a}, W, [vd = detail::save(V)](const Tensor& g) {
      const Tensor& v = vd;
      return Grads{matmul(multiply(v, expand_dims(g, -2)), mT(v))};  // V diag(g) V^T
    });
    return {W, Tensor()};
  }
  auto outs = record_outputs(op, {a}, {W, V}, [wd = detail::save(W), vd = detail::save(V)](const Grads& g) {
    // PyTorch's (hermitian) linalg_eig_backward: gA = V (diag(gw) + skew(V^T gV) / 2 / E) V^T,
    // E_ij = w_j - w_i (1 on the diagonal, where the skew part is 0)
    const Tensor &w = wd, &v = vd;
    const int64_t n = w.shape().back();
    Tensor vgv = matmul(mT(v), g[1]);
    Tensor sk = subtract(vgv, mT(vgv)) * 0.5;
    Tensor E = add(subtract(expand_dims(w, -2), expand_dims(w, -1)), eye(n, std::nullopt, 0, w.dtype(), w.device()));
    Tensor inner = add(divide(sk, E), diag_embed(g[0]));
    return Grads{matmul(matmul(v, inner), mT(v))};
  });
  return {outs[0], outs[1]};
}
}  // namespace

Eigh eigh(const Tensor& a, const std::string& uplo) { return eigh_impl(a, uplo, true, "linalg.eigh"); }
Tensor eigvalsh(const Tensor& a, const std::string& uplo) {
  return eigh_impl(a, uplo, false, "linalg.eigvalsh").eigenvalues;
}

// ------------------------------------------------------------------ lstsq
Tensor lstsq(const Tensor& a, const Tensor& b, std::optional<double> rcond) {
  detail::check_matrix(a, "linalg.lstsq", false);
  Rhs r = matrix_rhs(a, b, "linalg.lstsq");
  const Tensor& B = r.b;
  if (B.ndim() < 2)
    throw ShapeError("linalg.lstsq: b must be (..., m) or (..., m, k), got " + detail::describe_operands({&a, &b}));
  const int64_t m = rows_of(a), n = cols_of(a), k = cols_of(B);
  if (rows_of(B) != m)
    throw ShapeError("linalg.lstsq: a has " + std::to_string(m) + " rows but b has " + std::to_string(rows_of(B)) + " (" +
                     detail::describe_operands({&a, &b}) + ")");
  const Shape batch = broadcast_batch(a, B, "linalg.lstsq");
  const DType dt = promote_types(a.dtype(), B.dtype());
  const int64_t ldb = std::max<int64_t>(1, std::max(m, n)), nb = shape_numel(batch);
  Tensor ab = detail::lapack_copy(detail::broadcast_view(a, with(batch, {m, n})), dt);
  Tensor bb = detail::alloc({nb, k, ldb}, dt, a.device());
  if (bb.numel() > 0) {
    detail::backend(a.device()).fill(bb, 0.0);
    Tensor rows = detail::lapack_view(bb, batch, m, k, ldb, k * ldb);
    if (rows.numel() > 0) detail::backend(a.device()).copy(rows, detail::broadcast_view(B, with(batch, {m, k})));
  }
  const double eps = dt == Float64 ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
  const detail::LinalgStatus st =
      kLstsq(a.device())(ab, bb, rcond ? *rcond : eps * static_cast<double>(std::max(m, n)));
  if (st.item >= 0)
    throw LinAlgError("linalg.lstsq: the SVD of the matrix" + batch_index(batch, st.item) +
                      " did not converge (LAPACK gelsd info " + std::to_string(st.info) + "), " + detail::describe_operands({&a}));
  Tensor x = detail::lapack_view(bb, batch, n, k, ldb, k * ldb);
  if (detail::needs_grad({&a, &B})) {
    // Full-rank a (PyTorch's rule through pinv). Tall: x = (a^T a)^-1 a^T b, z = (a^T a)^-1 gx:
    // ga = (b - a x) z^T - a z x^T, gb = a z. Wide: x = a^T y, y = (a a^T)^-1 b,
    // w = (a a^T)^-1 a gx: ga = y (gx - a^T w)^T - w x^T, gb = w.
    x = detail::record("linalg.lstsq", {a, B}, x,
                       [ad = detail::save(a), bd = detail::save(B), xd = detail::save(x), m, n](const Tensor& g) {
                         const Tensor &A = ad, &Bv = bd, &X = xd;
                         if (m >= n) {
                           Tensor z = solve(matmul(mT(A), A), g);
                           Tensor res = subtract(Bv, matmul(A, X));
                           return Grads{subtract(matmul(res, mT(z)), matmul(matmul(A, z), mT(X))), matmul(A, z)};
                         }
                         Tensor H = matmul(A, mT(A));
                         Tensor y = solve(H, Bv), w = solve(H, matmul(A, g));
                         return Grads{subtract(matmul(y, mT(subtract(g, matmul(mT(A), w)))), matmul(w, mT(X))), w};
                       });
  }
  return r.vector ? squeeze(x, {-1}) : x;
}

}  // namespace loom::linalg

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> linalg_decomposition_ops() {
  return {
      {"linalg.svd", "linalg", true}, {"linalg.svdvals", "linalg", true}, {"linalg.qr", "linalg", true},
      {"linalg.eigh", "linalg", true}, {"linalg.eigvalsh", "linalg", true}, {"linalg.cholesky", "linalg", true},
      {"linalg.solve", "linalg", true}, {"linalg.inv", "linalg", true}, {"linalg.det", "linalg", true},
      {"linalg.slogdet", "linalg", true}, {"linalg.lstsq", "linalg", true},
  };
}

}  // namespace loom::detail
