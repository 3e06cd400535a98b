#pragma once
// The LAPACK routines Loom calls, declared as the Fortran symbols themselves: Debian's
// libopenblas0 (already linked for BLAS) exports the whole of LAPACK, so no LAPACKE (a C
// wrapper that copies row-major operands to column-major ones: Loom lays out its buffers
// column-major itself) and no further package is needed. LP64: Fortran INTEGER is int.
// Character arguments carry gfortran's hidden length arguments at the end.
#include <cstddef>

extern "C" {
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, size_t);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
void sgesv_(const int* n, const int* nrhs, float* a, const int* lda, int* ipiv, float* b, const int* ldb, int* info);
void dgesv_(const int* n, const int* nrhs, double* a, const int* lda, int* ipiv, double* b, const int* ldb, int* info);
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work, const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work, const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau, float* work,
             const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau, double* work,
             const int* lwork, int* info);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s, float* u, const int* ldu,
             float* vt, const int* ldvt, float* work, const int* lwork, int* iwork, int* info, size_t);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s, double* u, const int* ldu,
             double* vt, const int* ldvt, double* work, const int* lwork, int* iwork, int* info, size_t);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w, float* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t, size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t, size_t);
void sgelsd_(const int* m, const int* n, const int* nrhs, float* a, const int* lda, float* b, const int* ldb, float* s,
             const float* rcond, int* rank, float* work, const int* lwork, int* iwork, int* info);
void dgelsd_(const int* m, const int* n, const int* nrhs, double* a, const int* lda, double* b, const int* ldb, double* s,
             const double* rcond, int* rank, double* work, const int* lwork, int* iwork, int* info);
}

namespace loom::cpu::lapack {

// Overloads by element type, arguments by value.
inline void potrf(int n, float* a, int* info) { spotrf_("L", &n, a, &n, info, 1); }
inline void potrf(int n, double* a, int* info) { dpotrf_("L", &n, a, &n, info, 1); }
inline void gesv(int n, int k, float* a, int* ipiv, float* b, int* info) { sgesv_(&n, &k, a, &n, ipiv, b, &n, info); }
inline void gesv(int n, int k, double* a, int* ipiv, double* b, int* info) { dgesv_(&n, &k, a, &n, ipiv, b, &n, info); }
inline void getrf(int n, float* a, int* ipiv, int* info) { sgetrf_(&n, &n, a, &n, ipiv, info); }
inline void getrf(int n, double* a, int* ipiv, int* info) { dgetrf_(&n, &n, a, &n, ipiv, info); }
inline void geqrf(int m, int n, float* a, float* tau, float* w, int lw, int* info) { sgeqrf_(&m, &n, a, &m, tau, w, &lw, info); }
inline void geqrf(int m, int n, double* a, double* tau, double* w, int lw, int* info) { dgeqrf_(&m, &n, a, &m, tau, w, &lw, info); }
inline void orgqr(int m, int n, int k, float* a, const float* tau, float* w, int lw, int* info) {
  sorgqr_(&m, &n, &k, a, &m, tau, w, &lw, info);
}
inline void orgqr(int m, int n, int k, double* a, const double* tau, double* w, int lw, int* info) {
  dorgqr_(&m, &n, &k, a, &m, tau, w, &lw, info);
}
inline void gesdd(char jobz, int m, int n, float* a, float* s, float* u, int ldu, float* vt, int ldvt, float* w, int lw,
                  int* iw, int* info) {
  sgesdd_(&jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, w, &lw, iw, info, 1);
}
inline void gesdd(char jobz, int m, int n, double* a, double* s, double* u, int ldu, double* vt, int ldvt, double* w, int lw,
                  int* iw, int* info) {
  dgesdd_(&jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, w, &lw, iw, info, 1);
}
inline void syevd(int n, float* a, float* w, float* wk, int lw, int* iw, int liw, int* info) {
  ssyevd_("V", "L", &n, a, &n, w, wk, &lw, iw, &liw, info, 1, 1);
}
inline void syevd(int n, double* a, double* w, double* wk, int lw, int* iw, int liw, int* info) {
  dsyevd_("V", "L", &n, a, &n, w, wk, &lw, iw, &liw, info, 1, 1);
}
inline void gelsd(int m, int n, int k, float* a, float* b, int ldb, float* s, float rcond, int* rank, float* w, int lw,
                  int* iw, int* info) {
  sgelsd_(&m, &n, &k, a, &m, b, &ldb, s, &rcond, rank, w, &lw, iw, info);
}
inline void gelsd(int m, int n, int k, double* a, double* b, int ldb, double* s, double rcond, int* rank, double* w,
                  int lw, int* iw, int* info) {
  dgelsd_(&m, &n, &k, a, &m, b, &ldb, s, &rcond, rank, w, &lw, iw, info);
}

}  // namespace loom::cpu::lapack
