#pragma once
// The kernel table of one device. Ops (src/ops/*.cpp) check arguments, infer shapes and
// dtypes, allocate outputs and record gradients; kernels only compute. Each backend registers
// its table explicitly from its init function (see register_cpu_backend).
//
// A kernel's slot is declared beside its op, in the op's source (KernelSlot, at the end of this
// file), and filled by name in its kernel file's add_<file>_kernels: adding an op with a kernel
// does not touch this file. Only the slots that many op files call stay in the shared table
// (BackendSlots below): copy (internal.cpp, manipulation.cpp, in_place.cpp, tensor_methods.cpp,
// the linalg sources), fill (creation.cpp, tensor_methods.cpp, linalg_decompositions.cpp) and
// binary (elementwise.cpp, in_place.cpp, fused_elementwise.cpp). They are what every op's
// contiguous copies, constants and arithmetic come down to, so a backend fills all three
// (register.cpp refuses a table with one unfilled).
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <typeinfo>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom::detail {

// ReluGrad (floating point only): a where b > 0 or b is NaN, else 0 -- relu's backward (a: the
// output gradient, b: relu's output) in one pass, as PyTorch's threshold_backward.
enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Pow, Max, Min, Mod, FloorDiv, Eq, Ne, Lt, Le, Gt, Ge, And, Or, Xor, ReluGrad };
enum class UnaryOp : uint8_t {
  Neg, Abs, Sign, Exp, Log, Log1p, Expm1, Sqrt, Rsqrt, Square, Sin, Cos, Tanh, Sigmoid, Erf, Relu, Floor, Ceil, Round, Not
};
enum class ReduceOp : uint8_t { Sum, Prod, Max, Min, All, Any, ArgMax, ArgMin };
enum class RandomKind : uint8_t { Uniform, Normal, Bernoulli, Integer };

// Geometry of a 2-d convolution over NCHW tensors ([0] = height, [1] = width). pad_r only
// decides output sizes (it may be negative for a transposed convolution's output_padding).
struct Conv2dParams {
  int64_t stride[2];
  int64_t pad_l[2];
  int64_t pad_r[2];
  int64_t dilation[2];
  int64_t groups;
  // forward only: no gradient will be taken of this call (grad mode off, or no operand
  // requires grad), so the backend may use inference primitives and cached prepared weights
  bool inference = false;
};

// The inference epilogue of a fused convolution, applied in this order to conv(x, w) + bias:
// batch norm with running statistics (when bn_mean is defined; folded into the weights and
// bias; bn_weight / bn_bias optional), + residual (when defined; out's shape), ReLU.
struct FusedConv {
  Tensor bn_weight, bn_bias, bn_mean, bn_var;
  double bn_eps = 1e-5;
  Tensor residual;
  bool relu = false;
  // Plan-internal blocked layouts (graph compiler only; docs/compile.md): x, and out with the
  // residual, hold the backend's blocked activation layout (conv2d_blocked) instead of NCHW.
  bool x_blocked = false, out_blocked = false;
  // The caller gives the residual up (the graph plan, when no later step reads it): where
  // nothing else holds its storage, the output is written into its buffer.
  bool write_into_residual = false;
};

// A chain of float32 elementwise ops over operands of one shape (ops/fused_elementwise.h): acc =
// inputs[start], then each step in order: acc = acc op inputs[operand] (or inputs[operand] op
// acc when !acc_first) for Add/Sub/Mul, acc = f(acc) for the activations.
struct ElementwiseChain {
  enum class Op : uint8_t { Add, Sub, Mul, Relu, Sigmoid, Tanh };
  struct Step {
    Op op;
    int operand = -1;  // binary steps: the other operand's index in the inputs
    bool acc_first = true;
  };
  int start = 0;
  std::vector<Step> steps;
};

// Geometry of a 2-d pooling window over NCHW tensors.
struct Pool2dParams {
  int64_t kernel[2];
  int64_t stride[2];
  int64_t pad[2];
  int64_t dilation[2];
  bool count_include_pad;  // avg only
  int64_t divisor;         // avg only: > 0 overrides the window size
};

// The first failure of a batched linear-algebra kernel: the batch item and LAPACK's info
// (info > 0: singular / not positive-definite / no convergence; item -1: all succeeded).
struct LinalgStatus {
  int64_t item = -1;
  int64_t info = 0;
};

// One optimizer step's scalars for the backend's fused updates (torch.optim's rules, written out
// in include/loom/train/optimizers.h). The kernels round each to the parameter's dtype, as the
// tensor-op path does; grad_scale multiplies each gradient value as it is read (1: as it is).
// The updates' slots are declared beside their optimizers (src/train/sgd.cpp, adam.cpp,
// rmsprop.cpp, adagrad.cpp; KernelSlot) and filled by src/ops/cpu/optimizers.cpp. Each updates
// elements [begin, end) of contiguous tensors of one dtype, float32 or float64, in place; an
// undefined state tensor is an option that is off. Scalars and operations in the tensor-op
// path's order, so the two agree bit for bit (float32 Adam may contract into FMAs where the ISA
// has them). A vector loop may round its tail differently from its body, so callers split a
// tensor only at fixed offsets to get the same bits at any thread count. Unfilled (if_filled):
// the optimizer runs tensor ops.
struct SGDStep {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
  bool first;  // the momentum buffer's first step: buf = g
  double grad_scale;
};
struct AdamStep {
  double decay;      // AdamW: 1 - lr * weight_decay (1: none)
  double l2;         // Adam: weight_decay added to the gradient (0: none)
  double beta1, beta2;
  double step_size;  // lr / (1 - beta1^t)
  double bc2_sqrt;   // sqrt(1 - beta2^t)
  double eps;
  double grad_scale;
};
struct RMSPropStep {
  double lr, alpha, eps, weight_decay, momentum;
};
struct AdagradStep {
  double lr;  // already decayed: lr / (1 + (t - 1) lr_decay)
  double weight_decay, eps;
};

// Fused scaled dot-product attention (ops/attention.h) over contiguous q (B, H, L, E), k (B, Hkv,
// S, E), v (B, Hkv, S, Ev), all of one float dtype, L, S, E, Ev >= 1: query head h reads key /
// value head h / group (group = H / Hkv; grouped-query attention without copying k and v).
struct AttentionParams {
  int64_t B = 1, H = 1, Hkv = 1, L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1;
  bool causal = false;  // j > i masked (top-left aligned)
  // Optional mask, bool (true = attend) or of the operands' dtype (added to the scaled
  // scores): element (b * H + h, i, j) at mask_offset[b * H + h] + i * mask_stride_l +
  // j * mask_stride_s (zero strides: broadcast), so a (N, 1, 1, S) padding mask is read as it is.
  Tensor mask;
  std::vector<int64_t> mask_offset;
  int64_t mask_stride_l = 0, mask_stride_s = 0;
  // Dropout on the attention weights: weight (bh, i, j) kept, times 1 / (1 - p), where
  // unit53(random_mix(dropout_key, (bh * L + i) * S + j)) < 1 - p: bernoulli's draw over the
  // scores' shape with that key, so the math form with dropout reproduces it.
  double dropout_p = 0;
  uint64_t dropout_key = 0;
  // Elements between consecutive (batch, head) planes of k and v, whose rows are contiguous; 0
  // for packed planes (S * E, S * Ev). A cached decoder's keys are a prefix of each head's
  // preallocated rows, read where they lie instead of copied at every step.
  int64_t k_plane_stride = 0, v_plane_stride = 0;
  // The forward writes the output's rows as (B, L, H, Ev) instead of (B, H, L, Ev): row i of
  // plane (b, h) at ((b * L + i) * H + h) * Ev (the backward reads them packed). The op returns
  // it as a (B, H, L, Ev) view, so that merging the heads back into (B, L, H * Ev), as every
  // attention layer does next, is a view too: one buffer, not two, is kept for the backward
  // of both the attention and the output projection.
  bool out_heads_inner = false;
};

// The shared table (see the top of this file): a slot used by many op files belongs here, every
// other one beside its op (KernelSlot). Function pointers only (register.cpp reads them as an
// array to refuse a table with one unfilled).
struct BackendSlots {
  // dst and src have the same shape (src may be a broadcast view); converts dtypes.
  void (*copy)(const Tensor& dst, const Tensor& src);
  void (*fill)(const Tensor& dst, Scalar value);
  // a and b are views broadcast to out's shape, both of the compute dtype; comparisons and
  // logical ops write bool.
  void (*binary)(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
};

// The kernels a backend fills into slots declared beside their ops (KernelSlot), by the slot's
// name ("<family>.<kernel>"), each with its type: `b.kernels.fill("linalg.cholesky", &cholesky)`.
// (LOOM_INTERNAL: its unit test reaches it.)
class LOOM_INTERNAL KernelFills {
 public:
  template <class Fn>
  void fill(const char* slot, Fn* kernel) {
    add(slot, typeid(Fn), reinterpret_cast<void (*)()>(kernel));
  }
  // The kernel filled into `slot` if it has type `type`; std::logic_error naming the slot when
  // none is, or when the kernel's signature is not the slot's.
  void (*find(const char* slot, const std::type_info& type) const)();
  // The same, but null when no kernel fills `slot` (a slot whose op has a composite to fall back
  // on); still std::logic_error for another signature.
  void (*find_if_filled(const char* slot, const std::type_info& type) const)();
  // std::logic_error for a slot filled twice (every test fails on it: the table is built on first use).
  void add(const char* slot, const std::type_info& type, void (*kernel)());

 private:
  struct Entry {
    std::string slot;
    const std::type_info* type;
    void (*kernel)();
  };
  std::vector<Entry> entries_;
};

struct Backend : BackendSlots {
  KernelFills kernels;
};

const Backend& backend(Device device);
void register_backend(DeviceType type, const Backend* table);
void register_cpu_backend();

// A kernel slot declared beside its op, in the op's source: its name and its signature, the
// kernel's contract in a comment above it, e.g.
//
//   // a <- L with a = L L^T; fails when a is not positive-definite.
//   constinit const detail::KernelSlot<detail::LinalgStatus(const Tensor& a)> kCholesky{"linalg.cholesky"};
//   ... kCholesky(a.device())(buf) ...
//
// and filled by its kernel file's add_<file>_kernels by the same name. The two spell the
// signature each, and the first call on a device checks that they agree: a slot no kernel of
// the device fills, or fills with another signature, is a std::logic_error naming the slot (so
// the op's own tests fail), never a call through the wrong type. The kernel found is kept, so a
// later call costs one atomic load. A fused fast path whose op has a composite to fall back on
// asks if_filled instead: null where the device fills no kernel. A slot two op files call is
// declared in a private header of the part (ops/indexing_internal.h) and defined in one of them.
template <class Fn>
class KernelSlot {
 public:
  constexpr explicit KernelSlot(const char* name) : name_(name) {}

  Fn* operator()(Device device) const {
    std::atomic<Fn*>& cached = cache_[static_cast<size_t>(device.type)];
    Fn* kernel = cached.load(std::memory_order_acquire);
    if (!kernel) {
      kernel = reinterpret_cast<Fn*>(backend(device).kernels.find(name_, typeid(Fn)));
      cached.store(kernel, std::memory_order_release);
    }
    return kernel;
  }

  // For a slot whose op falls back on its composite where the device has no kernel (a fused fast
  // path): the kernel, or null when the device fills none. A filled slot costs one atomic load
  // after the first call, an unfilled one two.
  Fn* if_filled(Device device) const {
    const size_t d = static_cast<size_t>(device.type);
    Fn* kernel = cache_[d].load(std::memory_order_acquire);
    if (kernel || absent_[d].load(std::memory_order_acquire)) return kernel;
    kernel = reinterpret_cast<Fn*>(backend(device).kernels.find_if_filled(name_, typeid(Fn)));
    if (kernel)
      cache_[d].store(kernel, std::memory_order_release);
    else
      absent_[d].store(true, std::memory_order_release);
    return kernel;
  }

 private:
  const char* name_;
  mutable std::array<std::atomic<Fn*>, 2> cache_{};  // by DeviceType (CPU, CUDA)
  mutable std::array<std::atomic<bool>, 2> absent_{};  // looked up and unfilled (if_filled)
};

}  // namespace loom::detail
