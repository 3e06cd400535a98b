// Dense linear algebra on LAPACK (ops/cpu/lapack.h). Operands are contiguous batches of
// column-major matrices (see Backend); the batch is split over Loom's pool, and each LAPACK
// call runs single-threaded (OpenBLAS is limited to one thread at start-up, init_blas_threads),
// so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "loom/core/parallel.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/lapack.h"
#include "ops/cpu/register.h"

namespace loom::cpu {

using detail::LinalgStatus;

namespace {

// Runs fn(b0, b1, info) over the batch in chunks of about 2^17 flops at least (`flops` per
// item); info[i] is batch item i's LAPACK info. Returns the first failure.
template <typename F>
LinalgStatus over_batch(int64_t batch, double flops, F fn) {
  std::vector<int> info(static_cast<size_t>(batch), 0);
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>((1 << 17) / std::max(1.0, flops)));
  parallel_for(0, batch, grain, [&](int64_t b0, int64_t b1) { fn(b0, b1, info.data()); });
  for (int64_t i = 0; i < batch; ++i)
    if (info[i] != 0) return {i, info[i]};
  return {};
}

int I(int64_t v) { return static_cast<int>(v); }  // sizes are checked to fit by the ops
int lwork_of(double w) { return std::max(1, static_cast<int>(w)); }

template <typename T>
LinalgStatus cholesky_t(const Tensor& a) {
  const int64_t batch = a.shape()[0], n = a.shape()[1];
  if (n == 0) return {};
  T* A = a.data<T>();
  return over_batch(batch, double(n) * n * n / 3, [&](int64_t b0, int64_t b1, int* info) {
    for (int64_t b = b0; b < b1; ++b) {
      T* m = A + b * n * n;
      lapack::potrf(I(n), m, &info[b]);
      for (int64_t j = 1; j < n; ++j)  // column j: rows above the diagonal
        std::fill(m + j * n, m + j * n + j, T(0));
    }
  });
}

template <typename T>
LinalgStatus lu_solve_t(const Tensor& a, const Tensor& rhs) {
  const int64_t batch = a.shape()[0], n = a.shape()[1], k = rhs.shape()[1];
  if (n == 0 || k == 0) return {};  // (LAPACK wants leading dimensions >= 1)
  T* A = a.data<T>();
  T* Bm = rhs.data<T>();
  return over_batch(batch, double(n) * n * (n + k), [&](int64_t b0, int64_t b1, int* info) {
    std::vector<int> ipiv(static_cast<size_t>(std::max<int64_t>(1, n)));
    for (int64_t b = b0; b < b1; ++b) lapack::gesv(I(n), I(k), A + b * n * n, ipiv.data(), Bm + b * n * k, &info[b]);
  });
}

template <typename T>
void slogdet_t(const Tensor& a, const Tensor& sign, const Tensor& logabs) {
  const int64_t batch = a.shape()[0], n = a.shape()[1];
  T* A = a.data<T>();
  T* S = sign.data<T>();
  T* L = logabs.data<T>();
  if (n == 0) {  // the empty product: det 1
    std::fill(S, S + batch, T(1));
    std::fill(L, L + batch, T(0));
    return;
  }
  over_batch(batch, double(n) * n * n, [&](int64_t b0, int64_t b1, int*) {
    std::vector<int> ipiv(static_cast<size_t>(std::max<int64_t>(1, n)));
    for (int64_t b = b0; b < b1; ++b) {
      T* m = A + b * n * n;
      int info = 0;
      lapack::getrf(I(n), m, ipiv.data(), &info);
      T s = 1, l = 0;
      for (int64_t i = 0; i < n; ++i) {
        const T d = m[i * n + i];
        if (ipiv[i] != i + 1) s = -s;
        if (d < 0) s = -s;
        l += std::log(std::abs(d));  // a zero pivot: -inf
      }
      if (info > 0) s = 0;  // exactly singular: det 0, log|det| -inf (as torch and NumPy)
      S[b] = s;
      L[b] = info > 0 ? -std::numeric_limits<T>::infinity() : l;
    }
  });
}

template <typename T>
LinalgStatus qr_t(const Tensor& a, const Tensor& r) {
  const int64_t batch = a.shape()[0], n = a.shape()[1], m = a.shape()[2], k = std::min(m, n);
  T* A = a.data<T>();
  if (k == 0) return {};
  T* R = r.data<T>();
  return over_batch(batch, 4.0 * m * n * k, [&](int64_t b0, int64_t b1, int* info) {
    std::vector<T> tau(static_cast<size_t>(std::max<int64_t>(1, k)));
    T q1 = 0, q2 = 0;
    lapack::geqrf(I(m), I(n), A, tau.data(), &q1, -1, &info[b0]);
    lapack::orgqr(I(m), I(k), I(k), A, tau.data(), &q2, -1, &info[b0]);
    std::vector<T> work(static_cast<size_t>(std::max(lwork_of(q1), lwork_of(q2))));
    const int lw = static_cast<int>(work.size());
    for (int64_t b = b0; b < b1; ++b) {
      T* mat = A + b * m * n;
      T* rb = R + b * k * n;
      lapack::geqrf(I(m), I(n), mat, tau.data(), work.data(), lw, &info[b]);
      for (int64_t j = 0; j < n; ++j)  // R: the upper triangle of the first k rows
        for (int64_t i = 0; i < k; ++i) rb[j * k + i] = i <= j ? mat[j * m + i] : T(0);
      if (k > 0) lapack::orgqr(I(m), I(k), I(k), mat, tau.data(), work.data(), lw, &info[b]);
    }
  });
}

template <typename T>
LinalgStatus svd_t(const Tensor& a, const Tensor& u, const Tensor& s, const Tensor& vt) {
  const int64_t batch = a.shape()[0], n = a.shape()[1], m = a.shape()[2], k = std::min(m, n);
  const bool vectors = u.defined();
  const bool full = vectors && u.shape()[1] == m && m != k;
  const bool full_v = vectors && vt.shape()[2] == n && n != k;
  const char jobz = !vectors ? 'N' : (full || full_v) ? 'A' : 'S';
  const int64_t ucols = jobz == 'A' ? m : k, vtrows = jobz == 'A' ? n : k;
  T* A = a.data<T>();
  T* S = s.data<T>();
  T* U = vectors ? u.data<T>() : nullptr;
  T* V = vectors ? vt.data<T>() : nullptr;
  if (k == 0) {  // nothing to decompose; full factors are identities
    if (vectors) {
      std::fill(U, U + batch * m * ucols, T(0));
      std::fill(V, V + batch * n * vtrows, T(0));
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t i = 0; i < std::min(m, ucols); ++i) U[b * m * ucols + i * m + i] = 1;
        for (int64_t i = 0; i < std::min(n, vtrows); ++i) V[b * n * vtrows + i * vtrows + i] = 1;
      }
    }
    return {};
  }
  return over_batch(batch, 8.0 * m * n * k, [&](int64_t b0, int64_t b1, int* info) {
    std::vector<int> iwork(static_cast<size_t>(8 * k));
    T dummy = 0, q = 0;
    lapack::gesdd(jobz, I(m), I(n), A, S, vectors ? U : &dummy, I(m), vectors ? V : &dummy, I(std::max<int64_t>(1, vtrows)),
                  &q, -1, iwork.data(), &info[b0]);
    std::vector<T> work(static_cast<size_t>(lwork_of(q)));
    for (int64_t b = b0; b < b1; ++b)
      lapack::gesdd(jobz, I(m), I(n), A + b * m * n, S + b * k, vectors ? U + b * m * ucols : &dummy, I(m),
                    vectors ? V + b * n * vtrows : &dummy, I(std::max<int64_t>(1, vtrows)), work.data(),
                    static_cast<int>(work.size()), iwork.data(), &info[b]);
  });
}

template <typename T>
LinalgStatus eigh_t(const Tensor& a, const Tensor& w) {
  const int64_t batch = a.shape()[0], n = a.shape()[1];
  T* A = a.data<T>();
  T* W = w.data<T>();
  if (n == 0) return {};
  return over_batch(batch, 9.0 * n * n * n, [&](int64_t b0, int64_t b1, int* info) {
    T q = 0;
    int qi = 0;
    lapack::syevd(I(n), A, W, &q, -1, &qi, -1, &info[b0]);
    std::vector<T> work(static_cast<size_t>(lwork_of(q)));
    std::vector<int> iwork(static_cast<size_t>(std::max(1, qi)));
    for (int64_t b = b0; b < b1; ++b)
      lapack::syevd(I(n), A + b * n * n, W + b * n, work.data(), static_cast<int>(work.size()), iwork.data(),
                    static_cast<int>(iwork.size()), &info[b]);
  });
}

template <typename T>
LinalgStatus lstsq_t(const Tensor& a, const Tensor& rhs, double rcond) {
  const int64_t batch = a.shape()[0], n = a.shape()[1], m = a.shape()[2];
  const int64_t k = rhs.shape()[1], ldb = rhs.shape()[2], mn = std::min(m, n);
  T* A = a.data<T>();
  T* Bm = rhs.data<T>();
  if (mn == 0) {  // no equations or no unknowns: the minimum-norm solution is 0
    std::fill(Bm, Bm + batch * k * ldb, T(0));
    return {};
  }
  return over_batch(batch, 8.0 * m * n * mn, [&](int64_t b0, int64_t b1, int* info) {
    std::vector<T> s(static_cast<size_t>(mn));
    T q = 0;
    int qi = 0, rank = 0;
    lapack::gelsd(I(m), I(n), I(k), A, Bm, I(ldb), s.data(), T(rcond), &rank, &q, -1, &qi, &info[b0]);
    std::vector<T> work(static_cast<size_t>(lwork_of(q)));
    std::vector<int> iwork(static_cast<size_t>(std::max(1, qi)));
    for (int64_t b = b0; b < b1; ++b)
      lapack::gelsd(I(m), I(n), I(k), A + b * m * n, Bm + b * k * ldb, I(ldb), s.data(), T(rcond), &rank, work.data(),
                    static_cast<int>(work.size()), iwork.data(), &info[b]);
  });
}

LinalgStatus cholesky(const Tensor& a) { return a.dtype() == Float64 ? cholesky_t<double>(a) : cholesky_t<float>(a); }
LinalgStatus lu_solve(const Tensor& a, const Tensor& b) {
  return a.dtype() == Float64 ? lu_solve_t<double>(a, b) : lu_solve_t<float>(a, b);
}
void slogdet(const Tensor& a, const Tensor& sign, const Tensor& logabs) {
  if (a.dtype() == Float64) slogdet_t<double>(a, sign, logabs);
  else slogdet_t<float>(a, sign, logabs);
}
LinalgStatus qr(const Tensor& a, const Tensor& r) { return a.dtype() == Float64 ? qr_t<double>(a, r) : qr_t<float>(a, r); }
LinalgStatus svd(const Tensor& a, const Tensor& u, const Tensor& s, const Tensor& vt) {
  return a.dtype() == Float64 ? svd_t<double>(a, u, s, vt) : svd_t<float>(a, u, s, vt);
}
LinalgStatus eigh(const Tensor& a, const Tensor& w) { return a.dtype() == Float64 ? eigh_t<double>(a, w) : eigh_t<float>(a, w); }
LinalgStatus lstsq(const Tensor& a, const Tensor& b, double rcond) {
  return a.dtype() == Float64 ? lstsq_t<double>(a, b, rcond) : lstsq_t<float>(a, b, rcond);
}

}  // namespace

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/linalg_decompositions.cpp), with its signature, which the slot checks.
void add_linalg_kernels(detail::Backend& b) {
  b.kernels.fill("linalg.cholesky", &cholesky);
  b.kernels.fill("linalg.lu_solve", &lu_solve);
  b.kernels.fill("linalg.slogdet", &slogdet);
  b.kernels.fill("linalg.qr", &qr);
  b.kernels.fill("linalg.svd", &svd);
  b.kernels.fill("linalg.eigh", &eigh);
  b.kernels.fill("linalg.lstsq", &lstsq);
}

}  // namespace loom::cpu
