#pragma once
// Helpers shared by the op implementations: allocation, raw (unrecorded) conversions, and
// recording of an op's backward rule.
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "loom/core/grad_mode.h"
#include "loom/core/node.h"
#include "loom/core/tensor.h"
#include "ops/backend.h"

namespace loom::detail {

// The 16-bit floats (float16, bfloat16) have no kernels of their own: they are computed in
// float32 and rounded once to the result's dtype. is_half_float says which dtypes those are,
// kernel_dtype the dtype a kernel computes values of dtype d in (float32 for them, d otherwise).
inline bool is_half_float(DType d) { return d == DType::Float16 || d == DType::BFloat16; }
inline DType kernel_dtype(DType d) { return is_half_float(d) ? DType::Float32 : d; }

// A new contiguous tensor (uninitialised); an invalid shape throws ShapeError naming `op`.
Tensor alloc(const Shape& shape, DType dtype, Device device, const char* op = "alloc");
// Raw conversions: no autograd recording.
Tensor cast_raw(const Tensor& t, DType dtype);        // itself when the dtype matches
Tensor contiguous_raw(const Tensor& t);               // itself when contiguous
Tensor broadcast_view(const Tensor& t, const Shape& shape);  // zero strides, no checks
// "op: ..." description of operands for error messages: "a: float32 (2, 3), b: int64 (3,)".
std::string describe_operands(std::initializer_list<const Tensor*> ts);
void check_defined(const Tensor& t, const char* op);
void check_same_device(const Tensor& a, const Tensor& b, const char* op);
// Throws a DeviceError naming `op` when this build cannot make tensors on `device`.
void check_device(Device device, const char* op);

// Every in-place write (compound assignment, fill_, copy_, index_put_, optimizer updates, the
// running statistics of batch_norm) goes through this before touching memory: it refuses a
// target whose elements overlap (a broadcast view: NumPy and PyTorch refuse it too) with a
// ValueError naming `op`, and bumps the storage version that saved tensors are checked against.
void begin_write(const Tensor& target, const char* op);
// Throws the ValueError of begin_write when `target` has overlapping elements.
void check_no_overlap(const Tensor& target, const char* op);

// A tensor an op keeps for its backward rule (capture `[xd = detail::save(x)]`): a detached
// handle and the storage version at save time. Reading it (get() or the implicit conversion)
// throws AutogradError naming the op being differentiated when an in-place write has changed
// the storage since, instead of computing a wrong gradient (PyTorch's saved-tensor check).
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t) : t_(t.defined() ? t.detach() : Tensor()), version_(t.defined() ? t.storage()->version() : 0) {}
  const Tensor& get() const {
    if (t_.defined() && t_.storage()->version() != version_) [[unlikely]] throw_modified();
    return t_;
  }
  operator const Tensor&() const { return get(); }  // NOLINT: reads like the Tensor it holds
  // metadata does not change with in-place writes: no check
  bool defined() const { return t_.defined(); }
  const Shape& shape() const { return t_.shape(); }
  int64_t ndim() const { return t_.ndim(); }
  int64_t numel() const { return t_.numel(); }
  DType dtype() const { return t_.dtype(); }
  Device device() const { return t_.device(); }

 private:
  [[noreturn]] void throw_modified() const;
  Tensor t_;
  uint64_t version_ = 0;
};
inline SavedTensor save(const Tensor& t) { return SavedTensor(t); }

// Backward rule: gradients of the inputs from the output's gradient; undefined = zero.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad)>;

// Adds the gradient of a one-input rule into `sum` (Node::add_into); false when it cannot.
using AddIntoFn = std::function<bool(const Tensor& grad, Tensor& sum)>;

// True when recording is on and some input requires grad.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);
// Attaches `fn` as the grad_fn of `out`. Input gradients are summed back to each input's
// shape (undoing broadcasting) and converted to its dtype by the node itself.
Tensor record(const char* op, const std::vector<Tensor>& inputs, Tensor out, BackwardFn fn);
// The same for a one-input op whose rule can also add its gradient into a sum in place.
Tensor record(const char* op, const Tensor& input, Tensor out, BackwardFn fn, AddIntoFn add_into);

// Sums g over broadcast axes so that it has `shape`.
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace loom::detail
