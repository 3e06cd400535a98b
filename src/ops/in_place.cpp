// The in-place operators (a += b, ...): computed straight into a where that is the same result,
// else through the out-of-place op and a copy; never recorded for autograd.
#include <string>
#include <utility>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "ops/internal.h"

namespace loom {

using detail::BinaryOp;

namespace {
void check_in_place(const Tensor& a, const Tensor& b, const char* name) {
  detail::check_defined(a, name);
  detail::check_defined(b, name);
  detail::check_no_overlap(a, name);
  // Not recorded, so neither the target nor the operand may take part in autograd: the
  // operand's gradient would silently be lost.
  if (grad_enabled() && (a.requires_grad() || b.requires_grad()))
    throw AutogradError(std::string(name) + ": in-place update with a tensor that takes part in autograd (" +
                        detail::describe_operands({&a, &b}) + (a.requires_grad() ? ", a requires grad" : ", b requires grad") +
                        "); use the out-of-place form (a = a + b) or run it under NoGrad");
}

Tensor& in_place(Tensor& a, const Tensor& result, const char* name) {
  if (!can_cast(result.dtype(), a.dtype()) && !(is_floating(a.dtype()) && is_floating(result.dtype())))
    throw DTypeError(std::string(name) + ": the result dtype " + dtype_name(result.dtype()) +
                     " cannot be stored in place in a tensor of dtype " + dtype_name(a.dtype()));
  if (broadcast_shapes(a.shape(), result.shape(), name) != a.shape())
    throw ShapeError(std::string(name) + ": the result shape " + shape_str(result.shape()) +
                     " does not broadcast to the target's shape " + shape_str(a.shape()));
  detail::begin_write(a, name);
  detail::backend(a.device()).copy(a, detail::broadcast_view(result, a.shape()));
  return a;
}

// The bytes [first, last) a view's elements lie in.
std::pair<int64_t, int64_t> byte_extent(const Tensor& t) {
  int64_t lo = t.offset(), hi = t.offset();
  for (size_t i = 0; i < t.shape().size(); ++i) {
    const int64_t span = (t.shape()[i] - 1) * t.strides()[i];
    (span < 0 ? lo : hi) += span;
  }
  const auto item = static_cast<int64_t>(t.itemsize());
  return {lo * item, (hi + 1) * item};
}

// Whether b's elements are a's own, index for index (a += a), or lie outside a's memory: then
// each element of a is read before it is written and never after, and a op= b may write a.
bool reads_before_writes(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0 || !a.shares_storage_with(b)) return true;
  if (a.dtype() == b.dtype() && a.offset() == b.offset() && a.shape() == b.shape()) {
    bool same = true;
    for (size_t i = 0; i < a.shape().size(); ++i) same = same && (a.shape()[i] == 1 || a.strides()[i] == b.strides()[i]);
    if (same) return true;
  }
  const auto [alo, ahi] = byte_extent(a);
  const auto [blo, bhi] = byte_extent(b);
  return ahi <= blo || bhi <= alo;
}

// a op= b computed straight into a with the binary kernel (no result tensor, no copy) when
// that is the copy path's result: the op's dtype `dt` is a's, not a half type (those compute
// in float32 and round) nor bool, b broadcasts to a's shape and does not partly overlap a.
// False: the caller takes the copy path (which also raises every error).
bool write_into(BinaryOp op, Tensor& a, const Tensor& b, DType dt, const char* name) {
  if (dt != a.dtype() || detail::is_half_float(dt) || dt == DType::Bool || a.device() != b.device() || b.ndim() > a.ndim()) return false;
  const size_t lead = a.shape().size() - b.shape().size();
  for (size_t i = 0; i < b.shape().size(); ++i)
    if (b.shape()[i] != 1 && b.shape()[i] != a.shape()[lead + i]) return false;
  if (!reads_before_writes(a, b)) return false;
  const Tensor operand = detail::broadcast_view(detail::cast_raw(b, dt), a.shape());
  detail::begin_write(a, name);
  detail::backend(a.device()).binary(op, a, a, operand);
  return true;
}

DType division_dtype(DType dt) { return is_floating(dt) ? dt : DType::Float64; }  // as divide()

// op= with a C++ number: the weak rule's dtype, as a.detach() op b.
bool write_scalar_into(BinaryOp op, Tensor& a, Scalar b, const char* name) {
  DType dt = b.result_dtype_with(a.dtype());
  if (op == BinaryOp::Div) dt = division_dtype(dt);
  if (dt != a.dtype()) return false;
  return write_into(op, a, scalar_tensor(b, dt, a.device()), dt, name);
}
}  // namespace

Tensor& operator+=(Tensor& a, const Tensor& b) {
  check_in_place(a, b, "operator+=");
  if (write_into(BinaryOp::Add, a, b, promote_types(a.dtype(), b.dtype()), "operator+=")) return a;
  return in_place(a, add(a.detach(), b.detach()), "operator+=");
}
Tensor& operator-=(Tensor& a, const Tensor& b) {
  check_in_place(a, b, "operator-=");
  if (write_into(BinaryOp::Sub, a, b, promote_types(a.dtype(), b.dtype()), "operator-=")) return a;
  return in_place(a, subtract(a.detach(), b.detach()), "operator-=");
}
Tensor& operator*=(Tensor& a, const Tensor& b) {
  check_in_place(a, b, "operator*=");
  if (write_into(BinaryOp::Mul, a, b, promote_types(a.dtype(), b.dtype()), "operator*=")) return a;
  return in_place(a, multiply(a.detach(), b.detach()), "operator*=");
}
Tensor& operator/=(Tensor& a, const Tensor& b) {
  check_in_place(a, b, "operator/=");
  if (write_into(BinaryOp::Div, a, b, division_dtype(promote_types(a.dtype(), b.dtype())), "operator/=")) return a;
  return in_place(a, divide(a.detach(), b.detach()), "operator/=");
}
Tensor& operator+=(Tensor& a, Scalar b) {
  check_in_place(a, a, "operator+=");
  if (write_scalar_into(BinaryOp::Add, a, b, "operator+=")) return a;
  return in_place(a, a.detach() + b, "operator+=");
}
Tensor& operator-=(Tensor& a, Scalar b) {
  check_in_place(a, a, "operator-=");
  if (write_scalar_into(BinaryOp::Sub, a, b, "operator-=")) return a;
  return in_place(a, a.detach() - b, "operator-=");
}
Tensor& operator*=(Tensor& a, Scalar b) {
  check_in_place(a, a, "operator*=");
  if (write_scalar_into(BinaryOp::Mul, a, b, "operator*=")) return a;
  return in_place(a, a.detach() * b, "operator*=");
}
Tensor& operator/=(Tensor& a, Scalar b) {
  check_in_place(a, a, "operator/=");
  if (write_scalar_into(BinaryOp::Div, a, b, "operator/=")) return a;
  return in_place(a, a.detach() / b, "operator/=");
}

}  // namespace loom
