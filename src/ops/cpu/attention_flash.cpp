// Fused scaled dot-product attention on the CPU (FlashAttention-2's algorithm): queries in tiles
// of kBr rows against keys in tiles of kBc, an online softmax (running max m and sum l per row,
// the output accumulator rescaled by exp(m_old - m_new) when the max grows), so that no L x S
// tensor is ever formed; a step's memory is O(tile) per thread plus the (L) log-sum-exp per row.
// The backward recomputes each tile's weights from the saved log-sum-exp (P = exp(s - lse)) and
// takes D = rowsum(dO * O), dV += P^T dO, dP = dO V^T, dS = P (dP - D), dQ += dS K scale,
// dK += dS^T Q scale.
//
// Threads: the forward splits (batch, head, query tile) over the pool, the backward (batch, key /
// value head): one task owns its rows of dK and dV, and of dQ for the query heads that read its
// key / value head, so nothing is shared and no atomics are needed. Each task runs its tiles in a
// fixed order, so the results do not depend on the thread count.
//
// float32 runs the products on the SIMD table's batch-invariant GEMM blocks (gemm_rows for A B,
// gemm_rows_add for C += A B into the accumulators and gradients, gemm_rows_bt for A B^T) and
// the softmax's passes a tile per call from the same table (attention.inc); gemm_rows wants
// the columns a multiple of the vector width, so a head size that is not is zero-padded at entry
// (zeros change no dot product). float64 runs plain loops with the same tiling.
//
// The backward works on transposed tiles (keys as rows: S^T = K Q^T): P^T and dS^T are then the
// left operands of dV += P^T dO and dK += dS^T Q as gemm_rows takes them, and only dS needs an
// explicit transpose (for dQ).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/cpu/attention_tiles.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/nn_kernels.h"
#include "ops/cpu/register.h"
#include "ops/cpu/simd/simd.h"
#include "ops/dispatch.h"
#include "ops/internal.h"
#include "ops/random_mix.h"

namespace loom::cpu {

namespace {

using namespace flash;

// Query tiles a forward task takes together: each key tile (K^T and V, 32 KiB at head size 64)
// is read once for the group instead of once per query tile (at T = 4096 a head's K and V are
// 2 MiB, past L2, and were read from L3 by every query tile). Each query tile still meets the
// key tiles in ascending order, so the bits are those of one tile at a time.
constexpr int64_t kQueryTilesPerGroup = 4;

// Row i of plane bh of the output, counted in rows (AttentionParams::out_heads_inner).
inline int64_t out_row(const AttentionParams& p, int64_t bh, int64_t i) {
  return p.out_heads_inner ? ((bh / p.H) * p.L + i) * p.H + bh % p.H : bh * p.L + i;
}

// The forward of one (batch, head, group of query tiles) task: its scratch, and the steps.
template <typename T>
struct ForwardTask {
  const TileOps<T> ops{};
  const AttentionParams& p;
  const int64_t E, Ev, L, S, nkt;
  const T scale;
  const T* kt;  // the transposed key tiles of every key / value head, or null (see forward_impl)
  const int64_t ks, vs;  // the spacing of k's and v's (batch, head) planes
  // per query tile of the group: the scaled queries, the running max and sum, the accumulator
  std::vector<T> qs, m, l, acc;
  std::vector<T> s;  // one tile's scores, then weights

  ForwardTask(const AttentionParams& params, int64_t E_, int64_t Ev_, const T* kt_, int64_t ks_, int64_t vs_)
      : p(params), E(E_), Ev(Ev_), L(p.L), S(p.S), nkt((S + kBc - 1) / kBc), scale(static_cast<T>(p.scale)), kt(kt_), ks(ks_), vs(vs_),
        qs(static_cast<size_t>(kQueryTilesPerGroup * kBr * E)), m(kQueryTilesPerGroup * kBr), l(kQueryTilesPerGroup * kBr),
        acc(static_cast<size_t>(kQueryTilesPerGroup * kBr * Ev)), s(kBr * kBc) {}

  // Query tiles [t0, t1) of plane bh: every live (query tile, key tile) pair, key tiles outermost.
  void run(int64_t bh, int64_t t0, int64_t t1, T* out, T* lse, const T* q, const T* k, const T* v) {
    const int64_t b = bh / p.H, h = bh % p.H, kvh = b * p.Hkv + h / (p.H / p.Hkv);
    const Plane<T> plane(p, bh);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i0 = t * kBr, br = std::min(kBr, L - i0), g = t - t0;
      ops.scale(qs.data() + g * kBr * E, q + (bh * L + i0) * E, scale, br * E);  // the scale folded into q
      std::fill(m.begin() + g * kBr, m.begin() + (g + 1) * kBr, -std::numeric_limits<T>::infinity());
      std::fill(l.begin() + g * kBr, l.begin() + (g + 1) * kBr, T(0));
      std::fill(acc.begin() + g * kBr * Ev, acc.begin() + (g + 1) * kBr * Ev, T(0));
    }
    const int64_t j_end = p.causal ? std::min(S, std::min(L, t1 * kBr)) : S;  // causal: no key beyond the last row
    for (int64_t j0 = 0; j0 < j_end; j0 += kBc) {
      const int64_t bc = std::min(kBc, S - j0);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t i0 = t * kBr, br = std::min(kBr, L - i0);
        if (plane.tile_live(i0, br, j0, bc)) tile(plane, kvh, t - t0, i0, br, j0, bc, k, v);
      }
    }
    for (int64_t t = t0; t < t1; ++t) finish(bh, t - t0, t * kBr, std::min(kBr, L - t * kBr), out, lse);
  }

  // The online softmax's step for query tile g (rows i0 ..) against the key tile at j0.
  void tile(const Plane<T>& plane, int64_t kvh, int64_t g, int64_t i0, int64_t br, int64_t j0, int64_t bc, const T* k,
            const T* v) {
    const T* Q = qs.data() + g * kBr * E;
    T* M = m.data() + g * kBr;
    T* Lsum = l.data() + g * kBr;
    T* A = acc.data() + g * kBr * Ev;
    const bool banded = kt && plane.banded(i0, j0);
    if (kt) {
      const int64_t bcp = std::min(kBc, round16(bc));  // the zero columns past S give scores left unread
      const T* ktile = kt + (kvh * nkt + j0 / kBc) * E * kBc;
      if (banded)  // rows [r0, r0 + n) need the keys before r0 + n only
        for (int64_t r0 = 0; r0 < br; r0 += kBand) {
          const int64_t n = std::min(kBand, br - r0);
          ops.gemm_nn(s.data() + r0 * kBc, kBc, Q + r0 * E, E, ktile, kBc, n, std::min(bcp, round16(r0 + n)), E);
        }
      else
        ops.gemm_nn(s.data(), kBc, Q, E, ktile, kBc, br, bcp, E);
    } else {
      ops.gemm_nt(s.data(), kBc, Q, E, k + kvh * ks + j0 * E, E, br, bc, E);
    }
    if (plane.tile_masked(i0, j0, bc)) plane.mask_tile(s.data(), kBc, i0, br, j0, bc, false);
    // s = exp(s - m), the sums, A rescaled; a banded tile's rows past their band's keys hold
    // only -inf (weights 0), left as they are and unread
    if (banded)
      for (int64_t r0 = 0; r0 < br; r0 += kBand) {
        const int64_t n = std::min(kBand, br - r0);
        ops.online_softmax(s.data() + r0 * kBc, kBc, n, std::min(bc, round16(r0 + n)), M + r0, Lsum + r0, A + r0 * Ev, Ev, Ev);
      }
    else
      ops.online_softmax(s.data(), kBc, br, bc, M, Lsum, A, Ev, Ev);
    if (p.dropout_p > 0)
      for (int64_t r = 0; r < br; ++r)
        for (int64_t c = 0; c < (banded ? std::min(bc, r + 1) : bc); ++c) s[r * kBc + c] *= plane.drop(i0 + r, j0 + c);
    const T* Vj = v + kvh * vs + j0 * Ev;
    if (banded)  // (the weights past each band's keys are exactly 0)
      for (int64_t r0 = 0; r0 < br; r0 += kBand) {
        const int64_t n = std::min(kBand, br - r0);
        ops.gemm_nn_add(A + r0 * Ev, Ev, s.data() + r0 * kBc, kBc, Vj, Ev, n, Ev, std::min(bc, r0 + n));
      }
    else
      ops.gemm_nn_add(A, Ev, s.data(), kBc, Vj, Ev, br, Ev, bc);
  }

  // Query tile g's rows divided by their sums, and their log-sum-exp.
  void finish(int64_t bh, int64_t g, int64_t i0, int64_t br, T* out, T* lse) const {
    for (int64_t r = 0; r < br; ++r) {
      T* o = out + out_row(p, bh, i0 + r) * Ev;
      const T lr = l[g * kBr + r];
      if (lr > 0) {
        ops.scale(o, acc.data() + (g * kBr + r) * Ev, T(1) / lr, Ev);
        lse[bh * L + i0 + r] = m[g * kBr + r] + std::log(lr);
      } else if (lr == 0) {  // every position masked: weights 0, so 0 (PyTorch >= 2.5, and the math form)
        std::fill(o, o + Ev, T(0));
        lse[bh * L + i0 + r] = std::numeric_limits<T>::infinity();
      } else {  // a NaN score: NaN, as softmax's
        std::fill(o, o + Ev, std::numeric_limits<T>::quiet_NaN());
        lse[bh * L + i0 + r] = std::numeric_limits<T>::quiet_NaN();
      }
    }
  }
};

// ks, vs: the spacing of k's and v's (batch, head) planes (S E and S Ev when packed).
template <typename T>
void forward_impl(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionParams& p, int64_t E, int64_t Ev, int64_t ks,
                  int64_t vs) {
  // float32: k transposed per key / value head and key tile (E x kBc each, transpose_tiles), so
  // that q k^T is a gemm_rows product over a contiguous block. Not for one or two query rows (a
  // cached decoder's step): there the transpose cost more than the product it serves, and
  // gemm_rows_bt's dot products read the keys as they are.
  const bool kT = std::is_same_v<T, float> && p.L > 2;
  const int64_t nkt = (p.S + kBc - 1) / kBc, nqt = (p.L + kBr - 1) / kBr;
  const int64_t ngroups = (nqt + kQueryTilesPerGroup - 1) / kQueryTilesPerGroup;
  // (a buffer of the caching allocator, not a zeroed vector: the transposes write all of it,
  // the zeros past S included, and zeroing it first had been as much memset as the keys' size)
  const Tensor kt_buffer = kT ? detail::alloc({p.B * p.Hkv * nkt * E * kBc}, Float32, Device::cpu()) : Tensor();
  T* kt = kT ? static_cast<T*>(kt_buffer.data_ptr()) : nullptr;
  if (kT)
    parallel_range(0, p.B * p.Hkv, 1, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) transpose_tiles(kt + h * nkt * E * kBc, kBc, k + h * ks, p.S, E);
    });
  parallel_range(0, p.B * p.H * ngroups, 1, [&](int64_t t0, int64_t t1) {
    ForwardTask<T> work(p, E, Ev, kt, ks, vs);
    for (int64_t task = t0; task < t1; ++task) {
      // a plane's groups of query tiles in the order 0, n-1, 1, n-2, ...: a causal group's work
      // grows with its index, so a contiguous chunk of tasks pairs light and heavy groups and
      // the threads' chunks weigh about the same
      const int64_t bh = task / ngroups, zig = task % ngroups, grp = zig % 2 == 0 ? zig / 2 : ngroups - 1 - zig / 2;
      const int64_t first = grp * kQueryTilesPerGroup;
      work.run(bh, first, std::min(nqt, first + kQueryTilesPerGroup), out, lse, q, k, v);
    }
  });
}

// The dot product of a and b (n), in 8 interleaved partial sums: a loop the compiler vectorizes
// (one sum's chain of dependent adds waited on each add's latency).
template <typename T>
T dot(const T* a, const T* b, int64_t n) {
  T part[8] = {};
  int64_t e = 0;
  for (; e + 8 <= n; e += 8)
    for (int j = 0; j < 8; ++j) part[j] += a[e + j] * b[e + j];
  for (; e < n; ++e) part[0] += a[e] * b[e];
  return ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
}

// Key tiles a backward task takes together against each query tile: the query side of a tile
// (Q, dO and their transposes, dQ's rows: 80 KiB at head size 64) is then read once per block of
// key tiles instead of once per key tile, while the block's K, V, dK and dV (64 KiB a tile, 512
// KiB for 8: Zen 3's L2) stay near. On the Zen 3 (T = 4096, 1 thread) 8 ran forward + backward
// in about 0.74 s, 4 in 0.85 s, 16 in 0.86-0.96 s. The sums keep their order (dQ over key tiles
// ascending, dK and dV over query tiles ascending), so the bits are those of one tile at a time.
constexpr int64_t kKeyTilesPerBlock = 8;

// The backward of one (batch, key / value head) task: its scratch, and the steps it runs.
template <typename T>
struct BackwardTask {
  static constexpr bool kT = std::is_same_v<T, float>;  // float32: transposed operands (see backward_impl)
  const TileOps<T> ops{};
  const AttentionParams& p;
  const int64_t E, Ev, L, S, group, nqt, nkt;
  const T scale;
  // float32: the scaled q and dO of each query head transposed per query tile (E x kBr, Ev x
  // kBr blocks, transpose_tiles), so that k q^T and v dO^T are gemm_rows products; k transposed
  // per key tile (kt) and dQ accumulated transposed (dqt, E x kBr blocks), so that dQ^T += K^T
  // dS^T takes dS^T as the products left it (dS K needed dS, a scalar transpose a tile)
  std::vector<T> qst, got, kt, dqt, qs, dd, st, pd, dpt, ds;
  // whether a key tile's rows of dK and dV, and a query tile's block of dQ (dQ^T), have had no
  // product yet: the first one stores (no zeroing beforehand), the later ones add
  std::vector<char> key_fresh, query_fresh;
  // this task's operands (set by start)
  int64_t b = 0, h0 = 0;
  const T *K = nullptr, *V = nullptr, *Q = nullptr, *GO = nullptr, *O = nullptr, *LSE = nullptr;
  T *dK = nullptr, *dV = nullptr, *dQ = nullptr;

  BackwardTask(const AttentionParams& params, int64_t E_, int64_t Ev_)
      : p(params), E(E_), Ev(Ev_), L(p.L), S(p.S), group(p.H / p.Hkv), nqt((L + kBr - 1) / kBr),
        nkt((S + kBc - 1) / kBc), scale(static_cast<T>(p.scale)),
        qst(kT ? static_cast<size_t>(group * nqt * E * kBr) : 0), got(kT ? static_cast<size_t>(group * nqt * Ev * kBr) : 0),
        kt(kT ? static_cast<size_t>(nkt * E * kBc) : 0), dqt(kT ? static_cast<size_t>(group * nqt * E * kBr) : 0),
        qs(static_cast<size_t>(group * L * E)), dd(static_cast<size_t>(group * L)), st(kBc * kBr),
        pd(p.dropout_p > 0 ? kBc * kBr : 0), dpt(kBc * kBr), ds(kT ? 0 : kBr * kBc), key_fresh(static_cast<size_t>(nkt)),
        query_fresh(static_cast<size_t>(group * nqt)) {}

  // Points at the task's heads, scales and transposes its queries and takes D = rowsum(dO * O).
  void start(int64_t task, T* dq, T* dk, T* dv, const T* go, const T* q, const T* k, const T* v, const T* out,
             const T* lse) {
    b = task / p.Hkv;
    h0 = (task % p.Hkv) * group;  // query heads h0 .. h0 + group, consecutive
    K = k + task * S * E;
    V = v + task * S * Ev;
    dK = dk + task * S * E;
    dV = dv + task * S * Ev;
    dQ = dq + (b * p.H + h0) * L * E;
    Q = q + (b * p.H + h0) * L * E;
    GO = go + (b * p.H + h0) * L * Ev;
    O = out + (b * p.H + h0) * L * Ev;
    LSE = lse + (b * p.H + h0) * L;
    ops.scale(qs.data(), Q, scale, group * L * E);
    if constexpr (kT) {
      for (int64_t g = 0; g < group; ++g) {
        transpose_tiles(qst.data() + g * nqt * E * kBr, kBr, qs.data() + g * L * E, L, E);
        transpose_tiles(got.data() + g * nqt * Ev * kBr, kBr, GO + g * L * Ev, L, Ev);
      }
      transpose_tiles(kt.data(), kBc, K, S, E);
    }
    for (int64_t r = 0; r < group * L; ++r)  // a fully masked row (output 0) takes no gradient
      dd[r] = std::isinf(LSE[r]) ? T(0) : dot(GO + r * Ev, O + r * Ev, Ev);
    std::fill(key_fresh.begin(), key_fresh.end(), char{1});
    std::fill(query_fresh.begin(), query_fresh.end(), char{1});
  }

  // c (m x n) = a b for a block's first product, c += a b after: the same chain of multiply-adds
  // as from a zeroed c (K is a tile's 64 at most, one of gemm_rows' slices), without zeroing the
  // gradients first (docs/kernels.md, "Attention")
  void accumulate(bool first, T* c, int64_t ldc, const T* a, int64_t lda, const T* b, int64_t ldb, int64_t m, int64_t n,
                  int64_t K) const {
    if (first) ops.gemm_nn(c, ldc, a, lda, b, ldb, m, n, K);
    else ops.gemm_nn_add(c, ldc, a, lda, b, ldb, m, n, K);
  }

  // Every live (query tile, key tile) pair, key tiles in blocks of kKeyTilesPerBlock.
  void run() {
    for (int64_t jb = 0; jb < S; jb += kKeyTilesPerBlock * kBc) {
      const int64_t jb_end = std::min(S, jb + kKeyTilesPerBlock * kBc);
      for (int64_t g = 0; g < group; ++g) {
        const Plane<T> plane(p, b * p.H + h0 + g);
        const int64_t i_start = p.causal ? jb / kBr * kBr : 0;  // causal: rows before jb see none of these keys
        for (int64_t i0 = i_start; i0 < L; i0 += kBr) {
          const int64_t br = std::min(kBr, L - i0);
          for (int64_t j0 = jb; j0 < jb_end; j0 += kBc) {
            const int64_t bc = std::min(kBc, S - j0);
            if (plane.tile_live(i0, br, j0, bc)) tile(plane, g, i0, br, j0, bc);
          }
        }
      }
    }
    for (int64_t j = 0; j < nkt; ++j)  // keys no query sees (all masked): zero gradients
      if (key_fresh[static_cast<size_t>(j)]) {
        const int64_t j1 = std::min(S, (j + 1) * kBc);
        std::fill(dK + j * kBc * E, dK + j1 * E, T(0));
        std::fill(dV + j * kBc * Ev, dV + j1 * Ev, T(0));
      }
    for (int64_t t = 0; t < group * nqt; ++t)  // queries that see no key
      if (query_fresh[static_cast<size_t>(t)]) {
        const int64_t g = t / nqt, i0 = t % nqt * kBr;  // (query head g's tile at row i0)
        if constexpr (kT) std::fill(dqt.begin() + t * E * kBr, dqt.begin() + (t + 1) * E * kBr, T(0));
        else std::fill(dQ + (g * L + i0) * E, dQ + (g * L + std::min(L, i0 + kBr)) * E, T(0));
      }
    if constexpr (kT) {  // dQ = scale (dQ^T)^T
      for (int64_t g = 0; g < group; ++g)
        for (int64_t i0 = 0; i0 < L; i0 += kBr)
          simd::table().transpose(dQ + (g * L + i0) * E, E, dqt.data() + (g * nqt + i0 / kBr) * E * kBr, kBr, E, std::min(kBr, L - i0));
    }
    ops.scale(dQ, dQ, scale, group * L * E);
  }

  // One tile: P^T recomputed from the log-sum-exp, then dV, dS, dK and dQ's parts.
  void tile(const Plane<T>& plane, int64_t g, int64_t i0, int64_t br, int64_t j0, int64_t bc) {
    if constexpr (kT)
      if (pd.empty() && plane.banded(i0, j0)) return diagonal_tile(plane, g, i0, br, j0, bc);
    const T* Kj = K + j0 * E;
    const T* Vj = V + j0 * Ev;
    const T* Qi = qs.data() + (g * L + i0) * E;
    const T* GOi = GO + (g * L + i0) * Ev;
    const T* lse_i = LSE + g * L + i0;
    const T* d_i = dd.data() + g * L + i0;
    // P^T (bc x br)
    const int64_t brp = std::min(kBr, round16(br));  // columns past L: left unread
    if constexpr (kT) ops.gemm_nn(st.data(), kBr, Kj, E, qst.data() + (g * nqt + i0 / kBr) * E * kBr, kBr, bc, brp, E);
    else ops.gemm_nt(st.data(), kBr, Kj, E, Qi, E, bc, br, E);
    if (plane.tile_masked(i0, j0, bc)) plane.mask_tile(st.data(), kBr, i0, br, j0, bc, true);
    ops.exp_minus_rows(st.data(), kBr, lse_i, bc, br);
    const T* pt = st.data();
    if (!pd.empty()) {
      for (int64_t c = 0; c < bc; ++c)
        for (int64_t r = 0; r < br; ++r) pd[c * kBr + r] = st[c * kBr + r] * plane.drop(i0 + r, j0 + c);
      pt = pd.data();
    }
    // dV_j += P^T dO_i
    char& kf = key_fresh[static_cast<size_t>(j0 / kBc)];
    char& qf = query_fresh[static_cast<size_t>(g * nqt + i0 / kBr)];
    accumulate(kf, dV + j0 * Ev, Ev, pt, kBr, GOi, Ev, bc, Ev, br);
    // dP^T = V_j dO_i^T, through the dropout; dS^T = P^T (dP^T - D)
    if constexpr (kT) ops.gemm_nn(dpt.data(), kBr, Vj, Ev, got.data() + (g * nqt + i0 / kBr) * Ev * kBr, kBr, bc, brp, Ev);
    else ops.gemm_nt(dpt.data(), kBr, Vj, Ev, GOi, Ev, bc, br, Ev);
    if (!pd.empty())
      for (int64_t c = 0; c < bc; ++c)
        for (int64_t r = 0; r < br; ++r) dpt[c * kBr + r] *= plane.drop(i0 + r, j0 + c);
    ops.softmax_grad_rows(dpt.data(), kBr, st.data(), d_i, bc, br);
    // dK_j += dS^T (Q_i scale)
    accumulate(kf, dK + j0 * E, E, dpt.data(), kBr, Qi, E, bc, E, br);
    kf = 0;
    // dQ_i += dS K_j (scaled at the end); float32 as dQ_i^T += K_j^T dS^T, the same products in
    // the same order (columns past L, as in P^T, left unread)
    if constexpr (kT) {
      accumulate(qf, dqt.data() + (g * nqt + i0 / kBr) * E * kBr, kBr, kt.data() + (j0 / kBc) * E * kBc, kBc, dpt.data(), kBr, E,
                 brp, bc);
    } else {
      for (int64_t r = 0; r < br; ++r)
        for (int64_t c = 0; c < bc; ++c) ds[r * kBc + c] = dpt[c * kBr + r];
      accumulate(qf, dQ + (g * L + i0) * E, E, ds.data(), kBc, Kj, E, br, E, bc);
    }
    qf = 0;
  }

  // A tile on a causal plane's diagonal (Plane::banded, no dropout) as tile() runs it, in bands:
  // key rows [c0, c0 + n) see the queries from c0 on only, so their products run over those
  // queries; dQ^T's columns [r0, r0 + n) take the keys before r0 + n only. The terms left out
  // are those of weights exactly 0; the rest are summed in the same order.
  void diagonal_tile(const Plane<T>& plane, int64_t g, int64_t i0, int64_t br, int64_t j0, int64_t bc) {
    static_assert(kBr == kBc, "a diagonal tile is square");
    const int64_t brp = std::min(kBr, round16(br)), tq = g * nqt + i0 / kBr;
    const T* Qi = qs.data() + (g * L + i0) * E;
    const T* GOi = GO + (g * L + i0) * Ev;
    char& kf = key_fresh[static_cast<size_t>(j0 / kBc)];
    char& qf = query_fresh[static_cast<size_t>(tq)];
    int64_t c_end = 0;  // key rows [0, c_end) in bands
    for (int64_t c0 = 0; c0 < std::min(bc, br); c0 += kBand) {
      const int64_t n = std::min(kBand, bc - c0), nq = br - c0;
      T* pt = st.data() + c0 * kBr + c0;  // P^T's band, from query c0 on
      T* dst = dpt.data() + c0 * kBr + c0;
      ops.gemm_nn(pt, kBr, K + (j0 + c0) * E, E, qst.data() + tq * E * kBr + c0, kBr, n, brp - c0, E);
      plane.mask_tile(st.data() + c0 * kBr, kBr, i0, br, j0 + c0, n, true);
      ops.exp_minus_rows(pt, kBr, LSE + g * L + i0 + c0, n, nq);
      accumulate(kf, dV + (j0 + c0) * Ev, Ev, pt, kBr, GOi + c0 * Ev, Ev, n, Ev, nq);
      ops.gemm_nn(dst, kBr, V + (j0 + c0) * Ev, Ev, got.data() + tq * Ev * kBr + c0, kBr, n, brp - c0, Ev);
      ops.softmax_grad_rows(dst, kBr, pt, dd.data() + g * L + i0 + c0, n, nq);
      accumulate(kf, dK + (j0 + c0) * E, E, dst, kBr, Qi + c0 * E, E, n, E, nq);
      c_end = c0 + n;
    }
    if (kf) {  // key rows past the last band (L < S) see no query of this tile
      std::fill(dK + (j0 + c_end) * E, dK + (j0 + bc) * E, T(0));
      std::fill(dV + (j0 + c_end) * Ev, dV + (j0 + bc) * Ev, T(0));
    }
    kf = 0;
    const T* ktile = kt.data() + (j0 / kBc) * E * kBc;
    for (int64_t r0 = 0; r0 < brp; r0 += kBand) {
      const int64_t n = std::min(kBand, brp - r0);
      accumulate(qf, dqt.data() + tq * E * kBr + r0, kBr, ktile, kBc, dpt.data() + r0, kBr, E, n, std::min(bc, r0 + n));
    }
    qf = 0;
  }
};

template <typename T>
void backward_impl(T* dq, T* dk, T* dv, const T* go, const T* q, const T* k, const T* v, const T* out, const T* lse,
                   const AttentionParams& p, int64_t E, int64_t Ev) {
  parallel_range(0, p.B * p.Hkv, 1, [&](int64_t t0, int64_t t1) {
    BackwardTask<T> work(p, E, Ev);
    for (int64_t task = t0; task < t1; ++task) {
      work.start(task, dq, dk, dv, go, q, k, v, out, lse);
      work.run();
    }
  });
}

// Rows of n values padded with zeros to np (np >= n).
Tensor pad_rows(const Tensor& x, int64_t n, int64_t np) {
  if (n == np) return x;
  const int64_t rows = x.numel() / n;
  Tensor y = detail::alloc({rows, np}, x.dtype(), x.device());
  const float* s = static_cast<const float*>(x.data_ptr());
  float* d = static_cast<float*>(y.data_ptr());
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(d + r * np, s + r * n, static_cast<size_t>(n) * sizeof(float));
    std::fill(d + r * np + n, d + (r + 1) * np, 0.0f);
  }
  return y;
}

// The first n of each row of np values copied into dst (rows of n).
void unpad_rows(const Tensor& dst, const Tensor& x, int64_t n, int64_t np) {
  if (n == np) return;
  const int64_t rows = dst.numel() / n;
  const float* s = static_cast<const float*>(x.data_ptr());
  float* d = static_cast<float*>(dst.data_ptr());
  for (int64_t r = 0; r < rows; ++r) std::memcpy(d + r * n, s + r * np, static_cast<size_t>(n) * sizeof(float));
}

// The forward's padded rows (packed, np values each) copied into out, rows of p.Ev laid out as
// p says (out_row).
void unpad_out(const Tensor& out, const Tensor& x, const AttentionParams& p, int64_t np) {
  const float* s = static_cast<const float*>(x.data_ptr());
  float* d = static_cast<float*>(out.data_ptr());
  for (int64_t bh = 0; bh < p.B * p.H; ++bh)
    for (int64_t i = 0; i < p.L; ++i)
      std::memcpy(d + out_row(p, bh, i) * p.Ev, s + (bh * p.L + i) * np, static_cast<size_t>(p.Ev) * sizeof(float));
}

// float32 head sizes padded to the vector width gemm_rows wants.
int64_t padded(int64_t n) {
  const int64_t w = simd::table().lanes;
  return (n + w - 1) / w * w;
}

}  // namespace

void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionParams& p) {
  detail::dispatch_float(q.dtype(), "scaled_dot_product_attention", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      const int64_t Ep = padded(p.E), Evp = padded(p.Ev);
      // padding rewrites the rows: spaced planes are packed first
      const Tensor kk = Ep != p.E ? detail::contiguous_raw(k) : k, vv = Evp != p.Ev ? detail::contiguous_raw(v) : v;
      const int64_t ks = Ep == p.E && p.k_plane_stride ? p.k_plane_stride : p.S * Ep;
      const int64_t vs = Evp == p.Ev && p.v_plane_stride ? p.v_plane_stride : p.S * Evp;
      const Tensor qp = pad_rows(q, p.E, Ep), kp = pad_rows(kk, p.E, Ep), vp = pad_rows(vv, p.Ev, Evp);
      const Tensor op = Evp == p.Ev ? out : detail::alloc({out.numel() / p.Ev, Evp}, out.dtype(), out.device());
      AttentionParams packed = p;  // padded rows go to a packed buffer first, then to out's layout
      packed.out_heads_inner = Evp == p.Ev && p.out_heads_inner;
      forward_impl<float>(static_cast<float*>(op.data_ptr()), static_cast<float*>(lse.data_ptr()),
                          static_cast<const float*>(qp.data_ptr()), static_cast<const float*>(kp.data_ptr()),
                          static_cast<const float*>(vp.data_ptr()), packed, Ep, Evp, ks, vs);
      if (Evp != p.Ev) unpad_out(out, op, p, Evp);
    } else {
      forward_impl<T>(static_cast<T*>(out.data_ptr()), static_cast<T*>(lse.data_ptr()), static_cast<const T*>(q.data_ptr()),
                      static_cast<const T*>(k.data_ptr()), static_cast<const T*>(v.data_ptr()), p, p.E, p.Ev,
                      p.k_plane_stride ? p.k_plane_stride : p.S * p.E, p.v_plane_stride ? p.v_plane_stride : p.S * p.Ev);
    }
  });
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& gout, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, const AttentionParams& p) {
  detail::dispatch_float(q.dtype(), "scaled_dot_product_attention", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      const int64_t Ep = padded(p.E), Evp = padded(p.Ev);
      const Tensor qp = pad_rows(q, p.E, Ep), kp = pad_rows(k, p.E, Ep), vp = pad_rows(v, p.Ev, Evp);
      const Tensor gp = pad_rows(gout, p.Ev, Evp), op = pad_rows(out, p.Ev, Evp);
      auto grad_buf = [](const Tensor& g, int64_t n, int64_t np) {
        return n == np ? g : detail::alloc({g.numel() / n, np}, g.dtype(), g.device());
      };
      const Tensor dqp = grad_buf(dq, p.E, Ep), dkp = grad_buf(dk, p.E, Ep), dvp = grad_buf(dv, p.Ev, Evp);
      backward_impl<float>(static_cast<float*>(dqp.data_ptr()), static_cast<float*>(dkp.data_ptr()),
                           static_cast<float*>(dvp.data_ptr()), static_cast<const float*>(gp.data_ptr()),
                           static_cast<const float*>(qp.data_ptr()), static_cast<const float*>(kp.data_ptr()),
                           static_cast<const float*>(vp.data_ptr()), static_cast<const float*>(op.data_ptr()),
                           static_cast<const float*>(lse.data_ptr()), p, Ep, Evp);
      unpad_rows(dq, dqp, p.E, Ep);
      unpad_rows(dk, dkp, p.E, Ep);
      unpad_rows(dv, dvp, p.Ev, Evp);
    } else {
      backward_impl<T>(static_cast<T*>(dq.data_ptr()), static_cast<T*>(dk.data_ptr()), static_cast<T*>(dv.data_ptr()),
                       static_cast<const T*>(gout.data_ptr()), static_cast<const T*>(q.data_ptr()),
                       static_cast<const T*>(k.data_ptr()), static_cast<const T*>(v.data_ptr()),
                       static_cast<const T*>(out.data_ptr()), static_cast<const T*>(lse.data_ptr()), p, p.E, p.Ev);
    }
  });
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/attention.cpp), with its signature, which the slot checks.
void add_attention_flash_kernels(detail::Backend& b) {
  b.kernels.fill("attention.attention_forward", &cpu::attention_forward);
  b.kernels.fill("attention.attention_backward", &cpu::attention_backward);
}

}  // namespace loom::cpu
