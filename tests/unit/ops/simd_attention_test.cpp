// The fused attention kernel's table entries (src/ops/cpu/simd/attention.inc, gemm.inc's
// gemm_rows_add), on every build the CPU can run: the accumulating product against the chain of
// multiply-adds it promises, and the tile passes against the per-row table calls they replaced
// (bit for bit) or a float64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ops/cpu/simd/simd.h"
#include "unit/ops/simd_tables.h"

namespace simd = loom::cpu::simd;

namespace {

bool fused_build(const simd::Table& t) { return std::string(t.isa) != "baseline"; }

}  // namespace

// c += a b: each element's chain starts from c and takes a[i][k] b[k][j] for k in order, one
// (fused, on the FMA builds) multiply-add each; so a row's bits do not depend on how many rows
// came with it, and the b slices that are packed (large) and those that are not (16 KiB or less)
// give the same bits.
TEST(SimdAttention, GemmRowsAddContinuesEachElementsChainFromC) {
  for (const simd::Table* t : runnable_tables()) {
    const int64_t w = t->lanes;
    for (int64_t m : {1, 2, 3, 7, 13, 64})
      for (int64_t n : {w, 2 * w, 3 * w, int64_t{64}})
        for (int64_t K : {1, 5, 64, 300}) {
          const int64_t lda = K + 3, ldb = n + w, ldc = n + 2 * w;
          const std::vector<float> a = random_floats(m * lda, static_cast<uint32_t>(m * 7 + K)),
                                   b = random_floats(K * ldb, static_cast<uint32_t>(n * 11 + K));
          std::vector<float> c = random_floats(m * ldc, static_cast<uint32_t>(m + n + K)), c0 = c;
          t->gemm_rows_add(c.data(), ldc, a.data(), lda, b.data(), ldb, m, n, K);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < ldc; ++j) {
              const float got = c[i * ldc + j];
              if (j >= n) {
                ASSERT_EQ(got, c0[i * ldc + j]) << t->isa << " wrote past column n";
                continue;
              }
              float chain = c0[i * ldc + j];
              double exact = chain;
              for (int64_t k = 0; k < K; ++k) {
                const float x = a[i * lda + k], y = b[k * ldb + j];
                chain = fused_build(*t) ? std::fma(x, y, chain) : chain + x * y;
                exact += static_cast<double>(x) * y;
              }
              if (fused_build(*t))
                ASSERT_EQ(got, chain) << t->isa << " m " << m << " n " << n << " K " << K << " at " << i << ", " << j;
              else
                ASSERT_NEAR(got, exact, 1e-4 * (1 + std::fabs(exact))) << t->isa << " m " << m << " n " << n << " K " << K;
            }
          // the last row alone: the same bits as within the block
          std::vector<float> row(c0.begin() + (m - 1) * ldc, c0.begin() + m * ldc);
          t->gemm_rows_add(row.data(), ldc, a.data() + (m - 1) * lda, lda, b.data(), ldb, 1, n, K);
          for (int64_t j = 0; j < n; ++j) ASSERT_EQ(row[j], c[(m - 1) * ldc + j]) << t->isa << " m " << m << " K " << K;
        }
  }
}

// The online softmax's step against float64: new max, rescale, exponentials in place, sums, and
// the accumulator's rows rescaled; a row masked so far (all -inf, running max -inf) becomes zeros
// and keeps its state.
TEST(SimdAttention, OnlineSoftmaxRowsTakesOneStepForEveryRow) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (const simd::Table* t : runnable_tables()) {
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{t->lanes}, int64_t{64}, int64_t{67}}) {
      const int64_t rows = 5, lds = n + 3, nacc = 2 * t->lanes, ldacc = nacc + 1;
      std::vector<float> s = random_floats(rows * lds, static_cast<uint32_t>(n), -6, 6);
      for (int64_t c = 0; c < n; ++c) s[2 * lds + c] = ninf;     // row 2: masked throughout
      if (n > 1) s[1 * lds + n - 1] = ninf;                      // row 1: one masked position
      std::vector<float> m = {0.5f, ninf, ninf, 7.0f, -3.0f}, l = {2.0f, 0.0f, 0.0f, 1.5f, 4.0f};
      std::vector<float> acc = random_floats(rows * ldacc, static_cast<uint32_t>(n + 1));
      const std::vector<float> s0 = s, m0 = m, l0 = l, acc0 = acc;
      t->online_softmax_rows(s.data(), lds, rows, n, m.data(), l.data(), acc.data(), ldacc, nacc);
      for (int64_t r = 0; r < rows; ++r) {
        double rm = ninf;
        for (int64_t c = 0; c < n; ++c) rm = std::max<double>(rm, s0[r * lds + c]);
        const double mn = std::max<double>(m0[r], rm);
        if (mn == ninf) {
          for (int64_t c = 0; c < n; ++c) ASSERT_EQ(s[r * lds + c], 0.0f) << t->isa;
          ASSERT_EQ(m[r], m0[r]);
          ASSERT_EQ(l[r], l0[r]);
          for (int64_t j = 0; j < nacc; ++j) ASSERT_EQ(acc[r * ldacc + j], acc0[r * ldacc + j]);
          continue;
        }
        const double alpha = std::exp(m0[r] - mn);
        double sum = 0;
        for (int64_t c = 0; c < n; ++c) {
          const double e = std::exp(s0[r * lds + c] - mn);
          sum += e;
          ASSERT_NEAR(s[r * lds + c], e, 2e-7 * (1 + e)) << t->isa << " n " << n << " row " << r;
        }
        for (int64_t c = n; c < lds; ++c) ASSERT_EQ(s[r * lds + c], s0[r * lds + c]) << "past n";
        ASSERT_EQ(m[r], static_cast<float>(mn));
        ASSERT_NEAR(l[r], l0[r] * alpha + sum, 1e-5 * (l0[r] * alpha + sum)) << t->isa << " n " << n << " row " << r;
        for (int64_t j = 0; j < ldacc; ++j) {
          const double want = j < nacc ? acc0[r * ldacc + j] * alpha : acc0[r * ldacc + j];
          ASSERT_NEAR(acc[r * ldacc + j], want, 1e-6 * (1 + std::fabs(want))) << t->isa << " n " << n << " row " << r;
        }
      }
    }
  }
}

// The backward's passes, a tile per call, give the bits of the per-row table calls they replaced:
// x = exp(x - sub) as a subtract then exp, dp = (dp - d) p as a subtract then multiply.
TEST(SimdAttention, TilePassesEqualTheRowByRowCalls) {
  for (const simd::Table* t : runnable_tables()) {
    for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{t->lanes}, int64_t{2 * t->lanes + 5}, int64_t{64}}) {
      const int64_t rows = 4, ld = n + 2;
      const std::vector<float> x0 = random_floats(rows * ld, static_cast<uint32_t>(3 * n), -5, 1),
                               sub = random_floats(n, static_cast<uint32_t>(5 * n), -1, 1),
                               p = random_floats(rows * ld, static_cast<uint32_t>(7 * n), 0, 1);
      std::vector<float> x = x0, want = x0;
      t->exp_minus_rows(x.data(), ld, sub.data(), rows, n);
      for (int64_t r = 0; r < rows; ++r) {
        t->binary_vv[simd::kSub](want.data() + r * ld, want.data() + r * ld, sub.data(), n);
        t->unary[simd::kExp](want.data() + r * ld, want.data() + r * ld, n);
      }
      ASSERT_EQ(x, want) << t->isa << " exp_minus_rows n " << n;
      x = x0, want = x0;
      t->softmax_grad_rows(x.data(), ld, p.data(), sub.data(), rows, n);
      for (int64_t r = 0; r < rows; ++r) {
        t->binary_vv[simd::kSub](want.data() + r * ld, want.data() + r * ld, sub.data(), n);
        t->binary_vv[simd::kMul](want.data() + r * ld, want.data() + r * ld, p.data() + r * ld, n);
      }
      ASSERT_EQ(x, want) << t->isa << " softmax_grad_rows n " << n;
    }
  }
}
