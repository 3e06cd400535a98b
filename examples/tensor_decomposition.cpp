// Tensor decompositions with loom::einsum and loom::linalg (the TensorLy use case): a planted
// low-rank 3-way tensor plus a little noise is decomposed two ways.
//
//   CP (CANDECOMP/PARAFAC) by alternating least squares: T ~ sum_r a_r (x) b_r (x) c_r.
//     Each step solves for one factor with the others fixed: a linear least-squares problem
//     whose normal equations are A (B^T B * C^T C) = T_(1) (C (.) B), written with einsum.
//   Tucker by the higher-order SVD: each factor U_n holds the leading left singular vectors
//     of the mode-n unfolding, and the core is T x1 U1^T x2 U2^T x3 U3^T.
//
// It checks what a test would: the relative reconstruction errors are at the noise level, the
// CP components found are the planted ones (up to order and scale), and each unfolding has
// exactly `rank` singular values above the noise. Exits 1 when a check fails.
#include <loom/loom.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

using namespace loom;

namespace {

constexpr int64_t I = 10, J = 12, K = 8, kRank = 3;
constexpr double kNoise = 1e-4;

// ||a - b|| / ||b|| (Frobenius)
double relative_error(const Tensor& a, const Tensor& b) {
  return linalg::norm(subtract(a, b)).item<double>() / linalg::norm(b).item<double>();
}

Tensor cp_tensor(const Tensor& A, const Tensor& B, const Tensor& C) { return einsum("ir,jr,kr->ijk", {A, B, C}); }

// One factor of CP-ALS: the least-squares update of the factor of mode `m` given the other two.
Tensor als_update(const Tensor& T, const std::vector<Tensor>& f, int m) {
  static const char* rhs[] = {"ijk,jr,kr->ir", "ijk,ir,kr->jr", "ijk,ir,jr->kr"};
  std::vector<Tensor> others;
  for (int n = 0; n < 3; ++n)
    if (n != m) others.push_back(f[n]);
  Tensor M = einsum(rhs[m], {T, others[0], others[1]});                         // T_(m) (Khatri-Rao product)
  Tensor G = multiply(matmul(transpose(others[0]), others[0]), matmul(transpose(others[1]), others[1]));  // Gram
  return transpose(linalg::solve(G, transpose(M)));                              // M G^-1 (G is symmetric)
}

// |cosine| between column r of X and column s of Y
double congruence(const Tensor& X, int64_t r, const Tensor& Y, int64_t s) {
  Tensor x = X.index({Slice(), r}), y = Y.index({Slice(), s});
  return std::abs(dot(x, y).item<double>()) / (linalg::norm(x).item<double>() * linalg::norm(y).item<double>());
}

Tensor unfold(const Tensor& T, int64_t mode) {
  Tensor t = moveaxis(T, mode, 0);
  return reshape(t, {t.shape()[0], -1});
}

}  // namespace

int main() {
  manual_seed(7);
  // the planted tensor: rank 3, plus noise of relative size ~1e-4
  std::vector<Tensor> truth = {randn({I, kRank}, Float64), randn({J, kRank}, Float64), randn({K, kRank}, Float64)};
  Tensor clean = cp_tensor(truth[0], truth[1], truth[2]);
  Tensor T = add(clean, randn({I, J, K}, Float64) * (kNoise * linalg::norm(clean).item<double>() / std::sqrt(double(I * J * K))));
  bool ok = true;

  // ---- CP by alternating least squares
  std::vector<Tensor> f = {randn({I, kRank}, Float64), randn({J, kRank}, Float64), randn({K, kRank}, Float64)};
  double err = 1, previous = 2;
  int it = 0;
  for (; it < 500 && previous - err > 1e-12; ++it) {
    for (int m = 0; m < 3; ++m) f[m] = als_update(T, f, m);
    previous = err;
    err = relative_error(cp_tensor(f[0], f[1], f[2]), T);
  }
  // match each planted component with the recovered one that fits it best (all orders of 3)
  std::vector<int64_t> perm(kRank), best_perm;
  std::iota(perm.begin(), perm.end(), 0);
  double best = 0;
  do {
    double worst = 1;
    for (int64_t r = 0; r < kRank; ++r)
      for (int m = 0; m < 3; ++m) worst = std::min(worst, congruence(truth[m], r, f[m], perm[r]));
    if (worst > best) best = worst, best_perm = perm;
  } while (std::next_permutation(perm.begin(), perm.end()));
  std::printf("CP-ALS: rank %lld, %d sweeps, relative error %.2e, worst component congruence %.6f\n",
              static_cast<long long>(kRank), it, err, best);
  ok = ok && err < 10 * kNoise && best > 0.999;

  // ---- Tucker by HOSVD
  std::vector<Tensor> U;
  for (int64_t m = 0; m < 3; ++m) {
    auto s = linalg::svd(unfold(T, m), false);
    const double gap = s.S.index({kRank}).item<double>() / s.S.index({kRank - 1}).item<double>();
    std::printf("HOSVD: mode %lld singular values s[%lld] / s[%lld] = %.2e (rank %lld above the noise)\n",
                static_cast<long long>(m), static_cast<long long>(kRank), static_cast<long long>(kRank - 1), gap,
                static_cast<long long>(kRank));
    ok = ok && gap < 1e-2;
    U.push_back(slice(s.U, 1, 0, kRank));  // the leading kRank left singular vectors
  }
  Tensor core = einsum("ijk,ia,jb,kc->abc", {T, U[0], U[1], U[2]});
  Tensor tucker = einsum("abc,ia,jb,kc->ijk", {core, U[0], U[1], U[2]});
  const double terr = relative_error(tucker, T);
  std::printf("Tucker (HOSVD): core %s, relative error %.2e\n", shape_str(core.shape()).c_str(), terr);
  ok = ok && terr < 10 * kNoise;

  std::printf(ok ? "ok\n" : "FAILED\n");
  return ok ? 0 : 1;
}
