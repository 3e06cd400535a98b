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

// A new contiguous tensor (uninitialised).
Tensor alloc(const Shape& shape, DType dtype, Device device);
// Raw conversions: no autograd recording.
Tensor cast_raw(const Tensor& t, DType dtype);        // itself when the dtype matches
Tensor contiguous_raw(const Tensor& t);               // itself when contiguous
Tensor broadcast_view(const Tensor& t, const Shape& shape);  // zero strides, no checks
// "op: ..." description of operands for error messages: "a: float32 (2, 3), b: int64 (3,)".
std::string describe(std::initializer_list<const Tensor*> ts);
void check_defined(const Tensor& t, const char* op);
void check_same_device(const Tensor& a, const Tensor& b, const char* op);
// Throws a DeviceError naming `op` when this build cannot make tensors on `device`.
void check_device(Device device, const char* op);

// Backward rule: gradients of the inputs from the output's gradient; undefined = zero.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad)>;

// True when recording is on and some input requires grad.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);
// Attaches `fn` as the grad_fn of `out`. Input gradients are summed back to each input's
// shape (undoing broadcasting) and converted to its dtype by the node itself.
Tensor record(const char* op, const std::vector<Tensor>& inputs, Tensor out, BackwardFn fn);

// Sums g over broadcast axes so that it has `shape`.
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace loom::detail
