#include "ops/linalg_internal.h"

#include <climits>
#include <vector>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"
#include "ops/internal.h"

namespace loom::detail {

Tensor mT(const Tensor& x) { return swapaxes(x, -1, -2); }

Tensor diag_embed(const Tensor& v) {
  const int64_t n = v.shape().back();
  return multiply(expand_dims(v, -1), eye(n, std::nullopt, 0, v.dtype(), v.device()));
}

Tensor diagonal(const Tensor& x) {
  const int64_t n = x.shape().back();
  return sum(multiply(x, eye(n, std::nullopt, 0, x.dtype(), x.device())), {-1});
}

namespace {
Tensor band_mask(int64_t rows, int64_t cols, int64_t k, bool lower, DType dt, Device dev) {
  std::vector<double> m(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m[i * cols + j] = (lower ? j - i <= k : j - i >= k) ? 1.0 : 0.0;
  return cast_raw(from_vector<double>(m, {rows, cols}, dev), dt);
}
}  // namespace

Tensor tril(const Tensor& x, int64_t k) {
  return multiply(x, band_mask(x.shape()[x.ndim() - 2], x.shape().back(), k, true, x.dtype(), x.device()));
}
Tensor triu(const Tensor& x, int64_t k) {
  return multiply(x, band_mask(x.shape()[x.ndim() - 2], x.shape().back(), k, false, x.dtype(), x.device()));
}

void check_matrix(const Tensor& a, const char* op, bool square) {
  check_defined(a, op);
  if (a.dtype() != Float32 && a.dtype() != Float64)
    throw DTypeError(std::string(op) + ": expected a float32 or float64 tensor, got " + describe_operands({&a}) +
                     " (convert it with astype)");
  if (a.ndim() < 2)
    throw ShapeError(std::string(op) + ": expected a tensor of at least 2 dimensions (matrices in the last two), got " +
                     describe_operands({&a}));
  const int64_t m = a.shape()[a.ndim() - 2], n = a.shape().back();
  if (square && m != n)
    throw ShapeError(std::string(op) + ": expected square matrices in the last two dimensions, got " + describe_operands({&a}));
  if (m > INT_MAX || n > INT_MAX || (m > 0 && n > INT_MAX / m))
    throw ValueError(std::string(op) + ": matrices of " + std::to_string(m) + " x " + std::to_string(n) +
                     " are too large for LAPACK's 32-bit indices (" + describe_operands({&a}) + ")");
  if (a.device().type != DeviceType::CPU)
    throw DeviceError(std::string(op) + ": runs on the CPU only (LAPACK), got " + describe_operands({&a}));
}

Tensor lapack_copy(const Tensor& x, DType dt) {
  const int64_t nd = x.ndim(), r = x.shape()[nd - 2], c = x.shape()[nd - 1];
  Shape batch(x.shape().begin(), x.shape().end() - 2);
  const int64_t nb = shape_numel(batch);
  Tensor buf = alloc({nb, c, r}, dt, x.device(), "linalg");
  // the buffer seen as x's shape: element (.., i, j) at i + j * r
  Shape vs = batch;
  vs.push_back(r);
  vs.push_back(c);
  Strides st = contiguous_strides(vs);
  const int64_t ms = r * c;
  for (int64_t i = static_cast<int64_t>(batch.size()) - 1, s = ms; i >= 0; --i) {
    st[i] = s;
    s *= batch[i];
  }
  st[nd - 2] = 1;
  st[nd - 1] = r;
  if (buf.numel() > 0) backend(x.device()).copy(Tensor(buf.storage(), vs, st, buf.offset(), dt), x);
  return buf;
}

Tensor lapack_view(const Tensor& buf, const Shape& batch_shape, int64_t rows, int64_t cols, int64_t ld,
                   int64_t matrix_stride) {
  Shape s = batch_shape;
  s.push_back(rows);
  s.push_back(cols);
  Strides st(s.size());
  for (int64_t i = static_cast<int64_t>(batch_shape.size()) - 1, m = matrix_stride; i >= 0; --i) {
    st[i] = m;
    m *= batch_shape[i];
  }
  st[s.size() - 2] = 1;
  st[s.size() - 1] = ld;
  return Tensor(buf.storage(), s, st, buf.offset(), buf.dtype());
}

}  // namespace loom::detail
