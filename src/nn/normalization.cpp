#include "loom/nn/normalization.h"

#include "loom/autograd/autograd.h"
#include "loom/autograd/custom_op.h"
#include "loom/nn/init.h"
#include "loom/nn/replicas.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/normalization.h"
#include "loom/ops/reduction.h"
#include "nn/kind_util.h"
#include "nn/register_kinds.h"

namespace loom::nn {

namespace {

// Batch norm in Train mode with the statistics of the whole batch across the replicas: the
// per-channel sums of x and x^2 and the count, summed over the replicas in one collective
// (float64: E[x^2] - E[x]^2 loses too much in float32), then batch_norm's formula; the backward
// sums the gradient's per-channel sums in one more, as PyTorch's SyncBatchNorm. Fused kernels
// where they apply (ops' batch-norm parts, one custom op); otherwise composed of differentiable
// ops, gradients flowing through replica_sum.
Tensor sync_batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& w, const Tensor& b,
                       double momentum, double eps) {
  if (batch_norm_parts_supported(x, w, b)) {
    // the fused kernels: one pass for the local sums, one collective, one pass for the output;
    // backward likewise. The weight and bias gradients are this replica's (the optimizer's
    // gradient averaging sums them).
    ReplicaGroup* group = replica_group();
    const CustomOp op{
        "BatchNorm (synchronized)",
        [&running_mean, &running_var, group, momentum, eps](const std::vector<Tensor>& in, std::vector<Tensor>& saved) {
          const Tensor &x = in[0], &w = in[1], &b = in[2];
          Tensor sums = batch_norm_sums(x);
          group->sum(sums);
          const BatchNormStats st = batch_norm_stats(sums);
          if (st.count <= 1)
            throw ValueError("BatchNorm (synchronized): expected more than 1 value per channel across the replicas when "
                             "training, got " + std::to_string(static_cast<int64_t>(st.count)) + " for input " +
                             shape_str(x.shape()));
          Tensor y = batch_norm_apply(x, st.mean, st.var, w, b, eps);
          if (running_mean.defined()) batch_norm_update_running(running_mean, running_var, st.mean, st.var, momentum, st.count);
          saved = {x, w, st.mean, st.var, full({1}, st.count, DType::Float64, x.device())};
          return std::vector<Tensor>{y};
        },
        [group, eps](const CustomGrad& g) {
          const Tensor &x = g.saved[0], &w = g.saved[1], &mean = g.saved[2], &var = g.saved[3];
          const double n = g.saved[4].item<double>();
          const Tensor& gy = g.output_grads[0];
          const int64_t C = x.shape()[1];
          Tensor gsums = batch_norm_grad_sums(gy, x, mean);
          // this replica's weight and bias gradients: sum g * xhat and sum g (copies: the
          // reduction below changes gsums in place)
          std::vector<Tensor> grads(3);
          if (w.defined()) grads[1] = astype(slice(gsums, 0, C, 2 * C) * rsqrt(var + eps), x.dtype()).copy();
          if (g.needs_input_grad[2]) grads[2] = astype(slice(gsums, 0, 0, C).copy(), x.dtype());
          group->sum(gsums);
          grads[0] = batch_norm_input_grad(gy, x, mean, var, w, gsums, n, eps);
          return grads;
        }};
    return op({x, w, b})[0];
  }
  const int64_t C = x.shape()[1];
  Axes axes{0};
  for (int64_t i = 2; i < x.ndim(); ++i) axes.push_back(i);
  Shape bshape(static_cast<size_t>(x.ndim()), 1);
  bshape[1] = C;
  const Tensor x64 = astype(x, DType::Float64);
  const Tensor local = concatenate({sum(x64, axes), sum(multiply(x64, x64), axes),
                                    full({1}, static_cast<double>(C ? x.numel() / C : 0), DType::Float64, x.device())}, 0);
  const Tensor total = replica_sum(local);
  const double n = slice(total, 0, 2 * C, 2 * C + 1).item<double>();
  if (n <= 1)
    throw ValueError("BatchNorm (synchronized): expected more than 1 value per channel across the replicas when training, got " +
                     std::to_string(static_cast<int64_t>(n)) + " for input " + shape_str(x.shape()));
  const Tensor mean = slice(total, 0, 0, C) / n;
  const Tensor var = maximum(slice(total, 0, C, 2 * C) / n - multiply(mean, mean), 0.0);
  batch_norm_update_running(running_mean, running_var, mean.detach(), var.detach(), momentum, n);
  Tensor y = multiply(subtract(x, reshape(astype(mean, x.dtype()), bshape)), rsqrt(reshape(astype(var, x.dtype()), bshape) + eps));
  if (w.defined()) y = multiply(y, reshape(w, bshape));
  if (b.defined()) y = add(y, reshape(b, bshape));
  return y;
}

// The rule of both: the input's shape, whose channels (batch norm: axis 1; layer norm, `last`:
// the last axis) must be those the state holds.
std::vector<Shape> normalized_shape(const LayerImpl& l, const Shape& x, bool last, int64_t channels) {
  if (x.size() < (last ? 1u : 2u))
    throw ShapeError(detail::who(l) + ": an input of shape " + shape_str(x) + (last ? " (valid: (..., units))" : " (valid: (batch, channels, ...))"));
  const int64_t c = last ? x.back() : x[1];
  if (c >= 0 && c != channels)
    throw ShapeError(detail::who(l) + ": an input of shape " + shape_str(x) + " has " + std::to_string(c) + (last ? " units" : " channels") +
                     "; its state holds " + std::to_string(channels));
  return {x};
}

struct BatchNormImpl final : KindBase<BatchNormImpl, BatchNormOptions> {
  const char* kind() const override { return "BatchNorm"; }
  Tensor compute(const std::vector<Tensor>& in, Mode mode) override {
    const BatchNormOptions& opt = attrs;
    Tensor w = opt.affine ? state->param("weight") : Tensor(), b = opt.affine ? state->param("bias") : Tensor();
    const ReplicaGroup* group = replica_group();
    if (opt.sync && mode == Mode::Train && group && group->size() > 1)
      return sync_batch_norm(in[0], state->buffer("running_mean"), state->buffer("running_var"), w, b, opt.momentum, opt.eps);
    return batch_norm(in[0], state->buffer("running_mean"), state->buffer("running_var"), w, b, mode == Mode::Train,
                      opt.momentum, opt.eps);
  }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    return normalized_shape(*this, in.at(0), false, state->buffer("running_mean").shape()[0]);
  }
};

struct LayerNormImpl final : KindBase<LayerNormImpl, LayerNormAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override { return "LayerNorm"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    return layer_norm(in[0], {in[0].shape().back()}, state->param("weight"), state->param("bias"), attrs.eps);
  }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    return normalized_shape(*this, in.at(0), true, state->param("weight").shape()[0]);
  }
};

struct RMSNormImpl final : KindBase<RMSNormImpl, RMSNormAttributes> {
  bool pure() const override { return true; }
  const char* kind() const override { return "RMSNorm"; }
  Tensor compute(const std::vector<Tensor>& in, Mode) override {
    return rms_norm(in[0], {in[0].shape().back()}, state->param("weight"), attrs.eps);
  }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    return normalized_shape(*this, in.at(0), true, state->param("weight").shape()[0]);
  }
};

}  // namespace

// the forms without input (bound by their first call; nn/registry.h unbound_layer)
BatchNorm::BatchNorm(BatchNormOptions o, const std::string& name)
    : Layer(unbound_layer("BatchNorm", [o](const LayerSpec& s) -> Layer { return BatchNorm(s.input(), o, s.name); }, name)) {}
LayerNorm::LayerNorm(double eps, const std::string& name)
    : Layer(unbound_layer("LayerNorm", [eps](const LayerSpec& s) -> Layer { return LayerNorm(s.input(), eps, s.name); }, name)) {}

RMSNorm::RMSNorm(double eps, const std::string& name)
    : Layer(unbound_layer("RMSNorm", [eps](const LayerSpec& s) -> Layer { return RMSNorm(s.input(), eps, s.name); }, name)) {}

BatchNorm::BatchNorm(const Layer& input, BatchNormOptions o, const std::string& name) {
  if (!input.defined()) throw ValueError("BatchNorm: the input layer is undefined");
  if (input.shape().size() < 2 || input.shape()[1] <= 0)
    throw ShapeError("BatchNorm: input '" + input.name() + "' has shape " + shape_str(input.shape()) + " (valid: (batch, channels, ...))");
  const int64_t c = input.shape()[1];
  auto impl = std::make_shared<BatchNormImpl>();
  impl->attrs = o;
  impl->inputs = {input};
  impl->dtype = input.dtype();
  impl->name = unique_name("batch_norm", name);
  if (o.affine) {
    impl->state->add_param("weight", initialize(Init::ones(), {c}, input.dtype()).requires_grad_());
    impl->state->add_param("bias", initialize(Init::zeros(), {c}, input.dtype()).requires_grad_());
  }
  impl->state->add_buffer("running_mean", initialize(Init::zeros(), {c}, input.dtype()));
  impl->state->add_buffer("running_var", initialize(Init::ones(), {c}, input.dtype()));
  impl->shape = detail::shape_by_rule(*impl, {input});
  static_cast<Layer&>(*this) = Layer(impl);
}

int64_t sync_batch_norm(const std::vector<Layer>& layers, bool sync) {
  int64_t n = 0;
  for (const Layer& l : layers)
    if (auto* bn = dynamic_cast<BatchNormImpl*>(l.impl().get())) {
      bn->attrs.sync = sync;
      ++n;
    }
  return n;
}

LayerNorm::LayerNorm(const Layer& input, double eps, const std::string& name) {
  if (!input.defined()) throw ValueError("LayerNorm: the input layer is undefined");
  const int64_t n = input.n_units();
  if (n <= 0) throw ShapeError("LayerNorm: input '" + input.name() + "' must have a known last axis, got " + shape_str(input.shape()));
  auto impl = std::make_shared<LayerNormImpl>();
  impl->attrs.eps = eps;
  impl->inputs = {input};
  impl->dtype = input.dtype();
  impl->name = unique_name("layer_norm", name);
  impl->state->add_param("weight", initialize(Init::ones(), {n}, input.dtype()).requires_grad_());
  impl->state->add_param("bias", initialize(Init::zeros(), {n}, input.dtype()).requires_grad_());
  impl->shape = detail::shape_by_rule(*impl, {input});
  static_cast<Layer&>(*this) = Layer(impl);
}

RMSNorm::RMSNorm(const Layer& input, double eps, const std::string& name) {
  if (!input.defined()) throw ValueError("RMSNorm: the input layer is undefined");
  const int64_t n = input.n_units();
  if (n <= 0) throw ShapeError("RMSNorm: input '" + input.name() + "' must have a known last axis, got " + shape_str(input.shape()));
  if (!(eps >= 0)) throw ValueError("RMSNorm: eps must be >= 0, got " + std::to_string(eps));
  auto impl = std::make_shared<RMSNormImpl>();
  impl->attrs.eps = eps;
  impl->inputs = {input};
  impl->dtype = input.dtype();
  impl->name = unique_name("rms_norm", name);
  impl->state->add_param("weight", initialize(Init::ones(), {n}, input.dtype()).requires_grad_());
  impl->shape = detail::shape_by_rule(*impl, {input});
  static_cast<Layer&>(*this) = Layer(impl);
}

void detail::register_normalization_layers(AddKind add) {
  add("BatchNorm", [](const LayerSpec& s) -> Layer { return BatchNorm(s.input(), read_attributes<BatchNormOptions>(s.options), s.name); }, {write_attributes(BatchNormOptions{})});
  add("LayerNorm", [](const LayerSpec& s) -> Layer {
    return LayerNorm(s.input(), read_attributes<LayerNormAttributes>(s.options).eps, s.name);
  }, {write_attributes(LayerNormAttributes{})});
  add("RMSNorm", [](const LayerSpec& s) -> Layer { return RMSNorm(s.input(), read_attributes<RMSNormAttributes>(s.options).eps, s.name); }, {write_attributes(RMSNormAttributes{})});
}

}  // namespace loom::nn
