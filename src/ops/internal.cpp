#include "ops/internal.h"

#include "loom/core/describe.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"

namespace loom::detail {

Tensor alloc(const Shape& shape, DType dtype, Device device, const char* op) {
  const int64_t nbytes = shape_nbytes(shape, itemsize(dtype), op);
  // built directly, not through Tensor's view constructor: a contiguous tensor over a storage
  // of exactly its size needs none of that constructor's checks (shape_nbytes did them)
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(nbytes), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor cast_raw(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = alloc(t.shape(), dtype, t.device());
  backend(t.device()).copy(out, t);
  return out;
}

Tensor contiguous_raw(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = alloc(t.shape(), t.dtype(), t.device());
  backend(t.device()).copy(out, t);
  return out;
}

Tensor broadcast_view(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  const size_t n = shape.size(), m = t.shape().size();
  Strides st(n, 0);
  for (size_t i = 0; i < m; ++i) {
    const size_t j = n - m + i;
    st[j] = t.shape()[i] == 1 && shape[j] != 1 ? 0 : t.strides()[i];
  }
  return Tensor(t.storage(), shape, st, t.offset(), t.dtype());
}

std::string describe_operands(std::initializer_list<const Tensor*> ts) {
  std::string s;
  const char* names[] = {"a", "b", "c", "d"};
  size_t i = 0;
  for (const Tensor* t : ts) {
    if (!s.empty()) s += ", ";
    s += std::string(i < 4 ? names[i] : "x") + ": " + describe(*t);
    ++i;
  }
  return s;
}

void check_defined(const Tensor& t, const char* op) {
  if (!t.defined()) throw ValueError(std::string(op) + ": an operand is an undefined (default-constructed) tensor");
}

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  if (a.device() != b.device())
    throw DeviceError(std::string(op) + ": operands are on " + a.device().str() + " and " + b.device().str() +
                      "; move one with .to(device) so both are on the same device");
}

void check_device(Device device, const char* op) {
  if (device.type != DeviceType::CPU)  // the only device with an allocator and kernels in this build
    throw DeviceError(std::string(op) + ": device " + device.str() + " is not available in this build (valid: cpu:0)");
}

void check_no_overlap(const Tensor& t, const char* op) {
  if (has_internal_overlap(t.shape(), t.strides()))
    throw ValueError(std::string(op) + ": unsupported in-place write: more than one element of the target (shape " +
                     shape_str(t.shape()) + ", strides " + shape_str(t.strides()) +
                     ") refers to the same memory, as in a broadcast view; write into a copy() or into the tensor "
                     "that was broadcast");
}

void begin_write(const Tensor& t, const char* op) {
  check_no_overlap(t, op);
  t.storage()->bump_version();
}

namespace {
thread_local const char* backward_op = nullptr;  // the node FunctionNode::apply is running
}

void SavedTensor::throw_modified() const {
  const std::string op = backward_op ? backward_op : "an op";
  throw AutogradError("backward of " + op + ": a tensor needed for its gradient (" + dtype_name(t_.dtype()) + " " +
                      shape_str(t_.shape()) + ") was modified by an in-place operation after " + op +
                      " ran (storage version " + std::to_string(t_.storage()->version()) + ", saved at version " +
                      std::to_string(version_) + "); apply the in-place update to a copy, or after backward");
}

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t->requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

namespace {

struct Running {  // names the node whose rule runs in a SavedTensor's error
  const char* prev;
  explicit Running(const char* op) : prev(backward_op) { backward_op = op; }
  ~Running() { backward_op = prev; }
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;
};

class FunctionNode final : public Node {
 public:
  FunctionNode(const char* op, const std::vector<Tensor>& inputs, BackwardFn fn, AddIntoFn add_into = nullptr)
      : op_(op), fn_(std::move(fn)), add_into_(std::move(add_into)) {
    for (const Tensor& t : inputs) {
      next.push_back(gradient_edge(t));
      shapes_.push_back(t.shape());
      dtypes_.push_back(t.dtype());
    }
  }
  std::vector<Tensor> apply(const Tensor& grad) override {
    const Running running(op_);
    if (!fn_)
      throw AutogradError(std::string("backward of ") + op_ +
                          ": the graph has been run backward already and the tensors saved for it were freed; "
                          "pass retain_graph = true to the first backward() to run it again");
    std::vector<Tensor> gs = fn_(grad);
    if (gs.size() != next.size())
      throw AutogradError(std::string("backward of ") + op_ + " returned " + std::to_string(gs.size()) +
                          " gradients for " + std::to_string(next.size()) + " inputs");
    for (size_t i = 0; i < gs.size(); ++i) {
      if (!gs[i].defined() || !next[i]) continue;
      gs[i] = sum_to(gs[i], shapes_[i]);
      if (gs[i].dtype() != dtypes_[i]) gs[i] = cast_raw(gs[i], dtypes_[i]);
    }
    return gs;
  }
  bool add_into(const Tensor& grad, Tensor& sum) override {
    if (!add_into_ || !fn_ || next.size() != 1 || sum.shape() != shapes_[0] || sum.dtype() != dtypes_[0] ||
        !sum.is_contiguous())
      return false;
    const Running running(op_);
    return add_into_(grad, sum);
  }
  const char* name() const override { return op_; }
  void release() override {  // the rule's captures hold the saved tensors
    fn_ = nullptr;
    add_into_ = nullptr;
  }

 private:
  const char* op_;
  BackwardFn fn_;
  AddIntoFn add_into_;
  std::vector<Shape> shapes_;
  std::vector<DType> dtypes_;
};

}  // namespace

namespace {
Tensor attach(const std::vector<Tensor>& inputs, Tensor out, std::shared_ptr<Node> node) {
  for (const Tensor& t : inputs)
    if (t.impl() == out.impl()) out = out.detach();  // never overwrite an input's history
  out.impl()->requires_grad = true;
  out.impl()->grad_fn = std::move(node);
  return out;
}
}  // namespace

Tensor record(const char* op, const std::vector<Tensor>& inputs, Tensor out, BackwardFn fn) {
  return attach(inputs, std::move(out), std::make_shared<FunctionNode>(op, inputs, std::move(fn)));
}

Tensor record(const char* op, const Tensor& input, Tensor out, BackwardFn fn, AddIntoFn add_into) {
  std::vector<Tensor> inputs{input};
  auto node = std::make_shared<FunctionNode>(op, inputs, std::move(fn), std::move(add_into));
  return attach(inputs, std::move(out), std::move(node));
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int64_t lead = g.ndim() - static_cast<int64_t>(shape.size());
  Axes axes;
  for (int64_t i = 0; i < g.ndim(); ++i)
    if (i < lead || (shape[i - lead] == 1 && g.shape()[i] != 1)) axes.push_back(i);
  Tensor s = axes.empty() ? g : sum(g, axes, true);
  return reshape(s, shape);
}

}  // namespace loom::detail
