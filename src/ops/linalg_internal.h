#pragma once
// Helpers shared by the linear-algebra ops (linalg_*.cpp, einsum.cpp): matrix pieces built from
// differentiable ops (so that gradients of gradients work), operand checks, and the copies into
// LAPACK's column-major layout.
#include <string>

#include "loom/core/tensor.h"

namespace loom::detail {

Tensor mT(const Tensor& x);                 // swapaxes(x, -1, -2)
Tensor diag_embed(const Tensor& v);         // (..., n) -> (..., n, n) with v on the diagonal
Tensor diagonal(const Tensor& x);           // (..., n, n) -> (..., n)
Tensor tril(const Tensor& x, int64_t k = 0);  // zero above diagonal k (numpy.tril)
Tensor triu(const Tensor& x, int64_t k = 0);

// Checks an operand of a linalg op: defined, float32/float64, at least 2-d, square when asked;
// sizes LAPACK can index (32-bit). Throws DTypeError / ShapeError / ValueError naming `op`.
void check_matrix(const Tensor& a, const char* op, bool square);

// A new contiguous (batch, cols, rows) tensor of dtype `dt` holding each matrix of
// x (..., rows, cols) column by column: LAPACK's layout (a copy, since LAPACK overwrites it).
Tensor lapack_copy(const Tensor& x, DType dt);
// The (batch_shape..., rows, cols) view of matrices stored column by column in `buf`, the
// matrix b starting at b * matrix_stride with leading dimension ld (no autograd).
Tensor lapack_view(const Tensor& buf, const Shape& batch_shape, int64_t rows, int64_t cols, int64_t ld,
                   int64_t matrix_stride);

}  // namespace loom::detail
