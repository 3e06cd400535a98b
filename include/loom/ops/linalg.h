#pragma once
#include <optional>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/error.h"
#include "loom/core/tensor.h"

namespace loom {

// numpy.matmul: 1-d operands are promoted and squeezed back, batch axes broadcast.
LOOM_API Tensor matmul(const Tensor& a, const Tensor& b);
// matmul(x, w) + bias for x (..., K), w (K, N) and bias (N,) (a Linear layer; PyTorch's addmm
// with the operands in this order): bit for bit the two ops, values and gradients, with the
// bias added inside the product for float32 on the CPU (each block of rows while it is in
// cache, instead of another pass over the output).
LOOM_API Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias);
LOOM_API Tensor dot(const Tensor& a, const Tensor& b);    // numpy.dot for 1-d and 2-d operands
LOOM_API Tensor outer(const Tensor& a, const Tensor& b);  // of the flattened operands
LOOM_API Tensor tensordot(const Tensor& a, const Tensor& b, int64_t axes = 2);
LOOM_API Tensor tensordot(const Tensor& a, const Tensor& b, const Axes& axes_a, const Axes& axes_b);
// numpy.kron / torch.kron: the Kronecker product, the lower-rank operand padded with leading 1s.
LOOM_API Tensor kron(const Tensor& a, const Tensor& b);
// numpy.einsum / torch.einsum: "ij,jk->ik", implicit output ("ij,jk": the labels used once, sorted),
// repeated labels (diagonals, traces), "..." (broadcast axes). Three or more operands are
// contracted pairwise, greedily by the smallest intermediate (docs/ops.md).
LOOM_API Tensor einsum(const std::string& subscripts, const std::vector<Tensor>& operands);

// torch.linalg.LinAlgError: the matrix has no result of the kind asked for (solve/inv of a
// singular matrix, cholesky of one that is not positive-definite, no convergence). The message
// names the op, the batch item and what failed.
class LOOM_API LinAlgError : public ValueError {
  using ValueError::ValueError;
};

// torch.linalg (and numpy.linalg) on float32/float64 matrices in the last two axes, batched over
// the leading ones (CPU: LAPACK). Gradients as PyTorch's (docs/ops.md#linear-algebra).
namespace linalg {

// torch.linalg.norm. Vector norms (one axis, or a 1-d input): ord = p (any real), inf, -inf, 0
// (count of non-zeros); no ord and no axes: the 2-norm of the flattened input. Matrix norms
// (two axes, or a 2-d input with an ord): ord = 1, -1, 2, -2, inf, -inf, or "fro" / "nuc".
LOOM_API Tensor norm(const Tensor& x, std::optional<double> ord = std::nullopt, std::optional<Axes> axes = std::nullopt,
            bool keepdims = false);
LOOM_API Tensor norm(const Tensor& x, const std::string& ord, std::optional<Axes> axes = std::nullopt, bool keepdims = false);

struct LOOM_API SVD {
  Tensor U, S, Vh;  // a = U @ diag(S) @ Vh, S descending
};
// full_matrices = false: U (..., m, k), Vh (..., k, n) with k = min(m, n) (differentiable for
// distinct singular values); true: U (..., m, m), Vh (..., n, n) (gradients only when m == n).
LOOM_API SVD svd(const Tensor& a, bool full_matrices = true);
LOOM_API Tensor svdvals(const Tensor& a);  // S alone (its gradient needs no distinct values)

struct LOOM_API QR {
  Tensor Q, R;  // reduced: Q (..., m, k) with orthonormal columns, R (..., k, n) upper triangular
};
LOOM_API QR qr(const Tensor& a);

struct LOOM_API Eigh {
  Tensor eigenvalues, eigenvectors;  // ascending; a = V diag(w) V^T
};
// Symmetric a, read from its lower triangle (UPLO "L") or upper one ("U").
LOOM_API Eigh eigh(const Tensor& a, const std::string& uplo = "L");
LOOM_API Tensor eigvalsh(const Tensor& a, const std::string& uplo = "L");

// a = L L^T (upper: a = U^T U), from a's lower (upper) triangle; LinAlgError when a is not
// positive-definite.
LOOM_API Tensor cholesky(const Tensor& a, bool upper = false);
// x with a @ x = b: b (..., n, k), or (..., n) as a batch of vectors when its shape is a's
// without the last axis (torch's rule); batch axes broadcast. LinAlgError when a is singular.
LOOM_API Tensor solve(const Tensor& a, const Tensor& b);
LOOM_API Tensor inv(const Tensor& a);
LOOM_API Tensor det(const Tensor& a);
struct LOOM_API SlogDet {
  Tensor sign, logabsdet;  // det = sign * exp(logabsdet); a singular matrix: 0, -inf
};
LOOM_API SlogDet slogdet(const Tensor& a);
// The minimum-norm least-squares solution of a @ x = b (torch.linalg.lstsq(...).solution, the
// driver "gelsd"): singular values below rcond * max(s) count as zero; rcond defaults to
// eps(dtype) * max(m, n). Gradients for full-rank a.
LOOM_API Tensor lstsq(const Tensor& a, const Tensor& b, std::optional<double> rcond = std::nullopt);

}  // namespace linalg

}  // namespace loom
