// Tensor's member functions: thin forwards to the free functions of loom/ops.
#include "loom/core/tensor.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/indexing.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"
#include "ops/internal.h"

namespace loom {

Tensor Tensor::astype(DType dtype) const { return loom::astype(*this, dtype); }

Tensor Tensor::to(Device device) const {
  detail::check_defined(*this, "to");
  if (device == this->device()) return *this;
  throw DeviceError("to: copying from " + this->device().str() + " to " + device.str() + " is not available in this build");
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : copy(); }

Tensor Tensor::copy() const {
  detail::check_defined(*this, "copy");
  Tensor out = detail::alloc(shape(), dtype(), device());
  detail::backend(device()).copy(out, *this);
  if (!detail::needs_grad({this})) return out;
  return detail::record("copy", {*this}, out, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor Tensor::reshape(const Shape& s) const { return loom::reshape(*this, s); }
Tensor Tensor::view(const Shape& s) const {
  Tensor y = loom::reshape(*this, s);
  if (numel() > 0 && !y.shares_storage_with(*this))
    throw ShapeError("view: a tensor of shape " + shape_str(shape()) + " with strides " + shape_str(strides()) +
                     " cannot be viewed as " + shape_str(s) + " without a copy (use reshape)");
  return y;
}
Tensor Tensor::transpose() const { return loom::transpose(*this); }
Tensor Tensor::transpose(const Axes& axes) const { return loom::transpose(*this, axes); }
Tensor Tensor::permute(const Axes& axes) const { return loom::permute(*this, axes); }
Tensor Tensor::swapaxes(int64_t a, int64_t b) const { return loom::swapaxes(*this, a, b); }
Tensor Tensor::squeeze(const Axes& axes) const { return loom::squeeze(*this, axes); }
Tensor Tensor::expand_dims(int64_t axis) const { return loom::expand_dims(*this, axis); }
Tensor Tensor::broadcast_to(const Shape& s) const { return loom::broadcast_to(*this, s); }
Tensor Tensor::flatten() const { return loom::flatten(*this); }
Tensor Tensor::index(std::initializer_list<TensorIndex> indices) const { return loom::index(*this, std::vector<TensorIndex>(indices)); }
Tensor Tensor::index(const std::vector<TensorIndex>& indices) const { return loom::index(*this, indices); }
Tensor Tensor::operator[](int64_t i) const { return loom::index(*this, {TensorIndex(i)}); }

Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, const Tensor& value) {
  detail::check_defined(*this, "index_put_");
  detail::check_defined(value, "index_put_");
  if (grad_enabled() && (requires_grad() || value.requires_grad()))
    throw AutogradError("index_put_: in-place assignment into a tensor that takes part in autograd; use index_put(x, "
                        "indices, values), which is differentiable, or run under NoGrad");
  detail::check_no_overlap(*this, "index_put_");
  Tensor updated = loom::index_put(detach(), indices, value.detach());
  detail::begin_write(*this, "index_put_");
  detail::backend(device()).copy(*this, updated);
  return *this;
}

Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, Scalar value) {
  detail::check_defined(*this, "index_put_");
  return index_put_(indices, scalar_tensor(value, value.result_dtype_with(dtype()), device()));
}

Tensor& Tensor::fill_(Scalar value) {
  detail::check_defined(*this, "fill_");
  if (grad_enabled() && requires_grad())
    throw AutogradError("fill_: in-place fill of a tensor that requires grad; run under NoGrad");
  detail::begin_write(*this, "fill_");
  detail::backend(device()).fill(*this, value);
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  detail::check_defined(*this, "copy_");
  detail::check_defined(src, "copy_");
  if (grad_enabled() && (requires_grad() || src.requires_grad()))
    throw AutogradError(std::string("copy_: in-place copy ") +
                        (requires_grad() ? "into a tensor that requires grad" : "from a tensor that requires grad") +
                        " (it is not recorded); use an out-of-place op, detach() the source, or run under NoGrad");
  if (broadcast_shapes(src.shape(), shape(), "copy_") != shape())
    throw ShapeError("copy_: a source of shape " + shape_str(src.shape()) + " does not broadcast to " + shape_str(shape()));
  detail::check_same_device(*this, src, "copy_");
  // copy through a temporary when the two overlap in memory
  Tensor s = src.shares_storage_with(*this) ? src.detach().copy() : src;
  detail::begin_write(*this, "copy_");
  detail::backend(device()).copy(*this, detail::broadcast_view(s, shape()));
  return *this;
}

Tensor Tensor::sum(const Axes& axes, bool keepdims) const { return loom::sum(*this, axes, keepdims); }
Tensor Tensor::mean(const Axes& axes, bool keepdims) const { return loom::mean(*this, axes, keepdims); }
Tensor Tensor::max(const Axes& axes, bool keepdims) const { return loom::max(*this, axes, keepdims); }
Tensor Tensor::min(const Axes& axes, bool keepdims) const { return loom::min(*this, axes, keepdims); }
Tensor Tensor::argmax(std::optional<int64_t> axis, bool keepdims) const { return loom::argmax(*this, axis, keepdims); }
Tensor Tensor::argmin(std::optional<int64_t> axis, bool keepdims) const { return loom::argmin(*this, axis, keepdims); }

}  // namespace loom
