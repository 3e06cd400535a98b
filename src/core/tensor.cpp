#include "loom/core/tensor.h"

#include <cmath>
#include <cstring>
#include <mutex>

#include "loom/core/grad_mode.h"
#include "loom/core/node.h"

namespace loom {

namespace {

double read_double(const void* p, DType d) {
  switch (d) {
    case DType::Bool: return *static_cast<const bool*>(p) ? 1.0 : 0.0;
    case DType::UInt8: return *static_cast<const uint8_t*>(p);
    case DType::Int32: return *static_cast<const int32_t*>(p);
    case DType::Int64: return static_cast<double>(*static_cast<const int64_t*>(p));
    case DType::Float16: return static_cast<float>(*static_cast<const half*>(p));
    case DType::BFloat16: return static_cast<float>(*static_cast<const bfloat16*>(p));
    case DType::Float32: return *static_cast<const float*>(p);
    case DType::Float64: return *static_cast<const double*>(p);
  }
  return 0;
}

void require_cpu(const Tensor& t, const char* what) {
  if (t.device().type != DeviceType::CPU)
    throw DeviceError(std::string(what) + ": the tensor is on " + t.device().str() +
                      "; host access needs a cpu tensor (use .to(Device::cpu()))");
}

}  // namespace

TensorIndex::TensorIndex(const Tensor& t) : v_(std::make_shared<Tensor>(t)) {}

namespace {

// Every tensor, view or not, is made here: its shape must be valid (shape_nbytes) and its
// elements must lie inside the storage, so no later size or address computation overflows.
void check_view(const Storage* storage, const Shape& shape, const Strides& strides, int64_t offset, DType dtype) {
  const size_t isz = loom::itemsize(dtype);
  shape_nbytes(shape, isz, "tensor");
  if (strides.size() != shape.size())
    throw ShapeError("tensor: " + std::to_string(strides.size()) + " strides for shape " + shape_str(shape) +
                     " (valid: one stride per axis)");
  if (!storage) throw ValueError("tensor: the storage is null");
  int64_t lo = offset, hi = offset;
  bool ok = offset >= 0;
  for (size_t i = 0; ok && i < shape.size(); ++i) {
    if (shape[i] == 0) return;  // no element to place
    int64_t span;
    if (__builtin_mul_overflow(shape[i] - 1, strides[i], &span)) ok = false;
    else if (span < 0) ok = !__builtin_add_overflow(lo, span, &lo);
    else ok = !__builtin_add_overflow(hi, span, &hi);
  }
  const int64_t capacity = static_cast<int64_t>(storage->nbytes() / isz);
  if (!ok || lo < 0 || hi >= capacity)
    throw ValueError("tensor: a view with shape " + shape_str(shape) + ", strides " + shape_str(strides) + " and offset " +
                     std::to_string(offset) + " reaches outside its storage of " + std::to_string(capacity) +
                     " elements (valid element offsets: 0 to " + std::to_string(capacity - 1) + ")");
}

}  // namespace

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Strides strides, int64_t offset, DType dtype) {
  check_view(storage.get(), shape, strides, offset, dtype);
  impl_ = std::make_shared<TensorImpl>();
  impl_->storage = std::move(storage);
  impl_->shape = std::move(shape);
  impl_->strides = std::move(strides);
  impl_->offset = offset;
  impl_->dtype = dtype;
}

void detail::throw_undefined_tensor(const char* what) {
  throw ValueError(std::string(what) + ": the tensor is undefined (default-constructed)");
}

#define LOOM_REQUIRE_DEFINED(what) \
  if (!impl_) detail::throw_undefined_tensor(what)

// --- assignment to a temporary: a write through the view (the declaration says why)

namespace {

constexpr const char* kAssign = "assignment to an indexed tensor (t[i] = v, t.index({...}) = v)";

// Refuses what copy_ and fill_ would let through silently or name by their own names: a write
// nobody can see, and writes autograd would not record.
void check_assignment(const Tensor& target, const Tensor* value) {
  // Only this temporary holds the storage (an advanced index's copy, an op's fresh result): the
  // write would vanish with it at the end of the statement.
  if (target.storage().use_count() == 1)
    throw ValueError(std::string(kAssign) + ": the tensor assigned to is a temporary that shares its storage with " +
                     "no other tensor, so the write would be lost; an integer-array or mask index makes a copy: " +
                     "write through one with t.index_put_({indices}, v) (t[i] and slices are views and can be " +
                     "assigned to)");
  if (!grad_enabled()) return;
  if (target.requires_grad())
    throw AutogradError(std::string(kAssign) + ": the tensor requires grad and autograd does not record writes " +
                        "into it; write under NoGrad (to set a parameter's values), or make a new tensor with " +
                        "index_put(t, indices, v), which is differentiable");
  if (value && value->requires_grad())
    throw AutogradError(std::string(kAssign) + ": the value requires grad and autograd does not record the write; " +
                        "assign v.detach(), or make a new tensor with index_put(t, indices, v), which is " +
                        "differentiable");
}

}  // namespace

Tensor& Tensor::operator=(const Tensor& value) && {
  LOOM_REQUIRE_DEFINED(kAssign);
  if (!value.defined()) throw ValueError(std::string(kAssign) + ": the value is undefined (a default-constructed Tensor)");
  check_assignment(*this, &value);
  return copy_(value);
}

Tensor& Tensor::operator=(Scalar value) && {
  LOOM_REQUIRE_DEFINED(kAssign);
  check_assignment(*this, nullptr);
  return fill_(value);
}

int64_t Tensor::dim(int64_t axis) const { return shape()[normalize_axis(axis, ndim(), "dim")]; }
int64_t Tensor::numel() const { return shape_numel(shape()); }
size_t Tensor::itemsize() const { return loom::itemsize(dtype()); }
size_t Tensor::nbytes() const { return static_cast<size_t>(numel()) * itemsize(); }
const std::shared_ptr<Storage>& Tensor::storage() const { LOOM_REQUIRE_DEFINED("storage"); return impl_->storage; }
bool Tensor::shares_storage_with(const Tensor& o) const { return defined() && o.defined() && storage() == o.storage(); }

bool Tensor::is_contiguous() const {
  const Shape& s = shape();
  const Strides& st = strides();
  // one pass: an empty tensor (a 0 anywhere) has no element to misplace (NumPy agrees); the
  // product cannot overflow, a valid shape's nonzero dims fit in int64
  int64_t expected = 1;
  bool packed = true;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == 0) return true;
    if (s[i] == 1) continue;
    if (st[i] != expected) packed = false;
    expected *= s[i];
  }
  return packed;
}


template <typename T>
T* Tensor::data() const {
  LOOM_REQUIRE_DEFINED("data<T>");
  if (dtype_of<T>() != dtype())
    throw DTypeError(std::string("data<T>: the tensor holds ") + dtype_name(dtype()) + ", not " +
                     dtype_name(dtype_of<T>()));
  return static_cast<T*>(data_ptr());
}

double Tensor::at(const std::vector<int64_t>& index) const {
  LOOM_REQUIRE_DEFINED("at");
  require_cpu(*this, "at");
  if (static_cast<int64_t>(index.size()) != ndim())
    throw IndexError("at: got " + std::to_string(index.size()) + " indices for a tensor of shape " + shape_str(shape()) +
                     " (valid: exactly " + std::to_string(ndim()) + ")");
  int64_t off = 0;
  for (size_t i = 0; i < index.size(); ++i) {
    int64_t k = index[i] < 0 ? index[i] + shape()[i] : index[i];
    if (k < 0 || k >= shape()[i])
      throw IndexError("at: index " + std::to_string(index[i]) + " is out of bounds for axis " + std::to_string(i) +
                       " with size " + std::to_string(shape()[i]));
    off += k * strides()[i];
  }
  return read_double(static_cast<const char*>(data_ptr()) + off * static_cast<int64_t>(itemsize()), dtype());
}

// A stored value read as double, converted to T (to an integer T without undefined behaviour
// for NaN, infinities or out-of-range values: detail::float_to_int64, then T's width).
template <typename T>
static T from_double(double v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return static_cast<T>(detail::float_to_int64(v));
  else
    return static_cast<T>(v);
}

template <typename T>
T Tensor::item() const {
  LOOM_REQUIRE_DEFINED("item");
  require_cpu(*this, "item");
  if (numel() != 1)
    throw ValueError("item: the tensor has shape " + shape_str(shape()) + " (" + std::to_string(numel()) +
                     " elements); only a tensor with exactly one element converts to a scalar");
  const void* p = data_ptr();
  if (dtype() == DType::Int64) return static_cast<T>(*static_cast<const int64_t*>(p));
  return from_double<T>(read_double(p, dtype()));
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  LOOM_REQUIRE_DEFINED("to_vector");
  require_cpu(*this, "to_vector");
  std::vector<T> out;
  out.reserve(static_cast<size_t>(numel()));
  const int64_t n = numel();
  if (n == 0) return out;
  const size_t isz = itemsize();
  const char* base = static_cast<const char*>(data_ptr());
  std::vector<int64_t> idx(shape().size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = 0;
    for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * strides()[i];
    const char* p = base + off * static_cast<int64_t>(isz);
    if (dtype() == DType::Int64)
      out.push_back(static_cast<T>(*reinterpret_cast<const int64_t*>(p)));
    else
      out.push_back(from_double<T>(read_double(p, dtype())));
    for (size_t i = idx.size(); i-- > 0;) {
      if (++idx[i] < shape()[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

#define LOOM_INSTANTIATE(T)                          \
  template T* Tensor::data<T>() const;               \
  template T Tensor::item<T>() const;                \
  template std::vector<T> Tensor::to_vector<T>() const;
LOOM_INSTANTIATE(bool)
LOOM_INSTANTIATE(uint8_t)
LOOM_INSTANTIATE(int32_t)
LOOM_INSTANTIATE(int64_t)
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
template half* Tensor::data<half>() const;
template bfloat16* Tensor::data<bfloat16>() const;
#undef LOOM_INSTANTIATE

Tensor::operator bool() const {
  LOOM_REQUIRE_DEFINED("bool(tensor)");
  if (numel() != 1)
    throw ValueError("bool(tensor): the truth value of a tensor of shape " + shape_str(shape()) +
                     " is ambiguous; only one-element tensors convert (use any() or all())");
  return item<double>() != 0.0;
}

// --- autograd metadata (the engine lives in src/autograd)
bool Tensor::is_leaf() const { return !impl_ || !impl_->grad_fn; }
const std::shared_ptr<Node>& Tensor::grad_fn() const { LOOM_REQUIRE_DEFINED("grad_fn"); return impl_->grad_fn; }

Tensor& Tensor::requires_grad_(bool value) {
  LOOM_REQUIRE_DEFINED("requires_grad_");
  if (impl_->grad_fn)
    throw AutogradError("requires_grad_: only leaf tensors can change requires_grad; this tensor was made by " +
                        std::string(impl_->grad_fn->name()) + " (use detach() for a new leaf)");
  if (value && !is_floating(impl_->dtype))
    throw DTypeError(std::string("requires_grad_: only floating tensors can require gradients, got ") +
                     dtype_name(impl_->dtype));
  impl_->requires_grad = value;
  return *this;
}

Tensor Tensor::grad() const {
  LOOM_REQUIRE_DEFINED("grad");
  return impl_->grad ? Tensor(impl_->grad) : Tensor();
}

void Tensor::zero_grad() {
  LOOM_REQUIRE_DEFINED("zero_grad");
  impl_->grad.reset();
}

Tensor Tensor::detach() const {
  LOOM_REQUIRE_DEFINED("detach");
  return Tensor(impl_->storage, impl_->shape, impl_->strides, impl_->offset, impl_->dtype);
}

// The next nodes this one holds last are destroyed by the outermost ~Node on this thread, in
// a loop, instead of inside this destructor: dropping the output of a chain of a million ops
// (an RNN unrolled far, a deep graph) would otherwise nest a million destructors.
Node::~Node() {
  // the outermost destructor's list, on its stack (a thread_local object with a destructor
  // could be gone when a node dies during thread exit)
  thread_local std::vector<std::shared_ptr<Node>>* deferred = nullptr;
  std::vector<std::shared_ptr<Node>> mine;
  const bool outermost = deferred == nullptr;
  if (outermost) deferred = &mine;
  for (std::shared_ptr<Node>& n : next)
    if (n && n.use_count() == 1) deferred->push_back(std::move(n));
  if (!outermost) return;
  while (!mine.empty()) {
    std::shared_ptr<Node> n = std::move(mine.back());
    mine.pop_back();
    n.reset();  // may defer more, into `mine`
  }
  deferred = nullptr;
}

std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  if (!t.requires_grad()) return nullptr;
  const auto& impl = t.impl();
  if (impl->grad_fn) return impl->grad_fn;
  // Threads recording ops on one leaf at once (a model's weights under requests evaluated
  // without NoGrad) must all get its one sink, and must not write the weak_ptr while another
  // reads it: under AddressSanitizer two such threads had read a freed control block.
  static std::mutex sink_mutex;
  const std::lock_guard lock(sink_mutex);
  auto acc = impl->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(impl);
    impl->grad_accumulator = acc;
  }
  return acc;
}

}  // namespace loom
