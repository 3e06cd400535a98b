// loom.SparseTensor (COO and 2-d CSR, include/loom/ops/sparse.h) made from NumPy arrays or
// tensors, and loom.sparse.mm (torch.sparse.mm: the registry op "sparse.mm"), differentiable in
// the dense operand and in the sparse operand's values (docs/sparse.md).
#include <string>

#include "common.h"
#include "loom/core/error.h"
#include "loom/ops/sparse.h"

namespace loom::python {

namespace {

const char* layout_name(SparseLayout l) { return l == SparseLayout::COO ? "coo" : "csr"; }

SparseLayout to_layout(const std::string& name) {
  if (name == "coo") return SparseLayout::COO;
  if (name == "csr") return SparseLayout::CSR;
  throw ValueError("loom.SparseTensor: layout '" + name + "' is not one of 'coo', 'csr'");
}

std::string sparse_repr(const SparseTensor& s) {
  std::string shape;
  for (int64_t d : s.shape()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  if (s.ndim() == 1) shape += ",";
  return std::string("SparseTensor(layout=") + layout_name(s.layout()) + ", shape=(" + shape + "), nnz=" +
         std::to_string(s.nnz()) + ", dtype=" + dtype_name(s.dtype()) + ")";
}

Tensor sparse_mm(const SparseTensor& a, ArrayLike b) {
  const Tensor dense = as_tensor(b);
  MaybeRelease release(elements_of(dense) + a.nnz());
  return matmul(a, dense);
}

}  // namespace

void bind_sparse(nb::module_& m) {
  nb::class_<SparseTensor>(m, "SparseTensor",
                           "A sparse tensor as torch.sparse's: COO (indices int64 (ndim, nnz), values (nnz,)) of any rank, or "
                           "CSR (crow_indices (rows + 1,), col_indices (nnz,), values (nnz,)) of 2-d, with float32 or float64 "
                           "values. The index arrays are copied (int64); the values are kept as given (a tensor, or an "
                           "array's memory without a copy), so gradients of to_dense and sparse.mm reach them.")
      .def_static("coo", [](ArrayLike indices, ArrayLike values, ShapeLike shape) {
        return SparseTensor::coo(as_tensor(indices), as_tensor(values), to_shape(shape));
      }, nb::arg("indices"), nb::arg("values"), nb::arg("shape"),
         "A COO tensor: indices int32/int64 (ndim, nnz), every index in [0, shape[d]); values float32/float64 (nnz,). "
         "Duplicate indices are allowed and add up. A ShapeError, DTypeError or IndexError names what is wrong.")
      .def_static("csr", [](ArrayLike crow_indices, ArrayLike col_indices, ArrayLike values, ShapeLike shape) {
        return SparseTensor::csr(as_tensor(crow_indices), as_tensor(col_indices), as_tensor(values), to_shape(shape));
      }, nb::arg("crow_indices"), nb::arg("col_indices"), nb::arg("values"), nb::arg("shape"),
         "A 2-d CSR tensor: crow_indices (rows + 1,) non-decreasing from 0 to nnz, col_indices (nnz,) in [0, cols), values (nnz,).")
      .def_static("from_dense", [](ArrayLike dense, const std::string& layout) {
        const SparseLayout l = to_layout(layout);
        return SparseTensor::from_dense(as_tensor(dense), l);
      }, nb::arg("dense"), nb::arg("layout") = "coo",
         "The non-zero elements of a float32/float64 tensor or array (NaN counts as non-zero), \"coo\" or \"csr\" (2-d).")
      .def_prop_ro("layout", [](const SparseTensor& s) { return layout_name(s.layout()); }, "\"coo\" or \"csr\".")
      .def_prop_ro("shape", [](const SparseTensor& s) { return int_tuple(s.shape()); }, "The dense shape, a tuple.")
      .def_prop_ro("ndim", &SparseTensor::ndim, "The number of axes.")
      .def_prop_ro("dtype", &SparseTensor::dtype, "The values' dtype (float32 or float64).")
      .def_prop_ro("nnz", &SparseTensor::nnz, "The number of stored entries (duplicates counted).")
      .def_prop_ro("values", [](const SparseTensor& s) { return s.values(); }, "The stored values (nnz,): the tensor given at creation.")
      .def_prop_ro("indices", [](const SparseTensor& s) { return s.indices(); }, "COO: the indices, int64 (ndim, nnz) (a loom.ValueError for CSR).")
      .def_prop_ro("crow_indices", [](const SparseTensor& s) { return s.crow_indices(); }, "CSR: the row pointers, int64 (rows + 1,) (a loom.ValueError for COO).")
      .def_prop_ro("col_indices", [](const SparseTensor& s) { return s.col_indices(); }, "CSR: the column of each entry, int64 (nnz,) (a loom.ValueError for COO).")
      .def("is_coalesced", &SparseTensor::is_coalesced, "Whether the entries are sorted in row-major order without duplicates.")
      .def("coalesce", &SparseTensor::coalesce, "Duplicates summed and entries sorted (the layout kept); differentiable in the values.")
      .def("to_dense", [](const SparseTensor& s) {
        MaybeRelease release(s.nnz());
        return s.to_dense();
      }, "The dense tensor (duplicates add up); differentiable in the values.")
      .def("to_coo", &SparseTensor::to_coo, "The COO form (itself when COO).")
      .def("to_csr", &SparseTensor::to_csr, "The CSR form of a 2-d tensor (COO is coalesced first; itself when CSR).")
      .def("__matmul__", &sparse_mm, nb::arg("other"), "sparse.mm(self, other).")
      .def("__repr__", &sparse_repr);

  nb::module_ sp = m.def_submodule("sparse", "Sparse x dense products (torch.sparse's names).");
  sp.def("mm", &sparse_mm, nb::arg("sparse"), nb::arg("dense"),
         "torch.sparse.mm: a (m, k) SparseTensor (COO or CSR, duplicates adding up) times a (k, n) float32/float64 dense "
         "tensor or array gives the (m, n) dense product of the promoted dtype; differentiable in the dense operand and in "
         "the sparse operand's values (each stored entry, duplicates each getting the full gradient).");
}

}  // namespace loom::python
