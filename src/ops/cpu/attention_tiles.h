#pragma once
// Private to src/ops/cpu: the tiles of the fused attention kernel (attention_flash.cpp): their
// sizes, the arithmetic a tile needs per element type (float32 through the SIMD table, float64
// loops), a plane's mask, causality and dropout read per tile, and the transposes that lay the
// float32 operands out for gemm_rows.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/backend.h"
#include "ops/cpu/simd/simd.h"
#include "ops/random_mix.h"

namespace loom::cpu::flash {

using detail::AttentionParams;

constexpr int64_t kBr = 64;  // query rows per tile
constexpr int64_t kBc = 64;  // key rows per tile
// A causal diagonal tile's bands (float32): query rows r of a tile on the diagonal see the keys
// c <= r only, so its products run a band of kBand rows (or columns) at a time over just the
// keys (or queries) that band needs, about 10/16 of the tile's multiply-adds (see Plane::banded).
constexpr int64_t kBand = 16;

// The arithmetic a tile needs, per element type: float32 through the SIMD table, float64 loops.
template <typename T>
struct TileOps;

template <>
struct TileOps<float> {
  const simd::Table& t = simd::table();
  // c (m x n) = a (m x K) b^T (b: n x K)
  void gemm_nt(float* c, int64_t ldc, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t m, int64_t n,
               int64_t K) const {
    t.gemm_rows_bt(c, ldc, a, lda, b, ldb, m, n, K);
  }
  // c (m x n) = a (m x K) b (K x n); n a multiple of the vector width (the caller pads)
  void gemm_nn(float* c, int64_t ldc, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t m, int64_t n,
               int64_t K) const {
    t.gemm_rows(c, ldc, a, lda, b, ldb, m, n, K);
  }
  // c (m x n) += a (m x K) b (K x n), each element's chain starting from c; n as gemm_nn's
  void gemm_nn_add(float* c, int64_t ldc, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t m, int64_t n,
                   int64_t K) const {
    t.gemm_rows_add(c, ldc, a, lda, b, ldb, m, n, K);
  }
  // The online softmax's step over a tile of scores (see simd.h: online_softmax_rows)
  void online_softmax(float* s, int64_t lds, int64_t rows, int64_t n, float* m, float* l, float* acc, int64_t ldacc,
                      int64_t nacc) const {
    t.online_softmax_rows(s, lds, rows, n, m, l, acc, ldacc, nacc);
  }
  // x = exp(x - sub) over rows of n (sub: n values)
  void exp_minus_rows(float* x, int64_t ld, const float* sub, int64_t rows, int64_t n) const {
    t.exp_minus_rows(x, ld, sub, rows, n);
  }
  void scale(float* o, const float* x, float a, int64_t n) const { t.binary_vs[simd::kMul](o, x, a, n); }
  // dp = (dp - d) p over rows of n (d: n values)
  void softmax_grad_rows(float* dp, int64_t ld, const float* p, const float* d, int64_t rows, int64_t n) const {
    t.softmax_grad_rows(dp, ld, p, d, rows, n);
  }
};

template <>
struct TileOps<double> {
  void gemm_nt(double* c, int64_t ldc, const double* a, int64_t lda, const double* b, int64_t ldb, int64_t m, int64_t n,
               int64_t K) const {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a[i * lda + k] * b[j * ldb + k];
        c[i * ldc + j] = s;
      }
  }
  void gemm_nn(double* c, int64_t ldc, const double* a, int64_t lda, const double* b, int64_t ldb, int64_t m, int64_t n,
               int64_t K) const {
    for (int64_t i = 0; i < m; ++i) {
      double* ci = c + i * ldc;
      std::fill(ci, ci + n, 0.0);
      for (int64_t k = 0; k < K; ++k) {
        const double aik = a[i * lda + k];
        const double* bk = b + k * ldb;
        for (int64_t j = 0; j < n; ++j) ci[j] += aik * bk[j];
      }
    }
  }
  void gemm_nn_add(double* c, int64_t ldc, const double* a, int64_t lda, const double* b, int64_t ldb, int64_t m,
                   int64_t n, int64_t K) const {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t k = 0; k < K; ++k) {
        const double aik = a[i * lda + k];
        for (int64_t j = 0; j < n; ++j) c[i * ldc + j] += aik * b[k * ldb + j];
      }
  }
  void online_softmax(double* s, int64_t lds, int64_t rows, int64_t n, double* m, double* l, double* acc, int64_t ldacc,
                      int64_t nacc) const {
    for (int64_t r = 0; r < rows; ++r) {
      double* row = s + r * lds;
      double rm = row[0];
      for (int64_t i = 1; i < n; ++i)
        if (row[i] > rm || std::isnan(row[i])) rm = std::isnan(rm) ? rm : row[i];
      if (std::isnan(rm)) l[r] = rm;  // NaN for good, as the float32 pass (simd/attention.inc)
      const double mn = m[r] < rm ? rm : m[r];
      if (mn == -std::numeric_limits<double>::infinity()) {  // every position so far masked: no weight yet
        std::fill(row, row + n, 0.0);
        continue;
      }
      const double alpha = std::exp(m[r] - mn);
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += (row[i] = std::exp(row[i] - mn));
      l[r] = l[r] * alpha + sum;
      m[r] = mn;
      for (int64_t i = 0; i < nacc; ++i) acc[r * ldacc + i] *= alpha;
    }
  }
  void exp_minus_rows(double* x, int64_t ld, const double* sub, int64_t rows, int64_t n) const {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < n; ++i) x[r * ld + i] = std::exp(x[r * ld + i] - sub[i]);
  }
  void scale(double* o, const double* x, double a, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] * a;
  }
  void softmax_grad_rows(double* dp, int64_t ld, const double* p, const double* d, int64_t rows, int64_t n) const {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < n; ++i) dp[r * ld + i] = p[r * ld + i] * (dp[r * ld + i] - d[i]);
  }
};

// The mask, causality and dropout of one (batch * head) plane, read per element.
template <typename T>
struct Plane {
  const AttentionParams& p;
  int64_t bh;
  const bool* bmask = nullptr;  // bool mask at this plane's offset
  const T* fmask = nullptr;     // float mask at this plane's offset
  T keep_scale = 1;             // 1 / (1 - p) in T, as the math form rounds it
  double keep_below = 1;        // 1 - p

  Plane(const AttentionParams& params, int64_t bh_) : p(params), bh(bh_) {
    if (p.mask.defined()) {
      const int64_t off = p.mask_offset[static_cast<size_t>(bh)];
      if (p.mask.dtype() == DType::Bool) bmask = static_cast<const bool*>(p.mask.data_ptr()) + off;
      else fmask = static_cast<const T*>(p.mask.data_ptr()) + off;
    }
    if (p.dropout_p > 0) {
      keep_scale = static_cast<T>(1.0 / (1.0 - p.dropout_p));
      keep_below = 1.0 - p.dropout_p;
    }
  }
  int64_t at(int64_t i, int64_t j) const { return i * p.mask_stride_l + j * p.mask_stride_s; }
  // Whether the tile [i0, i0 + br) x [j0, j0 + bc) has a position that is not masked out.
  bool tile_live(int64_t i0, int64_t br, int64_t j0, int64_t bc) const {
    if (p.causal && j0 > i0 + br - 1) return false;
    if (bmask) {
      for (int64_t r = 0; r < br; ++r)
        for (int64_t c = 0; c < bc; ++c)
          if (bmask[at(i0 + r, j0 + c)]) return true;
      return false;
    }
    if (fmask) {
      const T ninf = -std::numeric_limits<T>::infinity();
      for (int64_t r = 0; r < br; ++r)
        for (int64_t c = 0; c < bc; ++c)
          if (!(fmask[at(i0 + r, j0 + c)] == ninf)) return true;
      return false;
    }
    return true;
  }
  // Whether the tile is on the diagonal of a causal plane with no other mask (then its products
  // may run in bands: the positions they leave out are those masked out, weights exactly 0, and
  // mask_tile still fills them with -inf). Tiles are square (kBr == kBc), so i0 == j0 there.
  bool banded(int64_t i0, int64_t j0) const { return p.causal && !bmask && !fmask && i0 == j0; }
  // Whether positions of the tile need masking at all (a causal tile that reaches past the diagonal).
  bool tile_masked(int64_t i0, int64_t j0, int64_t bc) const { return bmask || fmask || (p.causal && j0 + bc - 1 > i0); }
  // The masked score at (i, j) from the scaled score s.
  T masked(T s, int64_t i, int64_t j) const {
    if (p.causal && j > i) return -std::numeric_limits<T>::infinity();
    if (bmask) return bmask[at(i, j)] ? s : -std::numeric_limits<T>::infinity();
    if (fmask) return s + fmask[at(i, j)];
    return s;
  }
  // The mask applied to a tile of scores: s[r * ld + c] is position (i0 + r, j0 + c), or with
  // `keys_as_rows` s[c * ld + r]. Causality alone is a fill of each row's end (or each key
  // row's start) with -inf: per element, a diagonal tile's masking cost as much as its product.
  void mask_tile(T* s, int64_t ld, int64_t i0, int64_t br, int64_t j0, int64_t bc, bool keys_as_rows) const {
    const T ninf = -std::numeric_limits<T>::infinity();
    if (!bmask && !fmask) {
      if (!p.causal) return;
      if (keys_as_rows)  // key j0 + c is masked for the rows i0 + r < j0 + c
        for (int64_t c = 0; c < bc; ++c) std::fill(s + c * ld, s + c * ld + std::clamp<int64_t>(j0 + c - i0, 0, br), ninf);
      else  // row i0 + r masks the keys j0 + c > i0 + r
        for (int64_t r = 0; r < br; ++r) std::fill(s + r * ld + std::clamp<int64_t>(i0 + r - j0 + 1, 0, bc), s + r * ld + bc, ninf);
      return;
    }
    for (int64_t r = 0; r < br; ++r)
      for (int64_t c = 0; c < bc; ++c) {
        T& x = keys_as_rows ? s[c * ld + r] : s[r * ld + c];
        x = masked(x, i0 + r, j0 + c);
      }
  }
  // The dropout factor of weight (i, j): 0 or 1 / (1 - p).
  T drop(int64_t i, int64_t j) const {
    const uint64_t idx = static_cast<uint64_t>((bh * p.L + i) * p.S + j);
    const double u = static_cast<double>(detail::random_mix(p.dropout_key, idx) >> 11) * 0x1.0p-53;
    return u < keep_below ? keep_scale : T(0);
  }
};

// dst (cols x ldd, zero beyond rows) = src (rows x cols)^T: float32 operands laid out so that a
// product with them is A B, which gemm_rows runs in its register tiles (A B^T through
// gemm_rows_bt folds every element's lanes at the end: several times slower at these sizes).
template <typename T>
void transpose_into(T* dst, int64_t ldd, const T* src, int64_t rows, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) std::fill(dst + c * ldd + rows, dst + (c + 1) * ldd, T(0));
  if constexpr (std::is_same_v<T, float>) {
    simd::table().transpose(dst, ldd, src, cols, rows, cols);
  } else {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) dst[c * ldd + r] = src[r * cols + c];
  }
}

// src (rows x cols) as tiles of `tile` rows, each transposed into a contiguous (cols x tile)
// block of dst (zeros past the last row). A tile's block is then one contiguous operand: a
// whole transposed matrix (cols x rows) made the tiles' operands rows of it far apart (16 KiB
// at S 4096), a page each, which the products' packing read slower than they multiplied.
template <typename T>
void transpose_tiles(T* dst, int64_t tile, const T* src, int64_t rows, int64_t cols) {
  for (int64_t t0 = 0; t0 < rows; t0 += tile)
    transpose_into(dst + t0 * cols, tile, src + t0 * cols, std::min(tile, rows - t0), cols);
}

// Rounded up to a multiple of 16 floats (any vector width's multiple).
inline int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

}  // namespace loom::cpu::flash
