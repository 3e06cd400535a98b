// Batched matmul: float32 on oneDNN, float64 on OpenBLAS (see docs/kernels.md for the choice), integers
// on a plain loop. Operands with a unit stride on either of their last two axes are passed
// to BLAS as they are (as transposed when needed); others are made contiguous first.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>
#include <oneapi/dnnl/dnnl.h>

#include "loom/core/batch_invariance.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/simd/simd.h"
#include "ops/cpu/wrapping.h"
#include "ops/cpu/register.h"
#include "ops/dispatch.h"
#include "ops/internal.h"

// OpenBLAS's pthreads build (Debian's default libopenblas0-pthread) starts its server threads
// when it loads, and an idle server thread spins on sched_yield for a while before it sleeps:
// measured, that took a core for the first ~50 ms of every process (the first 8 steps of a
// 2-thread MLP training run at 7 ms instead of 2 ms). BLAS runs single-threaded here, so the
// threads are stopped at start-up; weak, because other BLAS builds do not have the function.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

namespace loom::cpu {

namespace {

struct BlasView {
  CBLAS_TRANSPOSE trans;
  int64_t ld;
};

// How BLAS can read the last two axes of a 3-d operand, if at all.
bool blas_view(const Tensor& t, BlasView& v) {
  const int64_t rows = t.shape()[1], cols = t.shape()[2];
  const int64_t rs = t.strides()[1], cs = t.strides()[2];
  if ((cs == 1 || cols == 1) && rs >= std::max<int64_t>(1, cols)) {
    v = {CblasNoTrans, std::max<int64_t>(rs, 1)};
    return true;
  }
  if ((rs == 1 || rows == 1) && cs >= std::max<int64_t>(1, rows)) {
    v = {CblasTrans, std::max<int64_t>(cs, 1)};
    return true;
  }
  return false;
}


// `t` itself when BLAS can read it (v says how), else a contiguous copy of it.
Tensor blas_operand(const Tensor& t, BlasView& v) {
  if (blas_view(t, v)) return t;
  Tensor c(std::make_shared<Storage>(t.nbytes(), t.device()), t.shape(), contiguous_strides(t.shape()), 0, t.dtype());
  copy(c, t);
  blas_view(c, v);
  return c;
}

constexpr int64_t kTile = 256;  // output tile edge; fixed, never derived from the thread count

// float32: oneDNN's sgemm (AVX-512 kernels; the Debian OpenBLAS 0.3.21 runs its Haswell
// kernels on this machine's Zen 5 and is about half as fast, see docs/kernels.md). Every call
// runs single-threaded (the OpenMP thread count is set to 1 around it), so no OpenMP team is
// ever started next to Loom's pool.
//
// Determinism: oneDNN computes a row differently depending on the block of rows (and columns)
// a call is given: its kernels and their remainder paths are chosen by the call's sizes (on
// AVX2 even blocks of 8, 10 and 16 rows of the same product differ in their last bits). So a
// product is cut into a fixed grid of output tiles decided by M, N, K and the operands'
// layout alone, never by the thread count, and each tile is one call; threads only share out
// whole tiles. Every element then goes through the same call whatever the thread count.
struct GemmGrid {
  int64_t rows, cols;  // tile edges (the last tile of a row or column may be smaller)
  int64_t m_tiles, n_tiles;
  int64_t depth = 0, k_parts = 1;  // K in parts of `depth` (the last may be shorter), when k_parts > 1
};

// Tiles of at least ~1M multiply-adds (a smaller product is one call), at most 4 per matrix,
// fewer when the batch already gives the threads work. Every call packs its own copy of its
// part of both operands, which prices the tiles (measured single-threaded, docs/kernels.md,
// "How Loom calls oneDNN"):
// - When K is the longest edge and at least 1024 (a weight's gradient, X^T dY over the
//   tokens), every tile of rows or columns repacks a K-long operand of megabytes in full, so K
//   splits instead: parts of K / 4 (or / 2) rounded up to 64, each one call over all of M x N,
//   their sums added in the order of the parts (sgemm_onednn_depth). On the AMD EPYC Zen 3 a
//   GPT's 384 x 1536 x 2048 gradients went from 45-50 to 66-71 GFLOP/s in the training step
//   (2 x 2 tiles before). With K shorter (128 x 512 x 512, say) the operands stay in cache, and
//   there the parts took 8-12 % longer than the tiles, so the tiles stay.
// - Otherwise the longer tile edge splits first: each row tile repacks a transposed B in full
//   (the PTB LSTM's 400 x 200 by (10000 x 200)^T in two row tiles: 1.10x, its 8 MB come from
//   memory each time) and each column tile repacks A (a GPT's 2048 x 1536 by (384 x 1536)^T,
//   its A 12 MB, took 60-63 GFLOP/s in 4 column tiles, 68-69 in 4 row tiles). Rows split down
//   to 32 (128 when B is transposed), columns down to 128 (64-wide ones cost up to 1.48x) or
//   to 64 for a second tile when nothing else splits, or when B is transposed. Below 64 rows
//   the row halves come first, B transposed or not (the LSTM's 20-row products: 20 x 200 by
//   (800 x 200)^T in column halves took 1.33x on AVX-512, in row halves 1.01x).
// Up to 8 tiles instead of 4 took the MLP step at 1 thread 3-4 % longer. (Products of up to
// simd::kGemmStreamRows rows never come here: invariant_product.)
GemmGrid gemm_grid(int64_t batch, int64_t M, int64_t N, int64_t K, bool b_transposed) {
  const double work = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  int64_t parts = 1;
  while (parts < 4 && work >= static_cast<double>(2 * parts) * (1 << 20)) parts *= 2;
  parts = std::max<int64_t>(1, parts / std::min<int64_t>(batch, 4));
  GemmGrid g;
  if (parts > 1 && K >= std::max<int64_t>({M, N, 1024})) {
    g.rows = M;
    g.cols = N;
    g.m_tiles = g.n_tiles = 1;
    g.depth = ((K + parts - 1) / parts + 63) / 64 * 64;
    g.k_parts = (K + g.depth - 1) / g.depth;
    return g;
  }
  const int64_t min_rows = M < 64 ? 8 : b_transposed ? 128 : 32;
  // (round: rows to 8, oneDNN's row unroll, below 64 rows to 2 for even halves; columns to 16,
  // 64-byte aligned rows in out)
  const auto edge = [](int64_t n, int64_t p, int64_t round) { return p == 1 ? n : ((n + p - 1) / p + round - 1) / round * round; };
  const auto row_edge = [&](int64_t p) { return edge(M, p, M < 64 ? 2 : 8); };
  const auto col_edge = [&](int64_t p) { return edge(N, p, 16); };
  int64_t pm = 1, pn = 1;
  while (pm * pn < parts) {
    const int64_t rows = row_edge(pm * 2), cols = col_edge(pn * 2);
    const bool rows_ok = rows >= min_rows && rows < M;
    const bool cols_ok = cols < N && (cols >= 128 || (cols >= 64 && (b_transposed || (pm * pn == 1 && !rows_ok))));
    if (!rows_ok && !cols_ok) break;
    const bool split_cols = cols_ok && (!rows_ok || ((M >= 64 || !b_transposed) && col_edge(pn) >= row_edge(pm)));
    (split_cols ? pn : pm) *= 2;
  }
  g.rows = row_edge(pm);
  g.cols = col_edge(pn);
  g.m_tiles = (M + g.rows - 1) / g.rows;
  g.n_tiles = (N + g.cols - 1) / g.cols;
  return g;
}

// OpenMP at one thread for a scope: each dnnl_sgemm call runs single-threaded on its pool
// thread (below), and the previous count comes back at the scope's end.
class OneOmpThread {
 public:
  OneOmpThread() : previous_(omp_get_max_threads()) {
    if (previous_ != 1) omp_set_num_threads(1);
  }
  ~OneOmpThread() {
    if (previous_ != 1) omp_set_num_threads(previous_);
  }
  OneOmpThread(const OneOmpThread&) = delete;
  OneOmpThread& operator=(const OneOmpThread&) = delete;

 private:
  int previous_;
};

// A product whose K is its longest edge in parts of K (a weight's gradient, X^T dY over the
// tokens): each part one call over all of M x N, part 0 into out and the others into scratch,
// then added to out in the order of the parts. Tiles of rows or columns would each pack their
// own copy of both K-long operands.
void sgemm_onednn_depth(const Tensor& out, const Tensor& a, const BlasView& va, const Tensor& b, const BlasView& vb,
                        const GemmGrid& g, const float* bias) {
  const int64_t batch = out.shape()[0], M = out.shape()[1], N = out.shape()[2], K = a.shape()[2];
  const int64_t sa = a.strides()[0], sb = b.strides()[0], plane = M * N;
  const char ta = va.trans == CblasNoTrans ? 'N' : 'T', tb = vb.trans == CblasNoTrans ? 'N' : 'T';
  const float* A = a.data<float>();
  const float* B = b.data<float>();
  float* O = out.data<float>();
  const Tensor scratch = detail::alloc({(g.k_parts - 1) * batch * plane}, Float32, Device::cpu());
  float* S = scratch.data<float>();
  const int64_t total = batch * g.k_parts, threads = get_num_threads();
  parallel_range(0, total, (total + threads - 1) / threads, [&](int64_t t0, int64_t t1) {
    const OneOmpThread one;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = t / g.k_parts, p = t % g.k_parts, k0 = p * g.depth, kc = std::min(g.depth, K - k0);
      const int64_t ao = i * sa + (ta == 'N' ? k0 : k0 * va.ld), bo = i * sb + (tb == 'N' ? k0 * vb.ld : k0);
      float* o = p == 0 ? O + i * plane : S + ((p - 1) * batch + i) * plane;
      dnnl_sgemm(ta, tb, M, N, kc, 1.0f, A + ao, va.ld, B + bo, vb.ld, 0.0f, o, N);
    }
  });
  const auto add = simd::table().binary_vv[simd::kAdd];
  parallel_for(0, batch * M, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* o = O + r * N;
      for (int64_t p = 1; p < g.k_parts; ++p) add(o, o, S + (p - 1) * batch * plane + r * N, N);
      if (bias) add(o, o, bias, N);
    }
  });
}

// With `bias`, each call adds it to every row it wrote while they are still in cache (a
// Linear's bias: the same adds as a separate broadcast add, without another pass over out).
void sgemm_onednn(const Tensor& out, const Tensor& a, const BlasView& va, const Tensor& b, const BlasView& vb,
                  const float* bias = nullptr) {
  const int64_t batch = out.shape()[0], M = out.shape()[1], N = out.shape()[2], K = a.shape()[2];
  const int64_t sa = a.strides()[0], sb = b.strides()[0];
  const float* A = a.data<float>();
  const float* B = b.data<float>();
  float* O = out.data<float>();
  const char ta = va.trans == CblasNoTrans ? 'N' : 'T', tb = vb.trans == CblasNoTrans ? 'N' : 'T';
  const GemmGrid g = gemm_grid(batch, M, N, K, tb == 'T');
  if (g.k_parts > 1) return sgemm_onednn_depth(out, a, va, b, vb, g, bias);
  const int64_t per_matrix = g.m_tiles * g.n_tiles, total = batch * per_matrix;
  // one run of tiles per thread (the tiles are the same whatever the runs)
  const int64_t threads = get_num_threads();
  parallel_range(0, total, (total + threads - 1) / threads, [&](int64_t t0, int64_t t1) {
    const OneOmpThread one;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = t / per_matrix, mi = (t % per_matrix) / g.n_tiles, ni = t % g.n_tiles;
      const int64_t m0 = mi * g.rows, n0 = ni * g.cols;
      const int64_t mc = std::min(g.rows, M - m0), nc = std::min(g.cols, N - n0);
      // first element of the tile's rows of a and columns of b
      const int64_t ao = i * sa + (ta == 'N' ? m0 * va.ld : m0);
      const int64_t bo = i * sb + (tb == 'N' ? n0 : n0 * vb.ld);
      float* o = O + i * M * N + m0 * N + n0;
      dnnl_sgemm(ta, tb, mc, nc, K, 1.0f, A + ao, va.ld, B + bo, vb.ld, 0.0f, o, N);
      if (bias) {
        const auto add = simd::table().binary_vv[simd::kAdd];
        for (int64_t row = 0; row < mc; ++row) add(o + row * N, o + row * N, bias + n0, nc);
      }
    }
  });
}

// A contiguous copy of a 3-d tensor.
Tensor contiguous_copy(const Tensor& t) {
  Tensor c(std::make_shared<Storage>(t.nbytes(), t.device()), t.shape(), contiguous_strides(t.shape()), 0, t.dtype());
  copy(c, t);
  return c;
}

// Up to simd::kGemmStreamRows rows (a cached decoder's step, a row per sequence) times b (K x N
// as rows): bound by reading b, so each thread takes whole slices of K (gemm_rows' chains,
// simd::kGemmSlice k each) and reads its rows of b in one sweep, each slice's sums into a
// scratch row of its own; then the slices' sums are added in order, as gemm_rows adds them, so
// the bits are gemm_rows' over all of K. (Split
// by columns instead, each thread read part of every row of b: on the AMD EPYC Zen 3 two
// threads drew 12-13 GB/s; by slices 18-20; and one thread given strips of 256 columns, as the
// tasks below would, 9-10 against 12.5-14 in whole rows.) The columns past the last whole
// vector come from b_tail (K x W) the same way.
void sgemm_rows_by_slices(float* out, const float* a, int64_t lda, const float* b, int64_t ldb, const std::vector<float>& b_tail,
                          int64_t M, int64_t N, int64_t K, const float* bias) {
  const auto& table = simd::table();
  const int64_t W = table.lanes, n_main = N / W * W, width = n_main + (b_tail.empty() ? 0 : W);
  const int64_t slices = (K + simd::kGemmSlice - 1) / simd::kGemmSlice;
  // fewer slices than the threads want (a short K): each slice's columns in parts too, of at
  // least 1024 (4 KiB of each row of b), which changes no bit
  int64_t parts = 1;
  while (slices * parts < 2 * get_num_threads() && n_main / (2 * parts) >= 1024) parts *= 2;
  const int64_t part_cols = (n_main / parts + W - 1) / W * W;
  // (every element is written by its slice before it is read)
  const auto sums = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(slices * M * width));
  parallel_for(0, slices * parts, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t s = t / parts, part = t % parts;
      const int64_t k0 = s * simd::kGemmSlice, kn = std::min(simd::kGemmSlice, K - k0);
      const int64_t j0 = part * part_cols, j1 = part == parts - 1 ? n_main : std::min(n_main, j0 + part_cols);
      float* c = sums.get() + s * M * width;
      if (j1 > j0) table.gemm_rows(c + j0, width, a + k0, lda, b + k0 * ldb + j0, ldb, M, j1 - j0, kn);
      if (!b_tail.empty() && part == parts - 1)
        table.gemm_rows(c + n_main, width, a + k0, lda, b_tail.data() + k0 * W, W, M, W, kn);
    }
  });
  const auto add = table.binary_vv[simd::kAdd];
  parallel_for(0, M, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* o = out + r * N;
      std::memcpy(o, sums.get() + r * width, static_cast<size_t>(N) * sizeof(float));
      for (int64_t s = 1; s < slices; ++s) add(o, o, sums.get() + (s * M + r) * width, N);
      if (bias) add(o, o, bias, N);
    }
  });
}

// The batch-invariant product (batch_invariant() on: inference; include/loom/core/
// batch_invariance.h): every element through simd gemm_rows (or gemm_rows_bt for b stored
// transposed: a Linear with transpose_weights, PyTorch's (out, in) weights), whose bits depend
// on its row of a, its column of b and K only. So the threads may share the work any way, and
// rows and columns split freely (tasks below). gemm_rows takes whole
// vectors of columns; the rest go through a zero-padded K x W copy of b's last columns and a
// scratch block of out, so that they take the same multiply-adds.
void sgemm_invariant(const Tensor& out, const Tensor& a_in, const BlasView& va, const Tensor& b, const BlasView& vb,
                     const float* bias) {
  const auto& table = simd::table();
  const int64_t W = table.lanes;
  const int64_t batch = out.shape()[0], M = out.shape()[1], N = out.shape()[2], K = a_in.shape()[2];
  const Tensor a = va.trans == CblasNoTrans ? a_in : contiguous_copy(a_in);
  const int64_t lda = va.trans == CblasNoTrans ? va.ld : K, sa = a.strides()[0], sb = b.strides()[0];
  const bool bt = vb.trans != CblasNoTrans;  // B(k, j) at j * ld + k
  const float* A = a.data<float>();
  const float* B = b.data<float>();
  float* O = out.data<float>();
  const int64_t n_main = bt ? N : N / W * W, tail = N - n_main;
  // the last columns of each matrix of b, zero-padded to W
  std::vector<float> b_tail(tail ? static_cast<size_t>(batch * K * W) : 0, 0.0f);
  for (int64_t i = 0; tail && i < batch; ++i)
    for (int64_t k = 0; k < K; ++k)
      std::memcpy(b_tail.data() + (i * K + k) * W, B + i * sb + k * vb.ld + n_main, static_cast<size_t>(tail) * sizeof(float));
  if (batch == 1 && M <= simd::kGemmStreamRows && !bt) {
    sgemm_rows_by_slices(O, A, lda, B, vb.ld, b_tail, M, N, K, bias);
    return;
  }
  // tasks of 64 rows by 256 columns, smaller (down to 64 columns, then 8 rows) while there are
  // fewer than two per thread: any split gives the same bits
  int64_t kRows = 64, kCols = 256;
  const int64_t want = 2 * get_num_threads();
  const auto count = [&] { return batch * ((M + kRows - 1) / kRows) * ((N + kCols - 1) / kCols); };
  while (count() < want && kCols > 64 && N > kCols / 2) kCols /= 2;
  while (count() < want && kRows > 8 && M > kRows / 2) kRows /= 2;
  const int64_t row_tasks = (M + kRows - 1) / kRows, col_tasks = (N + kCols - 1) / kCols;
  const int64_t per_matrix = row_tasks * col_tasks;
  parallel_for(0, batch * per_matrix, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> scratch;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = t / per_matrix, m0 = (t % per_matrix) / col_tasks * kRows, n0 = t % col_tasks * kCols;
      const int64_t mc = std::min(kRows, M - m0), n1 = std::min(N, n0 + kCols);
      const float* at = A + i * sa + m0 * lda;
      float* o = O + i * M * N + m0 * N;
      const int64_t main_end = std::min(n1, n_main);
      if (bt) table.gemm_rows_bt(o + n0, N, at, lda, B + i * sb + n0 * vb.ld, vb.ld, mc, n1 - n0, K);
      else if (main_end > n0) table.gemm_rows(o + n0, N, at, lda, B + i * sb + n0, vb.ld, mc, main_end - n0, K);
      if (tail && n1 == N) {
        scratch.resize(static_cast<size_t>(mc * W));
        table.gemm_rows(scratch.data(), W, at, lda, b_tail.data() + i * K * W, W, mc, W, K);
        for (int64_t r = 0; r < mc; ++r)
          std::memcpy(o + r * N + n_main, scratch.data() + r * W, static_cast<size_t>(tail) * sizeof(float));
      }
      if (bias) {
        const auto add = table.binary_vv[simd::kAdd];
        for (int64_t r = 0; r < mc; ++r) add(o + r * N + n0, o + r * N + n0, bias + n0, n1 - n0);
      }
    }
  });
}

// Whether a float32 product of M rows goes through the batch-invariant kernels: in the mode, and
// always for up to simd::kGemmStreamRows rows (a cached decoder's step), which read b once in
// order and take the threads by slices of K (sgemm_rows_by_slices): on the AMD EPYC Zen 3
// (AVX2) a decoder's 768 x 768, 768 x 3072 and 3072 x 768 products drew 12.5-14 GB/s on one
// thread and 18-20 on two, oneDNN's 9-11 and 14-16; its tied head (b transposed, 50257 rows)
// 13-14 on one thread against 10-12; and 3 or 4 rows times 768 x 3072, 0.8 ms on one thread
// against oneDNN's 2.3-2.6 ms.
bool invariant_product(int64_t M) { return M <= simd::kGemmStreamRows || batch_invariant(); }

}  // namespace

// BLAS itself runs single-threaded: matmul spreads fixed output tiles over Loom's pool
// instead, so that results do not depend on the thread count (OpenBLAS's own threading
// splits the work, and so rounds, differently for each count). Set once: in OpenBLAS 0.3.21
// openblas_set_num_threads starts the server threads again.
void init_blas_threads() {
  openblas_set_num_threads(1);
  if (blas_thread_shutdown_) blas_thread_shutdown_();
}

bool matmul_bias(const Tensor& out, const Tensor& a_in, const Tensor& b_in, const Tensor& bias) {
  const int64_t M = out.shape()[1], N = out.shape()[2], K = a_in.shape()[2];
  if (out.dtype() != DType::Float32 || a_in.dtype() != DType::Float32 || b_in.dtype() != DType::Float32 ||
      bias.dtype() != DType::Float32 || !bias.is_contiguous() || bias.numel() != N || M == 0 || N == 0 || K == 0 ||
      out.shape()[0] == 0)
    return false;
  BlasView va, vb;
  const Tensor a = blas_operand(a_in, va), b = blas_operand(b_in, vb);
  if (invariant_product(M)) sgemm_invariant(out, a, va, b, vb, bias.data<float>());
  else sgemm_onednn(out, a, va, b, vb, bias.data<float>());
  return true;
}

void matmul(const Tensor& out, const Tensor& a_in, const Tensor& b_in) {
  const int64_t batch = out.shape()[0], M = out.shape()[1], N = out.shape()[2], K = a_in.shape()[2];
  if (M == 0 || N == 0 || batch == 0) return;
  if (K == 0) {
    fill(out, 0);
    return;
  }
  const DType dt = out.dtype();
  if (dt == DType::Float32 || dt == DType::Float64) {
    BlasView va, vb;
    const Tensor a = blas_operand(a_in, va), b = blas_operand(b_in, vb);
    const int64_t sa = a.strides()[0], sb = b.strides()[0];
    if (dt == DType::Float32) return invariant_product(M) ? sgemm_invariant(out, a, va, b, vb, nullptr) : sgemm_onednn(out, a, va, b, vb);
    const int64_t tm = (M + kTile - 1) / kTile, tn = (N + kTile - 1) / kTile;
    parallel_for(0, batch * tm * tn, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t i = t / (tm * tn), mi = (t % (tm * tn)) / tn, ni = t % tn;
        const int64_t m0 = mi * kTile, n0 = ni * kTile;
        const int64_t mc = std::min(kTile, M - m0), nc = std::min(kTile, N - n0);
        // first element of the tile's rows of a and columns of b
        const int64_t ao = i * sa + (va.trans == CblasNoTrans ? m0 * va.ld : m0);
        const int64_t bo = i * sb + (vb.trans == CblasNoTrans ? n0 : n0 * vb.ld);
        const int64_t oo = i * M * N + m0 * N + n0;
        if (dt == DType::Float32) {
          cblas_sgemm(CblasRowMajor, va.trans, vb.trans, mc, nc, K, 1.0f, a.data<float>() + ao, va.ld,
                      b.data<float>() + bo, vb.ld, 0.0f, out.data<float>() + oo, N);
        } else {
          cblas_dgemm(CblasRowMajor, va.trans, vb.trans, mc, nc, K, 1.0, a.data<double>() + ao, va.ld,
                      b.data<double>() + bo, vb.ld, 0.0, out.data<double>() + oo, N);
        }
      }
    });
    return;
  }
  detail::dispatch_compute(dt, "matmul", [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<std::is_same_v<T, bool>, bool, T>;
    const T* A = static_cast<const T*>(a_in.data_ptr());
    const T* B = static_cast<const T*>(b_in.data_ptr());
    T* O = static_cast<T*>(out.data_ptr());
    const auto& as = a_in.strides();
    const auto& bs = b_in.strides();
    parallel_for(0, batch * M, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, N * K)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t bi = r / M, m = r % M;
        for (int64_t n = 0; n < N; ++n) {
          Acc acc{};
          for (int64_t k = 0; k < K; ++k) {
            const T x = A[bi * as[0] + m * as[1] + k * as[2]];
            const T y = B[bi * bs[0] + k * bs[1] + n * bs[2]];
            if constexpr (std::is_same_v<T, bool>) acc = acc || (x && y);
            else acc = wrapping_add(acc, wrapping_mul(x, y));
          }
          O[(bi * M + m) * N + n] = static_cast<T>(acc);
        }
      }
    });
  });
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/linalg.cpp), with its signature, which the slot checks.
void add_matmul_kernels(detail::Backend& b) {
  b.kernels.fill("linalg.matmul", &cpu::matmul);
  b.kernels.fill("linalg.matmul_bias", &cpu::matmul_bias);
}

}  // namespace loom::cpu
