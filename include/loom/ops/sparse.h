#pragma once
// SparseTensor: a small value handle (copies share the arrays, as Tensor's) to a sparse tensor
// in COO form (indices int64 (ndim, nnz), values (nnz,)) or, for 2-d, CSR form (crow_indices
// (rows + 1,), col_indices (nnz,), values (nnz,)), with float32 or float64 values. Conversions
// to and from dense tensors, coalescing, and sparse x dense matmul with gradients for the dense
// operand and for the values (docs/sparse.md).
#include <cstdint>
#include <memory>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom {

enum class SparseLayout : uint8_t { COO, CSR };

class LOOM_API SparseTensor {
 public:
  SparseTensor() = default;

  // Validated creation (ShapeError / DTypeError / IndexError naming what is wrong and what is
  // valid): indices int32/int64 (ndim, nnz) with every index in [0, shape[d]); values float32 or
  // float64 of shape (nnz,); shape of non-negative sizes whose product fits int64. The arrays are
  // kept (int64, contiguous), so `values` keeps its autograd identity: gradients of ops on the
  // sparse tensor flow to it. Duplicate indices are allowed (they add up) until coalesce().
  static SparseTensor coo(const Tensor& indices, const Tensor& values, const Shape& shape);
  // 2-d CSR: crow_indices (rows + 1,) non-decreasing from 0 to nnz, col_indices (nnz,) in
  // [0, cols), values (nnz,).
  static SparseTensor csr(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                          const Shape& shape);
  // The non-zero elements of a float32/float64 tensor (row-major order: already coalesced).
  // CSR needs a 2-d tensor.
  static SparseTensor from_dense(const Tensor& dense, SparseLayout layout = SparseLayout::COO);

  bool defined() const { return impl_ != nullptr; }
  SparseLayout layout() const;
  const Shape& shape() const;
  int64_t ndim() const;
  DType dtype() const;
  int64_t nnz() const;
  const Tensor& values() const;
  const Tensor& indices() const;       // COO only (ValueError for CSR)
  const Tensor& crow_indices() const;  // CSR only
  const Tensor& col_indices() const;   // CSR only
  // COO: sorted in row-major order without duplicates. CSR: columns sorted within each row,
  // no duplicates.
  bool is_coalesced() const;

  // Duplicates summed and entries sorted in row-major order (the layout is kept). The new values
  // are differentiable functions of the old ones.
  SparseTensor coalesce() const;
  Tensor to_dense() const;          // duplicates add up; differentiable in values()
  SparseTensor to_coo() const;      // CSR -> COO (row-major order); itself when COO
  SparseTensor to_csr() const;      // 2-d only; COO is coalesced first; itself when CSR

  struct Impl;
  const std::shared_ptr<const Impl>& impl() const { return impl_; }

 private:
  explicit SparseTensor(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// torch.sparse.mm: a (m, k) sparse (COO or CSR) times b (k, n) dense gives (m, n) dense of the
// promoted float dtype. Duplicates add up; nnz = 0 gives zeros. Differentiable in b and in
// a.values() (the gradient of each stored entry, duplicates each getting the full one).
LOOM_API Tensor matmul(const SparseTensor& a, const Tensor& b);

}  // namespace loom
