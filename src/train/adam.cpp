// Adam (L2 weight decay, optional AMSGrad) and AdamW (decoupled weight decay), as
// torch.optim.Adam / AdamW.
#include <cmath>

#include "loom/ops/elementwise.h"
#include "loom/train/optimizers.h"
#include "ops/backend.h"
#include "train/fused.h"

namespace loom::train {

// The fused update's slot (src/ops/backend.h, KernelSlot; its shared contract above SGDStep
// there), filled by src/ops/cpu/optimizers.cpp. Unfilled: the optimizer runs tensor ops.
// Adam / AdamW: p *= decay; g += l2 p; m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g g;
// with max_exp_avg_sq (AMSGrad) vmax = max(vmax, v), used for v; p += (-step_size m) / (sqrt(v) / bc2_sqrt + eps).
static constinit const loom::detail::KernelSlot<void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                                                     const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq,
                                                     const loom::detail::AdamStep& s, int64_t begin, int64_t end)>
    kAdamUpdate{"optim.adam_update"};

Adam::Adam(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options, false) {}

Adam::Adam(std::vector<Tensor> params, AdamOptions o, bool decoupled)
    : Optimizer(std::move(params), o.lr), opt_(o), decoupled_(decoupled) {
  const std::string n = name();
  if (!(o.eps >= 0)) throw ValueError(n + ": eps must be >= 0, got " + std::to_string(o.eps));
  if (!(o.beta1 >= 0 && o.beta1 < 1)) throw ValueError(n + ": beta1 must be in [0, 1), got " + std::to_string(o.beta1));
  if (!(o.beta2 >= 0 && o.beta2 < 1)) throw ValueError(n + ": beta2 must be in [0, 1), got " + std::to_string(o.beta2));
  if (!(o.weight_decay >= 0)) throw ValueError(n + ": weight_decay must be >= 0, got " + std::to_string(o.weight_decay));
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions o)
    : Adam(std::move(params), AdamOptions{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad}, true) {}

std::map<std::string, double> Adam::hyperparameters() const {
  return {{"beta1", opt_.beta1}, {"beta2", opt_.beta2}, {"eps", opt_.eps}, {"weight_decay", opt_.weight_decay},
          {"amsgrad", opt_.amsgrad ? 1.0 : 0.0}};
}

namespace {
loom::detail::AdamStep adam_step(const AdamOptions& o, bool decoupled, double lr, int64_t t, double grad_scale = 1.0) {
  return {.decay = decoupled ? 1.0 - lr * o.weight_decay : 1.0,
          .l2 = decoupled ? 0.0 : o.weight_decay,
          .beta1 = o.beta1,
          .beta2 = o.beta2,
          .step_size = lr / (1.0 - std::pow(o.beta1, static_cast<double>(t))),
          .bc2_sqrt = std::sqrt(1.0 - std::pow(o.beta2, static_cast<double>(t))),
          .eps = o.eps,
          .grad_scale = grad_scale};
}
}  // namespace

Optimizer::RangeUpdate Adam::fused_update(size_t, Tensor& param, const Tensor& grad, ParamState& state) {
  auto existing = [&](const char* name) {  // a new buffer is the parameter's kind
    const auto it = state.buffers.find(name);
    return it == state.buffers.end() ? Tensor() : it->second;
  };
  const Tensor m0 = existing("exp_avg"), v0 = existing("exp_avg_sq"), x0 = existing("max_exp_avg_sq");
  const auto kernel = kAdamUpdate.if_filled(param.device());
  if (!kernel || !can_fuse({&param, &grad, &m0, &v0, &x0})) return {};
  const Tensor m = buffer(state, "exp_avg", param), v = buffer(state, "exp_avg_sq", param);
  const Tensor vmax = opt_.amsgrad ? buffer(state, "max_exp_avg_sq", param) : Tensor();
  const loom::detail::AdamStep s = adam_step(opt_, decoupled_, lr(), ++state.step, grad_scale());
  return [kernel, param, grad, m, v, vmax, s](int64_t b, int64_t e) { kernel(param, grad, m, v, vmax, s, b, e); };
}

void Adam::update(size_t i, Tensor& param, const Tensor& grad, ParamState& state) {
  if (RangeUpdate f = fused_update(i, param, grad, state)) {
    detail::fused_blocks(param.numel(), f);
    return;
  }
  Tensor& m = buffer(state, "exp_avg", param);
  Tensor& v = buffer(state, "exp_avg_sq", param);
  Tensor vmax;
  if (opt_.amsgrad) vmax = buffer(state, "max_exp_avg_sq", param);
  const loom::detail::AdamStep s = adam_step(opt_, decoupled_, lr(), ++state.step);
  if (s.decay != 1.0) param *= s.decay;
  Tensor g = s.l2 != 0 ? grad + param * s.l2 : grad;
  m *= opt_.beta1;
  m += g * (1.0 - opt_.beta1);
  v *= opt_.beta2;
  v += g * (1.0 - opt_.beta2) * g;
  Tensor vv = v;
  if (opt_.amsgrad) {
    vmax.copy_(maximum(vmax, v));
    vv = vmax;
  }
  Tensor denom = sqrt(vv) / s.bc2_sqrt + opt_.eps;
  param += m * -s.step_size / denom;
}

}  // namespace loom::train
