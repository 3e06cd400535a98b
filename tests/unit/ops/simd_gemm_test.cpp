// The batch-invariant product block (src/ops/cpu/simd/gemm.inc, Table::gemm_rows) on every
// build the CPU can run, against the arithmetic it promises: each slice of simd::kGemmSlice k
// one chain of multiply-adds from zero in the order of k, the slices' sums added to the first
// in order. The one- and two-row paths (which stream b) and the register tiles must give those
// bits alike, and so must a product split at the slices' edges (matmul.cpp's one-row path).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/cpu/simd/simd.h"
#include "unit/ops/simd_tables.h"

namespace simd = loom::cpu::simd;

namespace {

bool fused_build(const simd::Table& t) { return std::string(t.isa) != "baseline"; }

// Element (i, j) by the rule, as the build rounds (fused or a multiply and an add).
float by_the_rule(const simd::Table& t, const std::vector<float>& a, int64_t lda, const std::vector<float>& b, int64_t ldb,
                  int64_t i, int64_t j, int64_t K) {
  float total = 0;
  for (int64_t k0 = 0; k0 < K; k0 += simd::kGemmSlice) {
    float chain = 0;
    for (int64_t k = k0; k < K && k < k0 + simd::kGemmSlice; ++k) {
      const float x = a[i * lda + k], y = b[k * ldb + j];
      chain = fused_build(t) ? std::fma(x, y, chain) : chain + x * y;
    }
    total = k0 == 0 ? chain : total + chain;
  }
  return total;
}

}  // namespace

TEST(SimdGemm, GemmRowsSumsEachSliceOfKInAChainThenTheSlicesInOrder) {
  for (const simd::Table* t : runnable_tables()) {
    const int64_t w = t->lanes;
    for (int64_t m : {1, 2, 3, 5, 8, 9, 13})
      for (int64_t n : {w, 3 * w, int64_t{2048 + 64}})
        for (int64_t K : {int64_t{0}, int64_t{1}, int64_t{9}, simd::kGemmSlice - 1, simd::kGemmSlice, simd::kGemmSlice + 1,
                          int64_t{300}, int64_t{784}}) {
          if (m > 3 && n > 1000 && K > 300) continue;  // (the largest cases: one to three rows)
          const int64_t lda = K + 3, ldb = n + w, ldc = n + 2 * w;
          const std::vector<float> a = random_floats(m * lda, static_cast<uint32_t>(m * 7 + K)),
                                   b = random_floats(K * ldb, static_cast<uint32_t>(n * 11 + K));
          std::vector<float> c = random_floats(m * ldc, static_cast<uint32_t>(m + n + K)), c0 = c;
          t->gemm_rows(c.data(), ldc, a.data(), lda, b.data(), ldb, m, n, K);
          const std::string what = std::string(t->isa) + " m " + std::to_string(m) + " n " + std::to_string(n) + " K " +
                                   std::to_string(K);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < ldc; ++j) {
              if (j >= n) {
                ASSERT_EQ(c[i * ldc + j], c0[i * ldc + j]) << what << ": wrote past column n";
                continue;
              }
              const float want = by_the_rule(*t, a, lda, b, ldb, i, j, K);
              // (baseline: a multiply and an add, which the compiler may order its own way)
              if (fused_build(*t))
                ASSERT_EQ(c[i * ldc + j], want) << what << " at " << i << ", " << j;
              else
                ASSERT_NEAR(c[i * ldc + j], want, 1e-4 * (1 + std::fabs(want))) << what << " at " << i << ", " << j;
            }
          // the last row alone (the streaming path) and the product cut at a slice's edge, its
          // second part's sums added: the same bits
          std::vector<float> row(static_cast<size_t>(n)), rest(static_cast<size_t>(n));
          t->gemm_rows(row.data(), n, a.data() + (m - 1) * lda, lda, b.data(), ldb, 1, n, K);
          if (K > simd::kGemmSlice) {
            std::vector<float> first(static_cast<size_t>(n));
            t->gemm_rows(first.data(), n, a.data() + (m - 1) * lda, lda, b.data(), ldb, 1, n, simd::kGemmSlice);
            t->gemm_rows(rest.data(), n, a.data() + (m - 1) * lda + simd::kGemmSlice, lda, b.data() + simd::kGemmSlice * ldb,
                         ldb, 1, n, K - simd::kGemmSlice);
            // (the rest's own slices are added in order inside it; cut at the first edge only,
            // the sums agree when the rest is one slice)
            if (K - simd::kGemmSlice <= simd::kGemmSlice)
              for (int64_t j = 0; j < n; ++j) ASSERT_EQ(first[j] + rest[j], row[j]) << what << " cut at the first slice";
          }
          for (int64_t j = 0; j < n; ++j) ASSERT_EQ(row[j], c[(m - 1) * ldc + j]) << what << ": the last row alone";
        }
  }
}
