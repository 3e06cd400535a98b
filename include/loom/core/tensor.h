#pragma once
// Tensor: a small value handle to a strided view of a Storage, with autograd metadata.
// Copying a Tensor copies the handle (both name the same data), as in NumPy and PyTorch.
// Member functions are sugar for the free functions of loom/ops and loom/autograd.
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/device.h"
#include "loom/core/dtype.h"
#include "loom/core/error.h"
#include "loom/core/index.h"
#include "loom/core/scalar.h"
#include "loom/core/shape.h"
#include "loom/core/storage.h"

namespace loom {

class Node;
struct TensorImpl;

using Axes = std::vector<int64_t>;  // empty means "all axes" where an op reduces
// One integer axis where Axes are taken (t.sum(1)); a concept, so that `{}` and `{1, 2}` still
// mean Axes and bool is not an axis.
template <typename I>
concept AxisIndex = std::integral<I> && !std::same_as<I, bool>;

class LOOM_API Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  // Copying, or assigning to a named Tensor (an lvalue), copies the handle: `a = b;` makes `a`
  // name b's data, `Tensor row = t[0];` is a view of t's row.
  Tensor(const Tensor&) = default;
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(const Tensor&) & = default;
  Tensor& operator=(Tensor&&) & noexcept = default;
  ~Tensor() = default;
  // Assigning to a temporary (an rvalue) writes into its elements instead: a view returned by
  // t[i] or t.index({...}) writes into t's storage, as NumPy's and PyTorch's t[0][1] = 5 and
  // t[0:2] = u do. The value is broadcast and converted to the view's dtype (copy_, fill_).
  // AutogradError when the view or the value requires grad (the write would not be recorded;
  // write under NoGrad, or use the differentiable index_put). ValueError when no other tensor
  // shares the temporary's storage, so the write could never be seen: an integer-array or
  // mask index makes a copy, and t.index({mask}) = v is written t.index_put_({mask}, v).
  Tensor& operator=(const Tensor& value) &&;
  Tensor& operator=(Scalar value) &&;
  // A view of `storage` with the given geometry.
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Strides strides, int64_t offset, DType dtype);

  bool defined() const { return impl_ != nullptr; }
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }

  // --- geometry
  const Shape& shape() const;
  const Strides& strides() const;  // in elements
  int64_t offset() const;          // in elements, into the storage
  int64_t ndim() const;
  int64_t dim(int64_t axis) const;  // size of one axis; negative axes count from the end
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  size_t itemsize() const;
  size_t nbytes() const;  // numel * itemsize
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const;
  bool shares_storage_with(const Tensor& other) const;

  // --- raw data (CPU); data<T>() checks T against the dtype
  void* data_ptr() const;
  template <typename T> T* data() const;
  // The value of a one-element tensor converted to T; a double without T (loss.item(), as
  // PyTorch's Python float).
  template <typename T = double> T item() const;
  // Element access by multi-index (any rank), converted to double; for tests and printing.
  double at(const std::vector<int64_t>& index) const;
  // Copies the elements in logical (row-major) order into a vector of T.
  template <typename T> std::vector<T> to_vector() const;

  // --- conversions and copies (loom/ops)
  Tensor astype(DType dtype) const;
  Tensor to(Device device) const;
  Tensor to(std::string_view device) const { return to(Device(device)); }  // t.to("cpu"): Device(name)
  Tensor contiguous() const;  // itself when already contiguous
  Tensor copy() const;        // always new storage

  // --- views and shape (loom/ops)
  Tensor reshape(const Shape& shape) const;
  Tensor view(const Shape& shape) const;  // reshape that never copies (throws otherwise)
  Tensor transpose() const;               // reverses the axes
  Tensor transpose(const Axes& axes) const;
  Tensor permute(const Axes& axes) const;
  Tensor swapaxes(int64_t a, int64_t b) const;
  Tensor T() const { return transpose(); }
  Tensor squeeze(const Axes& axes = {}) const;
  template <AxisIndex I> Tensor squeeze(I axis) const { return squeeze(Axes{int64_t(axis)}); }
  Tensor expand_dims(int64_t axis) const;
  Tensor broadcast_to(const Shape& shape) const;
  Tensor flatten() const;
  Tensor index(std::initializer_list<TensorIndex> indices) const;
  Tensor index(const std::vector<TensorIndex>& indices) const;
  Tensor operator[](int64_t i) const;
  // Writes `value` (broadcast) into the indexed positions, in place (NumPy's t[idx] = v).
  Tensor& index_put_(const std::vector<TensorIndex>& indices, const Tensor& value);
  Tensor& index_put_(const std::vector<TensorIndex>& indices, Scalar value);
  Tensor& fill_(Scalar value);
  Tensor& copy_(const Tensor& src);  // broadcasts src into this view

  // --- reductions (loom/ops)
  Tensor sum(const Axes& axes = {}, bool keepdims = false) const;
  Tensor mean(const Axes& axes = {}, bool keepdims = false) const;
  Tensor max(const Axes& axes = {}, bool keepdims = false) const;
  Tensor min(const Axes& axes = {}, bool keepdims = false) const;
  template <AxisIndex I> Tensor sum(I axis, bool keepdims = false) const { return sum(Axes{int64_t(axis)}, keepdims); }
  template <AxisIndex I> Tensor mean(I axis, bool keepdims = false) const { return mean(Axes{int64_t(axis)}, keepdims); }
  template <AxisIndex I> Tensor max(I axis, bool keepdims = false) const { return max(Axes{int64_t(axis)}, keepdims); }
  template <AxisIndex I> Tensor min(I axis, bool keepdims = false) const { return min(Axes{int64_t(axis)}, keepdims); }
  Tensor argmax(std::optional<int64_t> axis = std::nullopt, bool keepdims = false) const;
  Tensor argmin(std::optional<int64_t> axis = std::nullopt, bool keepdims = false) const;

  // --- autograd (loom/autograd)
  bool requires_grad() const;
  Tensor& requires_grad_(bool value = true);  // only on leaves
  bool is_leaf() const;
  Tensor grad() const;  // accumulated gradient, undefined before backward
  void zero_grad();     // drops the accumulated gradient
  void backward(const Tensor& seed = Tensor()) const;
  Tensor detach() const;  // same storage, no history
  const std::shared_ptr<Node>& grad_fn() const;

  // --- 0-d / one-element tensors behave like scalars
  explicit operator bool() const;

  std::string str() const;  // NumPy-like text, elided when large

 private:
  std::shared_ptr<TensorImpl> impl_;
};

struct LOOM_API TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;
  int64_t offset = 0;
  DType dtype = DType::Float32;
  // autograd
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;        // the op that made this tensor; null for leaves
  std::shared_ptr<TensorImpl> grad;     // accumulated gradient of a leaf
  std::weak_ptr<Node> grad_accumulator; // the leaf's sink node, made on first use
};

LOOM_API std::ostream& operator<<(std::ostream& os, const Tensor& t);

// The accessors every op calls several times are inline (measured: out of line, their calls
// and checks were a fifth of a one-element add).
namespace detail {
[[noreturn]] LOOM_API void throw_undefined_tensor(const char* what);
}

inline const Shape& Tensor::shape() const {
  if (!impl_) [[unlikely]] detail::throw_undefined_tensor("shape");
  return impl_->shape;
}
inline const Strides& Tensor::strides() const {
  if (!impl_) [[unlikely]] detail::throw_undefined_tensor("strides");
  return impl_->strides;
}
inline int64_t Tensor::offset() const {
  if (!impl_) [[unlikely]] detail::throw_undefined_tensor("offset");
  return impl_->offset;
}
inline int64_t Tensor::ndim() const { return static_cast<int64_t>(shape().size()); }
inline DType Tensor::dtype() const {
  if (!impl_) [[unlikely]] detail::throw_undefined_tensor("dtype");
  return impl_->dtype;
}
inline Device Tensor::device() const {
  if (!impl_) [[unlikely]] detail::throw_undefined_tensor("device");
  return impl_->storage->device();
}
inline void* Tensor::data_ptr() const {
  if (!impl_) [[unlikely]] detail::throw_undefined_tensor("data_ptr");
  char* base = static_cast<char*>(impl_->storage->data());
  // an empty storage has no buffer: neither has a view of it, whatever its offset
  return base ? base + impl_->offset * static_cast<int64_t>(loom::itemsize(impl_->dtype)) : nullptr;
}
inline bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }

}  // namespace loom
