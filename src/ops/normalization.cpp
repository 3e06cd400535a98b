// batch_norm and layer_norm as composites of differentiable ops (mean, var, rsqrt, ...), with
// fused CPU kernels (src/ops/cpu/batch_norm.cpp, layer_norm.cpp) for float32 / float64.
#include "loom/ops/normalization.h"

#include <algorithm>
#include <cmath>

#include "loom/core/grad_mode.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"
#include "ops/nn_internal.h"
#include "ops/registry_parts.h"

namespace loom {

namespace {

using detail::KernelSlot;

// The kernels' slots, declared beside their ops (src/ops/backend.h, KernelSlot), filled by
// src/ops/cpu/batch_norm.cpp and layer_norm.cpp. Float32/float64, outputs allocated by the op.
// Training-mode batch norm over contiguous x viewed as (N, C, S): per-channel batch mean and
// biased variance into mean and var (C), and y = (x - mean) * invstd * weight +
// bias with invstd = 1 / sqrt(var + eps) (weight and bias may be undefined).
constinit const KernelSlot<void(const Tensor& y, const Tensor& mean, const Tensor& var, const Tensor& x,
                                const Tensor& weight, const Tensor& bias, double eps)>
    kBatchNormTrain{"norm.batch_norm_train"};
// Its gradients for output gradient g: gx (like x), gweight and gbias (C; either may be undefined).
constinit const KernelSlot<void(const Tensor& gx, const Tensor& gweight, const Tensor& gbias, const Tensor& g,
                                const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& weight, double eps)>
    kBatchNormBackward{"norm.batch_norm_backward"};
// The same in parts, for statistics reduced across replicas between them (synchronized batch
// norm; all float64 (C) except x, y, g, gx, weight, bias). sums (2C + 1) = per channel the sum
// of x, the sum of x^2 (as M2 + n mean^2 about this x's own mean, so no float32 cancellation),
// then the count per channel. apply: y from a given mean and biased var. grad_sums (2C) = per
// channel sum g and sum g (x - mean). input_grad: gx from given sums over `count` values.
constinit const KernelSlot<void(const Tensor& sums, const Tensor& x)> kBatchNormSums{"norm.batch_norm_sums"};
constinit const KernelSlot<void(const Tensor& y, const Tensor& x, const Tensor& mean, const Tensor& var,
                                const Tensor& weight, const Tensor& bias, double eps)>
    kBatchNormApply{"norm.batch_norm_apply"};
constinit const KernelSlot<void(const Tensor& sums, const Tensor& g, const Tensor& x, const Tensor& mean)>
    kBatchNormGradSums{"norm.batch_norm_grad_sums"};
constinit const KernelSlot<void(const Tensor& gx, const Tensor& g, const Tensor& x, const Tensor& mean,
                                const Tensor& var, const Tensor& weight, const Tensor& sums, double count, double eps)>
    kBatchNormInputGrad{"norm.batch_norm_input_grad"};
// Layer norm of contiguous x viewed as (rows, cols), normalising each row: per-row mean and
// rstd = 1 / sqrt(biased var + eps) into mean and rstd (rows), and
// y = (x - mean) * rstd * weight + bias (weight and bias: cols values, either may be undefined).
constinit const KernelSlot<void(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                                const Tensor& weight, const Tensor& bias, int64_t cols, double eps)>
    kLayerNorm{"norm.layer_norm"};
// Its gradients for output gradient g: gx (like x), gweight and gbias (cols); each may be
// undefined (not wanted).
constinit const KernelSlot<void(const Tensor& gx, const Tensor& gweight, const Tensor& gbias, const Tensor& g,
                                const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                                int64_t cols)>
    kLayerNormBackward{"norm.layer_norm_backward"};

void check_param(const Tensor& t, const Tensor& x, const Shape& want, const char* op, const char* what) {
  if (!t.defined()) return;
  detail::check_same_device(x, t, op);
  if (!is_floating(t.dtype()))
    throw DTypeError(std::string(op) + ": " + what + " has dtype " + dtype_name(t.dtype()) +
                     " (valid: a floating dtype)");
  if (t.shape() != want)
    throw ShapeError(std::string(op) + ": " + what + " must have shape " + shape_str(want) + " for input x " +
                     describe(x) + ", got " + describe(t));
}

// x (floating) whose trailing axes are `normalized_shape` (layer_norm's and rms_norm's operand):
// those axes, or the error naming both shapes.
Axes trailing_axes(const Tensor& x, const Shape& normalized_shape, const char* op) {
  detail::check_defined(x, op);
  detail::check_float(x, op, "input x");
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  bool ok = k >= 1 && k <= x.ndim();
  for (int64_t i = 0; ok && i < k; ++i) ok = x.shape()[x.ndim() - k + i] == normalized_shape[i];
  if (!ok)
    throw ShapeError(std::string(op) + ": normalized_shape " + shape_str(normalized_shape) +
                     " must be non-empty and match the trailing axes of input x " + describe(x));
  Axes axes;
  for (int64_t i = 0; i < k; ++i) axes.push_back(x.ndim() - k + i);
  return axes;
}

}  // namespace

namespace {

// batch_norm's operands: x is (N, C, ...), each of the four per-channel tensors (C,) or absent,
// the running statistics both or neither, and in training not requiring grad nor broadcast (they
// are updated in place).
void check_batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                      const Tensor& bias, bool training, double eps) {
  const char* op = "batch_norm";
  detail::check_defined(x, op);
  if (x.ndim() < 2)
    throw ShapeError(std::string(op) + ": input x must have at least 2 axes (N, C, ...), got " + describe(x));
  detail::check_float(x, op, "input x");
  const Shape cshape{x.shape()[1]};
  check_param(running_mean, x, cshape, op, "running_mean");
  check_param(running_var, x, cshape, op, "running_var");
  check_param(weight, x, cshape, op, "weight");
  check_param(bias, x, cshape, op, "bias");
  if (eps < 0) throw ValueError(std::string(op) + ": eps must be >= 0, got " + std::to_string(eps));
  if (running_mean.defined() != running_var.defined())
    throw ValueError(std::string(op) + ": give both running_mean and running_var, or neither");
  if (running_mean.defined() && (running_mean.requires_grad() || running_var.requires_grad()) && training)
    throw AutogradError(std::string(op) + ": running_mean / running_var are updated in place and must not require grad");
  if (running_mean.defined() && training) {  // refuse broadcast buffers before updating either
    detail::check_no_overlap(running_mean, "batch_norm (running_mean)");
    detail::check_no_overlap(running_var, "batch_norm (running_var)");
  }
}

// The values per channel statistics are taken over in training: more than one, or a ValueError.
int64_t values_per_channel(const Tensor& x, int64_t C) {
  const int64_t n = C > 0 ? x.numel() / C : 0;
  if (n <= 1)
    throw ValueError(std::string("batch_norm: expected more than 1 value per channel when training, got input x ") + describe(x));
  return n;
}

// Training on the CPU in float32 or float64, the parameters of x's dtype: the backend's fused
// kernels, one for the statistics and the output, one for all three gradients.
bool fused_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, bool training) {
  return training && x.device().type == DeviceType::CPU && x.shape()[1] > 0 &&
         (x.dtype() == DType::Float32 || x.dtype() == DType::Float64) && (!weight.defined() || weight.dtype() == x.dtype()) &&
         (!bias.defined() || bias.dtype() == x.dtype());
}

Tensor batch_norm_fused(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                        const Tensor& bias, double momentum, double eps) {
  const Shape cshape{x.shape()[1]};
  const int64_t n = values_per_channel(x, x.shape()[1]);
  Tensor xc = detail::contiguous_raw(x.detach());
  Tensor wc = weight.defined() ? detail::contiguous_raw(weight.detach()) : Tensor();
  Tensor bc = bias.defined() ? detail::contiguous_raw(bias.detach()) : Tensor();
  Tensor y = detail::alloc(x.shape(), x.dtype(), x.device());
  Tensor m = detail::alloc(cshape, x.dtype(), x.device()), v = detail::alloc(cshape, x.dtype(), x.device());
  kBatchNormTrain(x.device())(y, m, v, xc, wc, bc, eps);
  if (running_mean.defined()) batch_norm_update_running(running_mean, running_var, m, v, momentum, static_cast<double>(n));
  std::vector<Tensor> inputs{x};
  if (weight.defined()) inputs.push_back(weight);
  if (bias.defined()) inputs.push_back(bias);
  if (!detail::needs_grad(inputs)) return y;
  return detail::record("batch_norm", inputs, y, [xc = detail::save(xc), wc = detail::save(wc), m, v, eps, has_w = weight.defined(), has_b = bias.defined()](const Tensor& g) {
    Tensor gc = detail::contiguous_raw(g);
    Tensor gx = detail::alloc(xc.shape(), xc.dtype(), xc.device());
    Tensor gw = has_w ? detail::alloc(m.shape(), xc.dtype(), xc.device()) : Tensor();
    Tensor gb = has_b ? detail::alloc(m.shape(), xc.dtype(), xc.device()) : Tensor();
    kBatchNormBackward(xc.device())(gx, gw, gb, gc, xc, m, v, wc, eps);
    std::vector<Tensor> grads{gx};
    if (has_w) grads.push_back(gw);
    if (has_b) grads.push_back(gb);
    return grads;
  });
}

// The definition, composed of ops (their gradients recorded by each): the batch's statistics in
// training (updating the running ones), the running ones in evaluation.
Tensor batch_norm_composite(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                            const Tensor& bias, bool training, double momentum, double eps) {
  const int64_t C = x.shape()[1];
  const Shape cshape{C};
  Axes axes{0};
  for (int64_t i = 2; i < x.ndim(); ++i) axes.push_back(i);
  Shape bshape(static_cast<size_t>(x.ndim()), 1);  // (1, C, 1, ...)
  bshape[1] = C;
  Tensor mean_b, var_b;  // broadcastable (1, C, 1, ...)
  if (training) {
    const int64_t n = values_per_channel(x, C);
    mean_b = mean(x, axes, true);
    var_b = var(x, axes, 0, true);
    if (running_mean.defined())
      batch_norm_update_running(running_mean, running_var, reshape(mean_b.detach(), cshape), reshape(var_b.detach(), cshape), momentum,
                                static_cast<double>(n));
  } else {
    if (!running_mean.defined()) throw ValueError("batch_norm: evaluation (training=false) needs running_mean and running_var");
    mean_b = reshape(running_mean, bshape);
    var_b = reshape(running_var, bshape);
  }
  Tensor y = multiply(subtract(x, mean_b), rsqrt(var_b + eps));
  if (weight.defined()) y = multiply(y, reshape(weight, bshape));
  if (bias.defined()) y = add(y, reshape(bias, bshape));
  return y;
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  check_batch_norm(x, running_mean, running_var, weight, bias, training, eps);
  if (fused_batch_norm(x, weight, bias, training)) return batch_norm_fused(x, running_mean, running_var, weight, bias, momentum, eps);
  return batch_norm_composite(x, running_mean, running_var, weight, bias, training, momentum, eps);
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, double eps) {
  const char* op = "rms_norm";
  const Axes axes = trailing_axes(x, normalized_shape, op);
  check_param(weight, x, normalized_shape, op, "weight");
  if (!(eps >= 0)) throw ValueError(std::string(op) + ": eps must be >= 0, got " + std::to_string(eps));
  Tensor y = multiply(x, rsqrt(mean(square(x), axes, true) + eps));
  if (weight.defined()) y = multiply(y, weight);
  return y;
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const char* op = "layer_norm";
  const Axes axes = trailing_axes(x, normalized_shape, op);
  check_param(weight, x, normalized_shape, op, "weight");
  check_param(bias, x, normalized_shape, op, "bias");
  if (eps < 0) throw ValueError(std::string(op) + ": eps must be >= 0, got " + std::to_string(eps));

  const int64_t cols = shape_numel(normalized_shape);
  const bool fused = x.device().type == DeviceType::CPU && cols > 0 &&
                     (x.dtype() == DType::Float32 || x.dtype() == DType::Float64) &&
                     (!weight.defined() || weight.dtype() == x.dtype()) && (!bias.defined() || bias.dtype() == x.dtype());
  if (fused) {
    // one kernel for the row statistics and the output, one for all three gradients
    const int64_t rows = x.numel() / cols;
    Tensor xc = detail::contiguous_raw(x.detach());
    Tensor wc = weight.defined() ? detail::contiguous_raw(weight.detach()) : Tensor();
    Tensor bc = bias.defined() ? detail::contiguous_raw(bias.detach()) : Tensor();
    Tensor y = detail::alloc(x.shape(), x.dtype(), x.device());
    Tensor m = detail::alloc({rows}, x.dtype(), x.device()), r = detail::alloc({rows}, x.dtype(), x.device());
    kLayerNorm(x.device())(y, m, r, xc, wc, bc, cols, eps);
    std::vector<Tensor> inputs{x};
    if (weight.defined()) inputs.push_back(weight);
    if (bias.defined()) inputs.push_back(bias);
    if (!detail::needs_grad(inputs)) return y;
    // only the gradients some input wants (an undefined one counts as zero)
    const bool want_x = x.requires_grad(), want_w = weight.defined() && weight.requires_grad(),
               want_b = bias.defined() && bias.requires_grad();
    return detail::record("layer_norm", inputs, y,
                          [xc = detail::save(xc), wc = detail::save(wc), m, r, cols, ns = normalized_shape, has_w = weight.defined(), has_b = bias.defined(),
                           want_x, want_w, want_b](const Tensor& g) {
      Tensor gc = detail::contiguous_raw(g);
      Tensor gx = want_x ? detail::alloc(xc.shape(), xc.dtype(), xc.device()) : Tensor();
      Tensor gw = want_w ? detail::alloc(ns, xc.dtype(), xc.device()) : Tensor();
      Tensor gb = want_b ? detail::alloc(ns, xc.dtype(), xc.device()) : Tensor();
      kLayerNormBackward(xc.device())(gx, gw, gb, gc, xc, m, r, wc, cols);
      std::vector<Tensor> grads{gx};
      if (has_w) grads.push_back(gw);
      if (has_b) grads.push_back(gb);
      return grads;
    });
  }

  Tensor mu = mean(x, axes, true);
  Tensor centered = subtract(x, mu);
  Tensor v = mean(square(centered), axes, true);
  Tensor y = multiply(centered, rsqrt(v + eps));
  if (weight.defined()) y = multiply(y, weight);
  if (bias.defined()) y = add(y, bias);
  return y;
}

void batch_norm_update_running(const Tensor& running_mean, const Tensor& running_var, const Tensor& mean,
                               const Tensor& var, double momentum, double count) {
  NoGrad off;
  const double unbias = count / (count - 1);
  // both computed before either is written
  const Tensor new_mean = running_mean * (1.0 - momentum) + astype(mean, running_mean.dtype()) * momentum;
  const Tensor new_var = running_var * (1.0 - momentum) + astype(var, running_var.dtype()) * (momentum * unbias);
  Tensor rm = running_mean, rv = running_var;
  rm.copy_(new_mean);
  rv.copy_(new_var);
}

bool batch_norm_parts_supported(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return x.defined() && x.ndim() >= 2 && x.device().type == DeviceType::CPU && x.shape()[1] > 0 &&
         (x.dtype() == DType::Float32 || x.dtype() == DType::Float64) &&
         (!weight.defined() || (weight.dtype() == x.dtype() && weight.shape() == Shape{x.shape()[1]})) &&
         (!bias.defined() || (bias.dtype() == x.dtype() && bias.shape() == Shape{x.shape()[1]}));
}

namespace {

// The checks of the batch-norm parts: x, weight and bias as batch_norm_parts_supported wants
// them; a float64 operand (mean, var, sums) of `length` values.
void check_parts(const char* op, const Tensor& x, const Tensor& weight = Tensor(), const Tensor& bias = Tensor()) {
  if (!batch_norm_parts_supported(x, weight, bias))
    throw ValueError(std::string(op) + ": the fused kernels need a float32 or float64 CPU input x (N, C, ...) with C > 0 " +
                     "and weight and bias (C,) of its dtype or undefined, got input x " +
                     describe(x) +
                     (weight.defined() ? ", weight " + describe(weight) : std::string()) +
                     (bias.defined() ? ", bias " + describe(bias) : std::string()));
}
void check_f64(const char* op, const char* what, const Tensor& t, int64_t length) {
  if (!t.defined() || t.dtype() != DType::Float64 || t.shape() != Shape{length} || t.device().type != DeviceType::CPU)
    throw ValueError(std::string(op) + ": " + what + " must be a float64 CPU tensor of shape " + shape_str(Shape{length}) +
                     ", got " + describe(t));
}

}  // namespace

Tensor batch_norm_sums(const Tensor& x) {
  const char* op = "batch_norm_sums";
  check_parts(op, x);
  const int64_t C = x.shape()[1];
  Tensor sums = detail::alloc({2 * C + 1}, DType::Float64, x.device());
  kBatchNormSums(x.device())(sums, detail::contiguous_raw(x.detach()));
  return sums;
}

BatchNormStats batch_norm_stats(const Tensor& sums) {
  if (!sums.defined() || sums.dtype() != DType::Float64 || sums.ndim() != 1 || sums.numel() % 2 != 1 ||
      sums.device().type != DeviceType::CPU)
    throw ValueError("batch_norm_stats: sums must be a float64 CPU tensor of shape (2C + 1,) as batch_norm_sums "
                     "returns, got " + describe(sums));
  const int64_t C = sums.numel() / 2;
  const Tensor sc = detail::contiguous_raw(sums);
  BatchNormStats st;
  st.count = sc.data<double>()[2 * C];
  st.mean = detail::alloc({C}, DType::Float64, sums.device());
  st.var = detail::alloc({C}, DType::Float64, sums.device());
  const double* s = sc.data<double>();
  double* m = st.mean.data<double>();
  double* v = st.var.data<double>();
  const double n = st.count;
  for (int64_t c = 0; c < C; ++c) {
    m[c] = s[c] / n;
    v[c] = std::max(0.0, s[C + c] / n - m[c] * m[c]);
  }
  return st;
}

Tensor batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& weight, const Tensor& bias,
                        double eps) {
  const char* op = "batch_norm_apply";
  check_parts(op, x, weight, bias);
  const int64_t C = x.shape()[1];
  check_f64(op, "mean", mean, C);
  check_f64(op, "var", var, C);
  Tensor y = detail::alloc(x.shape(), x.dtype(), x.device());
  kBatchNormApply(x.device())(y, detail::contiguous_raw(x.detach()), detail::contiguous_raw(mean),
                                               detail::contiguous_raw(var),
                                               weight.defined() ? detail::contiguous_raw(weight.detach()) : Tensor(),
                                               bias.defined() ? detail::contiguous_raw(bias.detach()) : Tensor(), eps);
  return y;
}

Tensor batch_norm_grad_sums(const Tensor& g, const Tensor& x, const Tensor& mean) {
  const char* op = "batch_norm_grad_sums";
  check_parts(op, x);
  const int64_t C = x.shape()[1];
  check_f64(op, "mean", mean, C);
  if (!g.defined() || g.shape() != x.shape() || g.dtype() != x.dtype())
    throw ValueError(std::string(op) + ": the gradient g must have input x's shape and dtype " + describe(x) +
                     ", got " + describe(g));
  Tensor gsums = detail::alloc({2 * C}, DType::Float64, x.device());
  kBatchNormGradSums(x.device())(gsums, detail::contiguous_raw(g.detach()),
                                                   detail::contiguous_raw(x.detach()), detail::contiguous_raw(mean));
  return gsums;
}

Tensor batch_norm_input_grad(const Tensor& g, const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& weight,
                             const Tensor& grad_sums, double count, double eps) {
  const char* op = "batch_norm_input_grad";
  check_parts(op, x, weight);
  const int64_t C = x.shape()[1];
  check_f64(op, "mean", mean, C);
  check_f64(op, "var", var, C);
  check_f64(op, "grad_sums", grad_sums, 2 * C);
  if (!g.defined() || g.shape() != x.shape() || g.dtype() != x.dtype())
    throw ValueError(std::string(op) + ": the gradient g must have input x's shape and dtype " + describe(x) +
                     ", got " + describe(g));
  Tensor gx = detail::alloc(x.shape(), x.dtype(), x.device());
  kBatchNormInputGrad(x.device())(gx, detail::contiguous_raw(g.detach()), detail::contiguous_raw(x.detach()),
                                                    detail::contiguous_raw(mean), detail::contiguous_raw(var),
                                                    weight.defined() ? detail::contiguous_raw(weight.detach()) : Tensor(),
                                                    detail::contiguous_raw(grad_sums), count, eps);
  return gx;
}

}  // namespace loom

namespace loom::detail {

// The registry entries of this file's ops (name, category, differentiable; src/ops/registry_parts.h).
std::vector<OpInfo> normalization_ops() {
  return {
      {"batch_norm", "nn", true}, {"layer_norm", "nn", true}, {"rms_norm", "nn", true},
  };
}

}  // namespace loom::detail
