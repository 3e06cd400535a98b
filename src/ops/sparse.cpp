// SparseTensor (COO / CSR) and sparse x dense matmul (docs/sparse.md).
#include "loom/ops/sparse.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "loom/core/parallel.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/indexing.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"
#include "ops/nn_internal.h"
#include "ops/registry_parts.h"

namespace loom {

struct SparseTensor::Impl {
  SparseLayout layout = SparseLayout::COO;
  Shape shape;
  Tensor indices;      // COO: int64 (ndim, nnz), contiguous, owned (a private copy)
  Tensor crow, col;    // CSR: int64 (rows + 1,) and (nnz,), owned
  Tensor values;       // (nnz,), float32/float64: the caller's tensor (its autograd identity)
  bool coalesced = false;
};

namespace {

using Impl = SparseTensor::Impl;

std::string str(int64_t v) { return std::to_string(v); }

// Shape sizes non-negative, their product (times the item size) within int64: the linear
// positions used by coalesce/to_dense fit, and to_dense's size is checked before allocating.
void check_shape(const Shape& shape, DType dtype, const char* op) {
  if (shape.empty()) throw ShapeError(std::string(op) + ": a sparse tensor needs at least one axis, got shape ()");
  for (int64_t s : shape)
    if (s < 0) throw ShapeError(std::string(op) + ": shape " + shape_str(shape) + " has a negative size");
  shape_nbytes(shape, itemsize(dtype), op);
}

void check_values(const Tensor& values, const char* op) {
  if (!values.defined()) throw ValueError(std::string(op) + ": values is an undefined tensor");
  if (values.dtype() != DType::Float32 && values.dtype() != DType::Float64)
    throw DTypeError(std::string(op) + ": values has dtype " + dtype_name(values.dtype()) +
                     " (valid: float32, float64)");
  if (values.ndim() != 1)
    throw ShapeError(std::string(op) + ": values must be 1-d (nnz,), got shape " + shape_str(values.shape()));
}

// A private int64 contiguous copy of an index array (int32 or int64), so that later writes to the
// caller's tensor cannot put an index out of range after validation.
Tensor own_index(const Tensor& t, const char* op, const char* what) {
  if (!t.defined()) throw ValueError(std::string(op) + ": " + what + " is an undefined tensor");
  if (t.dtype() != DType::Int64 && t.dtype() != DType::Int32)
    throw DTypeError(std::string(op) + ": " + what + " has dtype " + dtype_name(t.dtype()) + " (valid: int32, int64)");
  NoGrad off;
  return t.astype(DType::Int64).copy();
}

// Row-major linear position of each COO entry (fits int64: check_shape).
std::vector<int64_t> linear_positions(const Impl& s) {
  const int64_t nd = static_cast<int64_t>(s.shape.size()), nnz = s.values.shape()[0];
  std::vector<int64_t> lin(static_cast<size_t>(nnz), 0);
  const int64_t* idx = s.indices.data<int64_t>();
  for (int64_t d = 0; d < nd; ++d)
    for (int64_t e = 0; e < nnz; ++e) lin[e] = lin[e] * s.shape[d] + idx[d * nnz + e];
  return lin;
}

bool sorted_unique(const std::vector<int64_t>& lin) {
  for (size_t e = 1; e < lin.size(); ++e)
    if (lin[e] <= lin[e - 1]) return false;
  return true;
}

Tensor int64_tensor(std::vector<int64_t> v, const Shape& shape) { return from_vector<int64_t>(v, shape); }

std::shared_ptr<Impl> make_coo(Tensor indices, Tensor values, Shape shape, bool coalesced) {
  auto s = std::make_shared<Impl>();
  s->layout = SparseLayout::COO;
  s->indices = std::move(indices);
  s->values = std::move(values);
  s->shape = std::move(shape);
  s->coalesced = coalesced;
  return s;
}

// The row and column of each entry of a 2-d sparse tensor (either layout).
void rows_cols(const Impl& s, std::vector<int64_t>& rows, std::vector<int64_t>& cols) {
  const int64_t nnz = s.values.shape()[0];
  rows.resize(static_cast<size_t>(nnz));
  cols.resize(static_cast<size_t>(nnz));
  if (s.layout == SparseLayout::COO) {
    const int64_t* idx = s.indices.data<int64_t>();
    std::copy(idx, idx + nnz, rows.begin());
    std::copy(idx + nnz, idx + 2 * nnz, cols.begin());
  } else {
    const int64_t* cr = s.crow.data<int64_t>();
    const int64_t* c = s.col.data<int64_t>();
    for (int64_t r = 0; r < s.shape[0]; ++r)
      for (int64_t e = cr[r]; e < cr[r + 1]; ++e) rows[e] = r;
    std::copy(c, c + nnz, cols.begin());
  }
}

// out (m, n) = sum over entries e of vals[e] * b[cols[e], :] into row rows[e]. Entries are
// grouped by row (stable), so each output row is summed by one thread in entry order: results do
// not depend on the thread count.
template <typename T>
void spmm_kernel(const std::vector<int64_t>& rows, const std::vector<int64_t>& cols, const T* vals, const T* b,
                 T* out, int64_t m, int64_t n) {
  if (m == 0 || n == 0) return;  // nothing to write (and the buffers may be null)
  const int64_t nnz = static_cast<int64_t>(rows.size());
  std::vector<int64_t> start(static_cast<size_t>(m + 1), 0), order(static_cast<size_t>(nnz));
  for (int64_t r : rows) ++start[r + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t e = 0; e < nnz; ++e) order[fill[rows[e]]++] = e;
  std::fill(out, out + m * n, T(0));
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, n * (nnz / std::max<int64_t>(1, m) + 1)));
  parallel_for(0, m, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      T* o = out + r * n;
      for (int64_t p = start[r]; p < start[r + 1]; ++p) {
        const int64_t e = order[p];
        const T v = vals[e];
        const T* br = b + cols[e] * n;
        for (int64_t j = 0; j < n; ++j) o[j] += v * br[j];
      }
    }
  });
}

// Raw (unrecorded) product: vals and b contiguous of dtype dt.
Tensor spmm_raw(const std::vector<int64_t>& rows, const std::vector<int64_t>& cols, const Tensor& vals,
                const Tensor& b, int64_t m) {
  const int64_t n = b.shape()[1];
  Tensor out = detail::alloc({m, n}, b.dtype(), b.device(), "sparse matmul");
  Tensor v = detail::contiguous_raw(vals), bc = detail::contiguous_raw(b);
  if (b.dtype() == DType::Float64)
    spmm_kernel<double>(rows, cols, v.data<double>(), bc.data<double>(), out.data<double>(), m, n);
  else
    spmm_kernel<float>(rows, cols, v.data<float>(), bc.data<float>(), out.data<float>(), m, n);
  return out;
}

const Impl& require(const std::shared_ptr<const Impl>& impl, const char* what) {
  if (!impl) throw ValueError(std::string("SparseTensor::") + what + ": the sparse tensor is undefined (default-constructed)");
  return *impl;
}

}  // namespace

SparseTensor SparseTensor::coo(const Tensor& indices, const Tensor& values, const Shape& shape) {
  const char* op = "SparseTensor::coo";
  check_values(values, op);
  check_shape(shape, values.dtype(), op);
  Tensor idx = own_index(indices, op, "indices");
  const int64_t nd = static_cast<int64_t>(shape.size()), nnz = values.shape()[0];
  if (idx.ndim() != 2 || idx.shape()[0] != nd || idx.shape()[1] != nnz)
    throw ShapeError(std::string(op) + ": indices has shape " + shape_str(idx.shape()) + " but must be (ndim, nnz) = (" +
                     str(nd) + ", " + str(nnz) + ") for shape " + shape_str(shape) + " and " + str(nnz) + " values");
  if (idx.device() != values.device())
    throw DeviceError(std::string(op) + ": indices and values are on different devices");
  const int64_t* p = idx.data<int64_t>();
  for (int64_t d = 0; d < nd; ++d)
    for (int64_t e = 0; e < nnz; ++e) {
      const int64_t i = p[d * nnz + e];
      if (i < 0 || i >= shape[d])
        throw IndexError(std::string(op) + ": index " + str(i) + " of entry " + str(e) + " on axis " + str(d) +
                         " is out of range for shape " + shape_str(shape) + " (valid: 0 to " + str(shape[d] - 1) + ")");
    }
  auto s = make_coo(idx, values, shape, false);
  s->coalesced = sorted_unique(linear_positions(*s));
  return SparseTensor(std::move(s));
}

SparseTensor SparseTensor::csr(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                               const Shape& shape) {
  const char* op = "SparseTensor::csr";
  check_values(values, op);
  check_shape(shape, values.dtype(), op);
  if (shape.size() != 2) throw ShapeError(std::string(op) + ": CSR is 2-d, got shape " + shape_str(shape));
  Tensor crow = own_index(crow_indices, op, "crow_indices"), col = own_index(col_indices, op, "col_indices");
  const int64_t rows = shape[0], cols = shape[1], nnz = values.shape()[0];
  if (crow.ndim() != 1 || crow.shape()[0] != rows + 1)
    throw ShapeError(std::string(op) + ": crow_indices has shape " + shape_str(crow.shape()) + " but must be (rows + 1,) = (" +
                     str(rows + 1) + ",)");
  if (col.ndim() != 1 || col.shape()[0] != nnz)
    throw ShapeError(std::string(op) + ": col_indices has shape " + shape_str(col.shape()) + " but must be (nnz,) = (" +
                     str(nnz) + ",), one per value");
  const int64_t* cr = crow.data<int64_t>();
  const int64_t* c = col.data<int64_t>();
  if (cr[0] != 0 || cr[rows] != nnz)
    throw ValueError(std::string(op) + ": crow_indices must start at 0 and end at nnz = " + str(nnz) + ", got " +
                     str(cr[0]) + " and " + str(cr[rows]));
  bool coalesced = true;
  for (int64_t r = 0; r < rows; ++r) {
    if (cr[r + 1] < cr[r])
      throw ValueError(std::string(op) + ": crow_indices must be non-decreasing, but entry " + str(r + 1) + " (" +
                       str(cr[r + 1]) + ") is below entry " + str(r) + " (" + str(cr[r]) + ")");
    for (int64_t e = cr[r]; e < cr[r + 1]; ++e) {
      if (c[e] < 0 || c[e] >= cols)
        throw IndexError(std::string(op) + ": column index " + str(c[e]) + " of entry " + str(e) +
                         " is out of range for shape " + shape_str(shape) + " (valid: 0 to " + str(cols - 1) + ")");
      if (e > cr[r] && c[e] <= c[e - 1]) coalesced = false;
    }
  }
  auto s = std::make_shared<Impl>();
  s->layout = SparseLayout::CSR;
  s->shape = shape;
  s->crow = crow;
  s->col = col;
  s->values = values;
  s->coalesced = coalesced;
  return SparseTensor(std::move(s));
}

SparseTensor SparseTensor::from_dense(const Tensor& dense, SparseLayout layout) {
  const char* op = "SparseTensor::from_dense";
  detail::check_defined(dense, op);
  if (dense.dtype() != DType::Float32 && dense.dtype() != DType::Float64)
    throw DTypeError(std::string(op) + ": the tensor has dtype " + dtype_name(dense.dtype()) + " (valid: float32, float64)");
  if (layout == SparseLayout::CSR && dense.ndim() != 2)
    throw ShapeError(std::string(op) + ": CSR needs a 2-d tensor, got shape " + shape_str(dense.shape()));
  check_shape(dense.shape(), dense.dtype(), op);
  const int64_t nd = dense.ndim(), numel = dense.numel();
  std::vector<int64_t> lin;
  {
    NoGrad off;
    const std::vector<double> v = dense.to_vector<double>();
    for (int64_t i = 0; i < numel; ++i)
      if (v[i] != 0.0) lin.push_back(i);  // NaN is stored (it is not zero)
  }
  const int64_t nnz = static_cast<int64_t>(lin.size());
  std::vector<int64_t> idx(static_cast<size_t>(nd * nnz));
  for (int64_t e = 0; e < nnz; ++e) {
    int64_t rest = lin[e];
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx[d * nnz + e] = rest % dense.shape()[d];
      rest /= dense.shape()[d];
    }
  }
  // values taken from the dense tensor: differentiable in it
  Tensor values = take(reshape(dense, {numel}), int64_tensor(lin, {nnz}));
  SparseTensor s(make_coo(int64_tensor(std::move(idx), {nd, nnz}), values, dense.shape(), true));
  return layout == SparseLayout::CSR ? s.to_csr() : s;
}

SparseLayout SparseTensor::layout() const { return require(impl_, "layout").layout; }
const Shape& SparseTensor::shape() const { return require(impl_, "shape").shape; }
int64_t SparseTensor::ndim() const { return static_cast<int64_t>(shape().size()); }
DType SparseTensor::dtype() const { return require(impl_, "dtype").values.dtype(); }
int64_t SparseTensor::nnz() const { return require(impl_, "nnz").values.shape()[0]; }
const Tensor& SparseTensor::values() const { return require(impl_, "values").values; }
bool SparseTensor::is_coalesced() const { return require(impl_, "is_coalesced").coalesced; }

const Tensor& SparseTensor::indices() const {
  const Impl& s = require(impl_, "indices");
  if (s.layout != SparseLayout::COO)
    throw ValueError("SparseTensor::indices: the tensor is CSR (use crow_indices/col_indices, or to_coo())");
  return s.indices;
}
const Tensor& SparseTensor::crow_indices() const {
  const Impl& s = require(impl_, "crow_indices");
  if (s.layout != SparseLayout::CSR) throw ValueError("SparseTensor::crow_indices: the tensor is COO (use indices, or to_csr())");
  return s.crow;
}
const Tensor& SparseTensor::col_indices() const {
  const Impl& s = require(impl_, "col_indices");
  if (s.layout != SparseLayout::CSR) throw ValueError("SparseTensor::col_indices: the tensor is COO (use indices, or to_csr())");
  return s.col;
}

SparseTensor SparseTensor::coalesce() const {
  const Impl& s = require(impl_, "coalesce");
  if (s.coalesced) return *this;
  if (s.layout == SparseLayout::CSR) return to_coo().coalesce().to_csr();
  const std::vector<int64_t> lin = linear_positions(s);
  const int64_t nnz = static_cast<int64_t>(lin.size()), nd = static_cast<int64_t>(s.shape.size());
  std::vector<int64_t> order(static_cast<size_t>(nnz));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lin[a] < lin[b]; });
  std::vector<int64_t> target(static_cast<size_t>(nnz)), first;  // entry -> unique slot; slot -> an entry
  for (int64_t p = 0; p < nnz; ++p) {
    const int64_t e = order[p];
    if (first.empty() || lin[first.back()] != lin[e]) first.push_back(e);
    target[e] = static_cast<int64_t>(first.size()) - 1;
  }
  const int64_t u = static_cast<int64_t>(first.size());
  const int64_t* idx = s.indices.data<int64_t>();
  std::vector<int64_t> out_idx(static_cast<size_t>(nd * u));
  for (int64_t d = 0; d < nd; ++d)
    for (int64_t k = 0; k < u; ++k) out_idx[d * u + k] = idx[d * nnz + first[k]];
  // duplicates summed with a differentiable scatter-add
  Tensor values = index_put(zeros({u}, s.values.dtype(), s.values.device()), {TensorIndex(int64_tensor(target, {nnz}))},
                            s.values, true);
  return SparseTensor(make_coo(int64_tensor(std::move(out_idx), {nd, u}), values, s.shape, true));
}

Tensor SparseTensor::to_dense() const {
  const Impl& s = require(impl_, "to_dense");
  if (s.layout == SparseLayout::CSR) return to_coo().to_dense();
  const int64_t nnz = s.values.shape()[0];
  const int64_t numel = shape_numel(s.shape);
  Tensor flat = zeros({numel}, s.values.dtype(), s.values.device());
  flat = index_put(flat, {TensorIndex(int64_tensor(linear_positions(s), {nnz}))}, s.values, true);
  return reshape(flat, s.shape);
}

SparseTensor SparseTensor::to_coo() const {
  const Impl& s = require(impl_, "to_coo");
  if (s.layout == SparseLayout::COO) return *this;
  std::vector<int64_t> rows, cols;
  rows_cols(s, rows, cols);
  const int64_t nnz = static_cast<int64_t>(rows.size());
  rows.insert(rows.end(), cols.begin(), cols.end());
  return SparseTensor(make_coo(int64_tensor(std::move(rows), {2, nnz}), s.values, s.shape, s.coalesced));
}

SparseTensor SparseTensor::to_csr() const {
  const Impl& s0 = require(impl_, "to_csr");
  if (s0.layout == SparseLayout::CSR) return *this;
  if (s0.shape.size() != 2) throw ShapeError("SparseTensor::to_csr: CSR is 2-d, got shape " + shape_str(s0.shape));
  const SparseTensor c = coalesce();  // row-major order, no duplicates
  const Impl& s = *c.impl_;
  const int64_t nnz = s.values.shape()[0], rows = s.shape[0];
  const int64_t* idx = s.indices.data<int64_t>();
  // rows + 1 entries: through the allocator (its limit), not a std::vector, since a shape like
  // (2^60, 0) is valid and has no entries
  Tensor crow_t = zeros({rows + 1}, DType::Int64);
  int64_t* crow = crow_t.data<int64_t>();
  for (int64_t e = 0; e < nnz; ++e) ++crow[idx[e] + 1];
  std::partial_sum(crow, crow + rows + 1, crow);
  auto out = std::make_shared<Impl>();
  out->layout = SparseLayout::CSR;
  out->shape = s.shape;
  out->crow = crow_t;
  out->col = int64_tensor(std::vector<int64_t>(idx + nnz, idx + 2 * nnz), {nnz});
  out->values = s.values;
  out->coalesced = true;
  return SparseTensor(std::move(out));
}

Tensor matmul(const SparseTensor& a, const Tensor& b) {
  const char* op = "sparse matmul";
  const Impl& s = require(a.impl(), "matmul");
  detail::check_defined(b, op);
  if (s.shape.size() != 2 || b.ndim() != 2)
    throw ShapeError(std::string(op) + ": needs a 2-d sparse (m, k) and a 2-d dense (k, n), got sparse " +
                     shape_str(s.shape) + " and dense " + describe(b));
  if (b.dtype() != DType::Float32 && b.dtype() != DType::Float64)
    throw DTypeError(std::string(op) + ": the dense operand has dtype " + dtype_name(b.dtype()) +
                     " (valid: float32, float64)");
  if (s.shape[1] != b.shape()[0])
    throw ShapeError(std::string(op) + ": inner dimensions differ: sparse " + shape_str(s.shape) + " and dense " +
                     describe(b) + " (the sparse tensor's columns, " + str(s.shape[1]) +
                     ", must equal the dense operand's rows, " + str(b.shape()[0]) + ")");
  if (b.device() != s.values.device()) throw DeviceError(std::string(op) + ": operands are on different devices");
  const int64_t m = s.shape[0], k = s.shape[1];
  const DType dt = promote_types(s.values.dtype(), b.dtype());
  shape_nbytes({m, b.shape()[1]}, itemsize(dt), op);
  Tensor vals = s.values.dtype() == dt ? s.values : s.values.astype(dt);  // astype records: gradients flow back
  Tensor bd = b.dtype() == dt ? b : b.astype(dt);
  std::vector<int64_t> rows, cols;
  rows_cols(s, rows, cols);
  Tensor out;
  {
    NoGrad off;
    out = spmm_raw(rows, cols, vals, bd, m);
  }
  if (!detail::needs_grad({&vals, &bd})) return out;
  const int64_t nnz = static_cast<int64_t>(rows.size());
  auto rows_t = int64_tensor(rows, {nnz}), cols_t = int64_tensor(cols, {nnz});
  return detail::record("sparse.mm", {vals, bd}, out,
                        [rows = std::move(rows), cols = std::move(cols), rows_t, cols_t, k, rv = vals.requires_grad(),
                         rb = bd.requires_grad(), vs = detail::save(vals), bs = detail::save(bd)](const Tensor& g) {
                          Tensor gv, gb;
                          // d out[r, :] / d vals[e] = b[c, :]: the gradient of an entry is g[r] . b[c]
                          if (rv) gv = sum(multiply(take(g, rows_t, 0), take(bs.get(), cols_t, 0)), {1});
                          // b's gradient is a^T g: the same product with rows and columns swapped
                          if (rb) {
                            NoGrad off;
                            gb = spmm_raw(cols, rows, vs.get(), detail::cast_raw(g, vs.dtype()), k);
                          }
                          return std::vector<Tensor>{gv, gb};
                        });
}

}  // namespace loom

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> sparse_ops() {
  return {
      {"sparse.mm", "linalg", true},
  };
}

}  // namespace loom::detail
