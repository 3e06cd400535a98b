// 2-d pooling: argument checks, output sizes (PyTorch's pooling_output_shape) and gradients.
#include "loom/ops/pooling.h"

#include <limits>

#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"
#include "ops/nn_internal.h"
#include "ops/registry_parts.h"

namespace loom {

using detail::Pool2dParams;
using Grads = std::vector<Tensor>;

// In 128 bits (the operands at most 2^63, products at most 2^127); floor division.
int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation, bool ceil_mode) {
  const __int128 s = stride;
  const __int128 num = static_cast<__int128>(in) + 2 * static_cast<__int128>(padding) - static_cast<__int128>(dilation) * (kernel - 1) - 1 +
                       (ceil_mode ? s - 1 : 0);
  __int128 out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= static_cast<__int128>(in) + padding) --out;
  return out > INT64_MAX ? INT64_MAX : static_cast<int64_t>(out);
}

namespace {

using detail::KernelSlot;

// The kernels' slots, declared beside their ops (src/ops/backend.h, KernelSlot), filled by
// src/ops/cpu/pool.cpp. Float32/float64, contiguous NCHW operands, outputs allocated by the op.
// out = max over each window; indices (int64, or int32 for a gradient's own use) = flat
// h * W + w of the first maximum, or undefined when only the values are wanted (inference).
constinit const KernelSlot<void(const Tensor& out, const Tensor& indices, const Tensor& x, const Pool2dParams& p)>
    kMaxPool2d{"pool.max_pool2d"};
constinit const KernelSlot<void(const Tensor& out, const Tensor& x, const Pool2dParams& p)> kAvgPool2d{"pool.avg_pool2d"};
// gx (zeroed by the kernel) = the adjoint of avg_pool2d applied to gy.
constinit const KernelSlot<void(const Tensor& gx, const Tensor& gy, const Pool2dParams& p)>
    kAvgPool2dBackward{"pool.avg_pool2d_backward"};
// gx (N, C, H, W; zeroed by the kernel) receives gy (N, C, Ho, Wo) at the flat in-plane
// positions max_pool2d wrote to indices (int64 or int32), summed where windows overlap.
constinit const KernelSlot<void(const Tensor& gx, const Tensor& gy, const Tensor& indices)>
    kMaxPool2dBackward{"pool.max_pool2d_backward"};

struct PoolSetup {
  Tensor x4;  // (N, C, H, W)
  bool batched;
  Pool2dParams p;
  Shape out;
};

PoolSetup setup(const char* op, const Tensor& x, const IntList& kernel, const IntList& stride, const IntList& padding,
                const IntList& dilation, bool ceil_mode) {
  detail::check_defined(x, op);
  if (x.ndim() != 3 && x.ndim() != 4)
    throw ShapeError(std::string(op) + ": input x must be 3-d (C, H, W) or 4-d (N, C, H, W), got " + describe(x));
  detail::check_float(x, op, "input x");
  PoolSetup s{};
  s.batched = x.ndim() == 4;
  s.x4 = s.batched ? x : expand_dims(x, 0);
  const auto k = detail::per_axis(kernel.values(), 2, op, "kernel_size", 1);
  const auto st = stride.values().empty() ? k : detail::per_axis(stride.values(), 2, op, "stride", 1);
  const auto pad = detail::per_axis(padding.values(), 2, op, "padding", 0);
  const auto d = detail::per_axis(dilation.values(), 2, op, "dilation", 1);
  s.out = {s.x4.shape()[0], s.x4.shape()[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (pad[i] > k[i] / 2)
      throw ValueError(std::string(op) + ": padding " + detail::ints_str(pad) +
                       " must be at most half of kernel_size " + detail::ints_str(k));
    s.p.kernel[i] = k[i];
    s.p.stride[i] = st[i];
    s.p.pad[i] = pad[i];
    s.p.dilation[i] = d[i];
    const int64_t in = s.x4.shape()[2 + i];
    // the kernels' window arithmetic stays in int64 once these sums (of user values) do
    checked_add(checked_add(in, checked_mul(pad[i], 2, op), op), st[i], op);
    checked_add(checked_mul(d[i], k[i] - 1, op), 1, op);
    s.out[2 + i] = pool_output_size(in, k[i], st[i], pad[i], d[i], ceil_mode);
    if (s.out[2 + i] < 1)
      throw ShapeError(std::string(op) + ": the output would be empty along spatial axis " + std::to_string(i) +
                       " (input x: " + describe(x) + ", kernel_size " + detail::ints_str(k) + ", stride " +
                       detail::ints_str(st) + ", padding " + detail::ints_str(pad) + ", dilation " +
                       detail::ints_str(d) + ")");
  }
  s.p.count_include_pad = true;
  s.p.divisor = 0;
  return s;
}

Tensor unbatch(const Tensor& y, bool batched) { return batched ? y : squeeze(y, {0}); }

// gy (N, C, Ho, Wo) -> gx (N, C, H, W) for avg pooling; its own gradient is avg_pool.
Tensor avg_pool_fwd(const Tensor& x, const Pool2dParams& p, const Shape& out);
Tensor avg_pool_bwd(const Tensor& gy, const Pool2dParams& p, const Shape& in);

Tensor avg_pool_fwd(const Tensor& x, const Pool2dParams& p, const Shape& out) {
  const DType dt = x.dtype(), kd = detail::kernel_dtype(dt);
  Tensor y = detail::alloc(out, kd, x.device());
  kAvgPool2d(x.device())(y, detail::contiguous_raw(detail::cast_raw(x, kd)), p);
  y = detail::cast_raw(y, dt);
  if (!detail::needs_grad({&x})) return y;
  return detail::record("avg_pool2d", {x}, y, [p, in = x.shape()](const Tensor& g) {
    return Grads{avg_pool_bwd(g, p, in)};
  });
}

Tensor avg_pool_bwd(const Tensor& gy, const Pool2dParams& p, const Shape& in) {
  const DType dt = gy.dtype(), kd = detail::kernel_dtype(dt);
  Tensor gx = detail::alloc(in, kd, gy.device());
  kAvgPool2dBackward(gy.device())(gx, detail::contiguous_raw(detail::cast_raw(gy, kd)), p);
  gx = detail::cast_raw(gx, dt);
  if (!detail::needs_grad({&gy})) return gx;
  return detail::record("avg_pool2d_backward", {gy}, gx, [p, out = gy.shape()](const Tensor& G) {
    return Grads{avg_pool_fwd(G, p, out)};
  });
}

}  // namespace

namespace {

// Max pooling; the indices are computed only when asked for or when the gradient needs them
// (inference writes the values alone).
std::pair<Tensor, Tensor> max_pool(const Tensor& x, const IntList& kernel_size, const IntList& stride,
                                   const IntList& padding, const IntList& dilation, bool ceil_mode, bool want_indices) {
  const char* op = "max_pool2d";
  PoolSetup s = setup(op, x, kernel_size, stride, padding, dilation, ceil_mode);
  const Tensor& x4 = s.x4;
  const DType dt = x.dtype(), kd = detail::kernel_dtype(dt);
  const bool grad = detail::needs_grad({&x4});
  Tensor y = detail::alloc(s.out, kd, x.device());
  // PyTorch's int64 indices when asked for; a gradient alone keeps int32 ones (half the traffic)
  const bool narrow = !want_indices && x4.shape()[2] * x4.shape()[3] <= std::numeric_limits<int32_t>::max();
  Tensor idx = want_indices || grad ? detail::alloc(s.out, narrow ? DType::Int32 : DType::Int64, x.device()) : Tensor();
  kMaxPool2d(x.device())(y, idx, detail::contiguous_raw(detail::cast_raw(x4, kd)), s.p);
  y = detail::cast_raw(y, dt);
  if (grad) {
    y = detail::record("max_pool2d", {x4}, y, [idx = detail::save(idx), in = x4.shape()](const Tensor& g) {
      const DType gd = detail::kernel_dtype(g.dtype());
      Tensor gx = detail::alloc(in, gd, g.device());
      kMaxPool2dBackward(g.device())(gx, detail::contiguous_raw(detail::cast_raw(g, gd)), idx);
      return Grads{detail::cast_raw(gx, g.dtype())};
    });
  }
  return {unbatch(y, s.batched), idx.defined() ? unbatch(idx, s.batched) : idx};
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntList kernel_size, IntList stride, IntList padding,
                                                  IntList dilation, bool ceil_mode) {
  return max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, true);
}

Tensor max_pool2d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding, IntList dilation,
                  bool ceil_mode) {
  return max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, false).first;
}

Tensor avg_pool2d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding, bool ceil_mode,
                  bool count_include_pad, int64_t divisor_override) {
  const char* op = "avg_pool2d";
  if (divisor_override < 0)
    throw ValueError(std::string(op) + ": divisor_override must be positive (or 0 for none), got " +
                     std::to_string(divisor_override));
  PoolSetup s = setup(op, x, kernel_size, stride, padding, 1, ceil_mode);
  s.p.count_include_pad = count_include_pad;
  s.p.divisor = divisor_override;
  return unbatch(avg_pool_fwd(s.x4, s.p, s.out), s.batched);
}

Tensor global_avg_pool2d(const Tensor& x) {
  detail::check_rank(x, 4, "global_avg_pool2d", "input x", "(N, C, H, W)");
  detail::check_float(x, "global_avg_pool2d", "input x");
  if (x.shape()[2] == 0 || x.shape()[3] == 0)
    throw ShapeError("global_avg_pool2d: input x has an empty plane: " + describe(x));
  return mean(x, {2, 3}, true);
}

Tensor global_max_pool2d(const Tensor& x) {
  detail::check_rank(x, 4, "global_max_pool2d", "input x", "(N, C, H, W)");
  if (x.shape()[2] == 0 || x.shape()[3] == 0)
    throw ShapeError("global_max_pool2d: input x has an empty plane: " + describe(x));
  return max_pool2d(x, {x.shape()[2], x.shape()[3]});
}

}  // namespace loom

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> pooling_ops() {
  return {
      {"max_pool2d", "nn", true}, {"avg_pool2d", "nn", true}, {"global_avg_pool2d", "nn", true},
      {"global_max_pool2d", "nn", true},
  };
}

}  // namespace loom::detail
