// Convolutions: argument checks, output shapes and gradients. Everything is a 2-d convolution
// underneath (conv1d adds a unit height axis). Three recorded primitives close under
// differentiation (conv2d_transpose's forward is D, its gradients F and Wg):
//   F(x, w)       = conv(x, w)                       (forward)
//   D(gy, w)      = d F / d x applied to gy           (backward data = transposed convolution)
//   Wg(gy, x)     = d F / d w applied to gy           (backward weights)
// with dF = D(g, w), Wg(g, x);  dD = F(G, w), Wg(gy, G);  dWg = F(x, G), D(gy, G).
#include "loom/ops/conv.h"

#include <atomic>

#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/normalization.h"
#include "loom/ops/pooling.h"
#include "loom/ops/reduction.h"
#include "ops/conv_fused.h"
#include "ops/nn_internal.h"
#include "ops/registry_parts.h"

namespace loom {

using detail::Conv2dParams;
using Grads = std::vector<Tensor>;

namespace {

using detail::KernelSlot;

// The kernels' slots, declared beside their ops (src/ops/backend.h, KernelSlot), filled by
// src/ops/cpu/conv_ref.cpp, conv_onednn.cpp and conv_onednn_blocked.cpp. Float32/float64,
// contiguous NCHW operands, outputs allocated by the op; weights are PyTorch's (out_channels,
// in_channels / groups, kH, kW).
// out = conv(x, w) (+ bias when defined).
constinit const KernelSlot<void(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                                const Conv2dParams& p)>
    kConv2d{"conv.conv2d"};
// gx = d conv / d x applied to gy (also the transposed convolution of gy).
constinit const KernelSlot<void(const Tensor& gx, const Tensor& gy, const Tensor& w, const Conv2dParams& p)>
    kConv2dBackwardData{"conv.conv2d_backward_data"};
// gw = d conv / d w applied to gy, for input x.
constinit const KernelSlot<void(const Tensor& gw, const Tensor& gy, const Tensor& x, const Conv2dParams& p)>
    kConv2dBackwardWeights{"conv.conv2d_backward_weights"};
// out = epilogue(conv(x, w) + bias) for inference (float32, no gradient); false when the
// backend has no fused kernel for it (the op then runs the unfused ops). Operands contiguous.
// Unfilled (if_filled): the op runs the unfused ops.
constinit const KernelSlot<bool(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                                const Conv2dParams& p, const detail::FusedConv& e)>
    kConv2dFused{"conv.conv2d_fused"};
// Blocked activation layouts for conv2d_fused (the graph compiler keeps them between fused
// convolutions): a float32 tensor of the logical NCHW shape whose memory is (N, C/B, H, W, B),
// B channels innermost. kConv2dBlocked: B when kConv2dFused can write its output of shape
// `out` (from x of shape `x`, `groups` groups) in that layout, else 0; it can then also read
// such an output as x or residual. kReorderBlocked: out = x (one shape) converted from NCHW to
// the blocked layout, or back when `to_plain`. Unfilled (if_filled): no blocked layouts.
constinit const KernelSlot<int64_t(const Shape& x, const Shape& out, int64_t groups)> kConv2dBlocked{"conv.conv2d_blocked"};
constinit const KernelSlot<void(const Tensor& out, const Tensor& x, bool to_plain)> kReorderBlocked{"conv.reorder_blocked"};
// out = max pooling (dilation 1) of x, both in that blocked layout; NaN propagates.
constinit const KernelSlot<void(const Tensor& out, const Tensor& x, const detail::Pool2dParams& p)>
    kMaxPool2dBlocked{"conv.max_pool2d_blocked"};

Tensor prepare(const Tensor& t, DType dt) { return detail::contiguous_raw(detail::cast_raw(t, dt)); }


Shape forward_shape(const Shape& x, const Shape& w, const Conv2dParams& p) {
  return {x[0], w[0], conv_output_size(x[2], w[2], p.stride[0], p.pad_l[0], p.pad_r[0], p.dilation[0]),
          conv_output_size(x[3], w[3], p.stride[1], p.pad_l[1], p.pad_r[1], p.dilation[1])};
}

Tensor conv_fwd(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p);
Tensor conv_bwd_data(const Tensor& gy, const Tensor& w, const Shape& x_shape, const Conv2dParams& p);
Tensor conv_bwd_weights(const Tensor& gy, const Tensor& x, const Shape& w_shape, const Conv2dParams& p);

Tensor conv_fwd(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) {
  const DType dt = x.dtype(), kd = detail::kernel_dtype(dt);
  const bool rb = b.defined() && b.requires_grad();
  const bool record = detail::needs_grad({&x, &w}) || (rb && grad_enabled());
  Conv2dParams fp = p;
  fp.inference = !record;  // no backward will read this call: the backend may use its inference path
  Tensor out = detail::alloc(forward_shape(x.shape(), w.shape(), p), kd, x.device());
  kConv2d(x.device())(out, prepare(x, kd), prepare(w, kd), b.defined() ? prepare(b, kd) : Tensor(), fp);
  Tensor y = detail::cast_raw(out, dt);
  if (!record) return y;
  std::vector<Tensor> inputs{x, w};
  if (b.defined()) inputs.push_back(b);
  return detail::record("conv2d", inputs, y,
                        [xd = detail::save(x), wd = detail::save(w), p, rx = x.requires_grad(), rw = w.requires_grad(), rb,
                         has_b = b.defined()](const Tensor& g) {
                          Grads gs{rx ? conv_bwd_data(g, wd, xd.shape(), p) : Tensor(),
                                   rw ? conv_bwd_weights(g, xd, wd.shape(), p) : Tensor()};
                          if (has_b) gs.push_back(rb ? sum(g, {0, 2, 3}) : Tensor());
                          return gs;
                        });
}

Tensor conv_bwd_data(const Tensor& gy, const Tensor& w, const Shape& x_shape, const Conv2dParams& p) {
  const DType dt = gy.dtype(), kd = detail::kernel_dtype(dt);
  Tensor gx = detail::alloc(x_shape, kd, gy.device());
  kConv2dBackwardData(gy.device())(gx, prepare(gy, kd), prepare(w, kd), p);
  Tensor r = detail::cast_raw(gx, dt);
  if (!detail::needs_grad({&gy, &w})) return r;
  return detail::record("conv2d_backward_data", {gy, w}, r,
                        [gyd = detail::save(gy), wd = detail::save(w), p, rg = gy.requires_grad(),
                         rw = w.requires_grad()](const Tensor& G) {
                          return Grads{rg ? conv_fwd(G, wd, Tensor(), p) : Tensor(),
                                       rw ? conv_bwd_weights(gyd, G, wd.shape(), p) : Tensor()};
                        });
}

Tensor conv_bwd_weights(const Tensor& gy, const Tensor& x, const Shape& w_shape, const Conv2dParams& p) {
  const DType dt = gy.dtype(), kd = detail::kernel_dtype(dt);
  Tensor gw = detail::alloc(w_shape, kd, gy.device());
  kConv2dBackwardWeights(gy.device())(gw, prepare(gy, kd), prepare(x, kd), p);
  Tensor r = detail::cast_raw(gw, dt);
  if (!detail::needs_grad({&gy, &x})) return r;
  return detail::record("conv2d_backward_weights", {gy, x}, r,
                        [gyd = detail::save(gy), xd = detail::save(x), p, rg = gy.requires_grad(),
                         rx = x.requires_grad()](const Tensor& G) {
                          return Grads{rg ? conv_fwd(xd, G, Tensor(), p) : Tensor(),
                                       rx ? conv_bwd_data(gyd, G, xd.shape(), p) : Tensor()};
                        });
}

// Checks shared by every convolution: dtypes, devices, groups and channel counts, bias.
// `w_in_axis`: the weight axis that holds input channels per group (1 for conv, 0 for the
// transposed conv, where axis 0 holds all input channels).
void check_operands(const char* op, const Tensor& x, const Tensor& w, const Tensor& b, int64_t groups, bool transposed,
                    int64_t nsp) {
  const char* x_layout = nsp == 1 ? "(N, C_in, L)" : "(N, C_in, H, W)";
  const char* w_layout = transposed ? (nsp == 1 ? "(C_in, C_out / groups, kL)" : "(C_in, C_out / groups, kH, kW)")
                                    : (nsp == 1 ? "(C_out, C_in / groups, kL)" : "(C_out, C_in / groups, kH, kW)");
  detail::check_rank(x, nsp + 2, op, "input x", x_layout);
  detail::check_rank(w, nsp + 2, op, "weight", w_layout);
  detail::check_float(x, op, "input x");
  detail::check_same_dtype(x, w, op, "input x", "weight");
  detail::check_same_device(x, w, op);
  if (groups < 1) throw ValueError(std::string(op) + ": groups must be >= 1, got " + std::to_string(groups));
  const int64_t C = x.shape()[1];
  const std::string shapes = " (x: " + describe(x) + ", weight: " + describe(w) + ")";
  int64_t c_out;
  if (!transposed) {
    if (C % groups != 0)
      throw ShapeError(std::string(op) + ": input channels " + std::to_string(C) + " are not divisible by groups=" +
                       std::to_string(groups) + shapes);
    if (w.shape()[0] % groups != 0)
      throw ShapeError(std::string(op) + ": output channels weight.shape[0] = " + std::to_string(w.shape()[0]) +
                       " are not divisible by groups=" + std::to_string(groups) + shapes);
    if (w.shape()[1] * groups != C)
      throw ShapeError(std::string(op) + ": x has " + std::to_string(C) + " input channels but weight expects " +
                       "weight.shape[1] * groups = " + std::to_string(w.shape()[1]) + " * " + std::to_string(groups) +
                       " = " + std::to_string(w.shape()[1] * groups) + shapes);
    c_out = w.shape()[0];
  } else {
    if (w.shape()[0] != C)
      throw ShapeError(std::string(op) + ": x has " + std::to_string(C) +
                       " input channels but weight.shape[0] (input channels) is " + std::to_string(w.shape()[0]) +
                       shapes);
    if (C % groups != 0)
      throw ShapeError(std::string(op) + ": input channels " + std::to_string(C) + " are not divisible by groups=" +
                       std::to_string(groups) + shapes);
    c_out = checked_mul(w.shape()[1], groups, op);
  }
  for (int64_t i = 2; i < w.ndim(); ++i)
    if (w.shape()[i] < 1)
      throw ShapeError(std::string(op) + ": kernel sizes must be >= 1" + shapes);
  if (b.defined()) {
    detail::check_same_dtype(x, b, op, "input x", "bias");
    detail::check_same_device(x, b, op);
    if (b.ndim() != 1 || b.shape()[0] != c_out)
      throw ShapeError(std::string(op) + ": bias must have shape (" + std::to_string(c_out) +
                       ",) (one value per output channel), got " + describe(b) + shapes);
  }
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> conv_padding(const char* op, const ConvPadding& padding, const std::vector<int64_t>& kernel,
                                                      const std::vector<int64_t>& dilation, const std::vector<int64_t>& stride) {
  const size_t n = kernel.size();
  std::vector<std::pair<int64_t, int64_t>> out(n, {0, 0});
  if (padding.mode() == "valid") return out;
  if (padding.mode() == "same") {
    for (size_t i = 0; i < n; ++i)
      if (stride[i] != 1)
        throw ValueError(std::string(op) + ": padding='same' is only supported with stride 1, got stride " + detail::ints_str(stride) +
                         " (use integer padding for strided convolutions)");
    for (size_t i = 0; i < n; ++i) {
      const int64_t total = checked_mul(dilation[i], kernel[i] - 1, op);
      out[i] = {total / 2, total - total / 2};
    }
    return out;
  }
  if (!padding.mode().empty())
    throw ValueError(std::string(op) + ": unknown padding '" + padding.mode() + "' (valid: 'same', 'valid', or integers)");
  const auto& v = padding.values();
  if (v.size() != 1 && v.size() != n && v.size() != 2 * n)
    throw ValueError(std::string(op) + ": padding must have 1, " + std::to_string(n) + " or " + std::to_string(2 * n) +
                     " values (per axis, or before/after per axis), got " + detail::ints_str(v));
  for (int64_t x : v)
    if (x < 0 || x > (int64_t{1} << 31))
      throw ValueError(std::string(op) + ": padding must be in [0, 2^31], got " + detail::ints_str(v));
  for (size_t i = 0; i < n; ++i)
    out[i] = v.size() == 2 * n ? std::make_pair(v[2 * i], v[2 * i + 1]) : v.size() == 1 ? std::make_pair(v[0], v[0]) : std::make_pair(v[i], v[i]);
  return out;
}

namespace {

// Resolves stride / padding / dilation of a forward convolution with `nsp` spatial axes into
// 2-d params (a 1-d convolution uses the width axis).
Conv2dParams forward_params(const char* op, const Tensor& x, const Tensor& w, const IntList& stride,
                            const ConvPadding& padding, const IntList& dilation, int64_t groups, size_t nsp) {
  const auto s = detail::per_axis(stride.values(), nsp, op, "stride", 1);
  const auto d = detail::per_axis(dilation.values(), nsp, op, "dilation", 1);
  std::vector<int64_t> kernel(nsp);
  for (size_t i = 0; i < nsp; ++i) kernel[i] = w.shape()[2 + i];
  const auto pads = conv_padding(op, padding, kernel, d, s);
  Conv2dParams p{};
  const size_t off = 2 - nsp;  // 1-d: the height axis is trivial
  p.stride[0] = p.dilation[0] = 1;
  for (size_t i = 0; i < nsp; ++i) {
    p.stride[off + i] = s[i];
    p.dilation[off + i] = d[i];
    p.pad_l[off + i] = pads[i].first;
    p.pad_r[off + i] = pads[i].second;
  }
  p.groups = groups;
  // every output position needs a window inside the padded input
  for (size_t i = 0; i < nsp; ++i) {
    const int64_t in = x.shape()[2 + i], k = w.shape()[2 + i];
    // checked: stride, padding and dilation are arbitrary user values (the error names them)
    const int64_t pl = pads[i].first, pr = pads[i].second;
    if (checked_add(checked_add(in, pl, op), pr, op) < checked_add(checked_mul(d[i], k - 1, op), 1, op))
      throw ShapeError(std::string(op) + ": the kernel (size " + std::to_string(k) + ", dilation " +
                       std::to_string(d[i]) + " -> " + std::to_string(d[i] * (k - 1) + 1) +
                       ") is larger than the padded input (size " + std::to_string(in) + " + padding " +
                       std::to_string(pl + pr) + ") along spatial axis " + std::to_string(i) + " (x: " +
                       describe(x) + ", weight: " + describe(w) + ")");
  }
  return p;
}

}  // namespace

// In 128 bits: each operand is at most 2^63, the products at most 2^127.
int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding_before, int64_t padding_after, int64_t dilation) {
  const __int128 span = static_cast<__int128>(in) + padding_before + padding_after - static_cast<__int128>(dilation) * (kernel - 1) - 1;
  if (span < 0) return 0;
  const __int128 out = span / stride + 1;
  return out > INT64_MAX ? INT64_MAX : static_cast<int64_t>(out);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntList stride, ConvPadding padding,
              IntList dilation, int64_t groups) {
  const char* op = "conv2d";
  check_operands(op, x, weight, bias, groups, false, 2);
  const Conv2dParams p = forward_params(op, x, weight, stride, padding, dilation, groups, 2);
  return conv_fwd(x, weight, bias, p);
}

namespace detail {

namespace {
std::atomic<int64_t> blocked_calls{0}, blocked_reorders{0}, blocked_pools{0};  // blocked_stats()
}  // namespace

Tensor conv2d_fused(const Tensor& x, const Tensor& weight, const Tensor& bias, const FusedConv& e, IntList stride,
                    ConvPadding padding, IntList dilation, int64_t groups) {
  const char* op = "conv2d_fused";
  check_operands(op, x, weight, bias, groups, false, 2);
  const Conv2dParams p = forward_params(op, x, weight, stride, padding, dilation, groups, 2);
  const Shape shape = forward_shape(x.shape(), weight.shape(), p);
  const int64_t oc = shape[1];
  const bool bn = e.bn_mean.defined() || e.bn_var.defined();
  if (bn && !(e.bn_mean.defined() && e.bn_var.defined()))
    throw ValueError(std::string(op) + ": batch norm needs both bn_mean and bn_var (running statistics), got only " +
                     (e.bn_mean.defined() ? "bn_mean" : "bn_var"));
  for (const auto& [t, name] : {std::pair{&e.bn_weight, "bn_weight"}, std::pair{&e.bn_bias, "bn_bias"},
                                std::pair{&e.bn_mean, "bn_mean"}, std::pair{&e.bn_var, "bn_var"}}) {
    if (!t->defined()) continue;
    if (!bn)
      throw ValueError(std::string(op) + ": " + name + " is given without the running statistics bn_mean and bn_var");
    detail::check_same_dtype(x, *t, op, "input x", name);
    detail::check_same_device(x, *t, op);
    if (t->ndim() != 1 || t->shape()[0] != oc)
      throw ShapeError(std::string(op) + ": " + name + " must have shape (" + std::to_string(oc) +
                       ",) (one value per output channel), got " + describe(*t));
  }
  if (e.residual.defined()) {
    detail::check_same_dtype(x, e.residual, op, "input x", "residual");
    detail::check_same_device(x, e.residual, op);
    if (e.residual.shape() != shape)
      throw ShapeError(std::string(op) + ": the residual must have the convolution's output shape " + shape_str(shape) +
                       ", got " + describe(e.residual));
  }
  const std::vector<const Tensor*> all{&x, &weight, &bias, &e.bn_weight, &e.bn_bias, &e.residual};
  bool grad = false;
  if (grad_enabled())
    for (const Tensor* t : all) grad = grad || (t->defined() && t->requires_grad());
  const auto kernel = kConv2dFused.if_filled(x.device());
  const bool blocked = e.x_blocked || e.out_blocked;
  if (!grad && x.dtype() == DType::Float32 && kernel) {
    // a residual given up by the caller that nothing else holds becomes the output: the kernel
    // adds into it in place instead of copying it first (a kernel returning false wrote nothing)
    const bool reuse = e.write_into_residual && e.residual.defined() && e.residual.impl().use_count() == 1 &&
                       e.residual.storage().use_count() == 1 && e.residual.dtype() == DType::Float32 &&
                       e.residual.is_contiguous() && e.residual.storage() != x.storage();
    auto in = [](const Tensor& t) { return t.defined() ? prepare(t, DType::Float32) : Tensor(); };
    FusedConv k{in(e.bn_weight), in(e.bn_bias), in(e.bn_mean), in(e.bn_var), e.bn_eps, in(e.residual), e.relu,
                e.x_blocked, e.out_blocked};
    Tensor out = reuse ? e.residual : detail::alloc(shape, DType::Float32, x.device());
    if (kernel(out, prepare(x, DType::Float32), prepare(weight, DType::Float32), in(bias), p, k)) {
      if (blocked) blocked_calls.fetch_add(1, std::memory_order_relaxed);
      return out;
    }
  }
  if (blocked) {
    // the ops below read and write NCHW: convert the blocked operands around them
    FusedConv plain = e;
    plain.x_blocked = plain.out_blocked = false;
    if (e.out_blocked && e.residual.defined()) plain.residual = reorder_blocked(e.residual, true);
    const Tensor y = conv2d_fused(e.x_blocked ? reorder_blocked(x, true) : x, weight, bias, plain, stride, padding,
                                  dilation, groups);
    return e.out_blocked ? reorder_blocked(y, false) : y;
  }
  // unfused: the same ops a graph would run, differentiable
  Tensor y = conv_fwd(x, weight, bias, p);
  if (bn) y = batch_norm(y, e.bn_mean, e.bn_var, e.bn_weight, e.bn_bias, false, 0.1, e.bn_eps);
  if (e.residual.defined()) y = add(y, e.residual);
  return e.relu ? relu(y) : y;
}

int64_t conv2d_fused_blocked(const Tensor& x, const Tensor& weight, IntList stride, ConvPadding padding, IntList dilation,
                             int64_t groups) {
  const auto blocked = kConv2dBlocked.if_filled(x.device());
  if (!blocked || !kReorderBlocked.if_filled(x.device()) || x.dtype() != DType::Float32 || x.ndim() != 4 || weight.ndim() != 4)
    return 0;
  const Conv2dParams p = forward_params("conv2d_fused", x, weight, stride, padding, dilation, groups, 2);
  return blocked(x.shape(), forward_shape(x.shape(), weight.shape(), p), groups);
}

Tensor reorder_blocked(const Tensor& x, bool to_plain) {
  const auto reorder = kReorderBlocked.if_filled(x.device());
  if (!reorder || x.dtype() != DType::Float32 || x.ndim() != 4 || !x.is_contiguous())
    throw ValueError(std::string("reorder_blocked: needs a contiguous 4-d float32 tensor on a backend with blocked "
                                    "layouts, got ") + describe(x));
  Tensor out = detail::alloc(x.shape(), DType::Float32, x.device());
  if (out.numel() > 0) reorder(out, x, to_plain);
  blocked_reorders.fetch_add(1, std::memory_order_relaxed);
  return out;
}

Tensor max_pool2d_blocked(const Tensor& x, IntList kernel_size, IntList stride, IntList padding, bool ceil_mode) {
  const char* op = "max_pool2d_blocked";
  const auto pool = kMaxPool2dBlocked.if_filled(x.device());
  if (!pool || x.dtype() != DType::Float32 || x.ndim() != 4 || !x.is_contiguous())
    throw ValueError(std::string(op) + ": needs a contiguous 4-d float32 tensor in the blocked layout on a backend with "
                     "blocked layouts, got " + describe(x));
  const auto k = detail::per_axis(kernel_size.values(), 2, op, "kernel_size", 1);
  const auto st = stride.values().empty() ? k : detail::per_axis(stride.values(), 2, op, "stride", 1);
  const auto pad = detail::per_axis(padding.values(), 2, op, "padding", 0);
  Shape out{x.shape()[0], x.shape()[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    out[2 + i] = pool_output_size(x.shape()[2 + i], k[i], st[i], pad[i], 1, ceil_mode);
    if (pad[i] > k[i] / 2 || out[2 + i] < 1)
      throw ShapeError(std::string(op) + ": kernel_size " + detail::ints_str(k) + ", stride " + detail::ints_str(st) +
                       ", padding " + detail::ints_str(pad) + " do not fit " + describe(x) +
                       " (padding at most half the kernel, a non-empty output)");
  }
  Pool2dParams p{{k[0], k[1]}, {st[0], st[1]}, {pad[0], pad[1]}, {1, 1}, true, 0};
  Tensor y = detail::alloc(out, DType::Float32, x.device());
  if (y.numel() > 0) pool(y, x, p);
  blocked_pools.fetch_add(1, std::memory_order_relaxed);
  return y;
}

BlockedStats blocked_stats() { return {blocked_calls.load(), blocked_reorders.load(), blocked_pools.load()}; }

}  // namespace detail

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntList stride, ConvPadding padding,
              IntList dilation, int64_t groups) {
  const char* op = "conv1d";
  check_operands(op, x, weight, bias, groups, false, 1);
  const Conv2dParams p = forward_params(op, x, weight, stride, padding, dilation, groups, 1);
  Tensor y = conv_fwd(expand_dims(x, 2), expand_dims(weight, 2), bias, p);
  return squeeze(y, {2});
}

Tensor conv2d_transpose(const Tensor& x, const Tensor& weight, const Tensor& bias, IntList stride, IntList padding,
                        IntList output_padding, int64_t groups, IntList dilation) {
  const char* op = "conv2d_transpose";
  check_operands(op, x, weight, bias, groups, true, 2);
  const auto s = detail::per_axis(stride.values(), 2, op, "stride", 1);
  const auto pad = detail::per_axis(padding.values(), 2, op, "padding", 0);
  const auto op_ = detail::per_axis(output_padding.values(), 2, op, "output_padding", 0);
  const auto d = detail::per_axis(dilation.values(), 2, op, "dilation", 1);
  Conv2dParams p{};
  p.groups = groups;
  Shape out{x.shape()[0], checked_mul(weight.shape()[1], groups, op), 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (op_[i] >= s[i] && op_[i] >= d[i])
      throw ValueError(std::string(op) + ": output_padding " + detail::ints_str(op_) +
                       " must be smaller than either stride " + detail::ints_str(s) + " or dilation " +
                       detail::ints_str(d));
    const int64_t k = weight.shape()[2 + i];
    // (in - 1) * s - 2 * pad + d * (k - 1) + output_padding + 1 of user values, without overflow
    const int64_t in = x.shape()[2 + i];
    const int64_t grow = checked_add(checked_add(checked_mul(std::max<int64_t>(in - 1, 0), s[i], op),
                                                 checked_mul(d[i], k - 1, op), op), op_[i] + 1, op) -
                         (in == 0 ? s[i] : 0);
    const int64_t shrink = checked_mul(pad[i], 2, op);  // even, so 1 + shrink fits
    if (grow < 1 + shrink)
      throw ShapeError(std::string(op) + ": the output size along spatial axis " + std::to_string(i) +
                       " would be below 1 (padding " + detail::ints_str(pad) + " is too large for x: " +
                       describe(x) + ", weight: " + describe(weight) + ")");
    out[2 + i] = grow - shrink;
    p.stride[i] = s[i];
    p.dilation[i] = d[i];
    p.pad_l[i] = pad[i];
    // as a convolution from the output back to x: the right padding that makes the sizes agree
    p.pad_r[i] = op_[i] < s[i] ? pad[i] : pad[i] - op_[i];
  }
  Tensor y = conv_bwd_data(x, weight, out, p);
  if (!bias.defined()) return y;
  return add(y, reshape(bias, {1, out[1], 1, 1}));
}

}  // namespace loom

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> conv_ops() {
  return {
      {"conv1d", "nn", true}, {"conv2d", "nn", true}, {"conv2d_transpose", "nn", true},
  };
}

}  // namespace loom::detail
