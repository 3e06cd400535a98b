// RMSProp with momentum, centering and L2 weight decay (torch.optim.RMSprop).
#include "loom/ops/elementwise.h"
#include "loom/train/optimizers.h"
#include "ops/backend.h"
#include "train/fused.h"

namespace loom::train {

// The fused update's slot (src/ops/backend.h, KernelSlot; its shared contract above SGDStep
// there), filled by src/ops/cpu/optimizers.cpp. Unfilled: the optimizer runs tensor ops.
// RMSprop: g += weight_decay p; sq = alpha sq + (1 - alpha) g g; avg = sqrt(sq) + eps, or with
// grad_avg (centered) ga = alpha ga + (1 - alpha) g and avg = sqrt(sq - ga ga) + eps; with a
// momentum buffer buf = momentum buf + g / avg and p += -lr buf, else p += (-lr g) / avg.
static constinit const loom::detail::KernelSlot<void(const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                                                     const Tensor& grad_avg, const Tensor& momentum_buffer,
                                                     const loom::detail::RMSPropStep& s, int64_t begin, int64_t end)>
    kRmspropUpdate{"optim.rmsprop_update"};

RMSProp::RMSProp(std::vector<Tensor> params, RMSPropOptions o) : Optimizer(std::move(params), o.lr), opt_(o) {
  if (!(o.eps >= 0)) throw ValueError("RMSProp: eps must be >= 0, got " + std::to_string(o.eps));
  if (!(o.alpha >= 0)) throw ValueError("RMSProp: alpha must be >= 0, got " + std::to_string(o.alpha));
  if (!(o.momentum >= 0)) throw ValueError("RMSProp: momentum must be >= 0, got " + std::to_string(o.momentum));
  if (!(o.weight_decay >= 0))
    throw ValueError("RMSProp: weight_decay must be >= 0, got " + std::to_string(o.weight_decay));
}

std::map<std::string, double> RMSProp::hyperparameters() const {
  return {{"alpha", opt_.alpha}, {"eps", opt_.eps}, {"weight_decay", opt_.weight_decay},
          {"momentum", opt_.momentum}, {"centered", opt_.centered ? 1.0 : 0.0}};
}

void RMSProp::update(size_t, Tensor& param, const Tensor& grad, ParamState& state) {
  Tensor& sq = buffer(state, "square_avg", param);
  Tensor buf, ga;
  if (opt_.momentum > 0) buf = buffer(state, "momentum_buffer", param);
  if (opt_.centered) ga = buffer(state, "grad_avg", param);
  ++state.step;
  const auto kernel = kRmspropUpdate.if_filled(param.device());
  if (kernel && can_fuse({&param, &grad, &sq, &ga, &buf})) {
    const loom::detail::RMSPropStep s{
        .lr = lr(), .alpha = opt_.alpha, .eps = opt_.eps, .weight_decay = opt_.weight_decay, .momentum = opt_.momentum};
    detail::fused_blocks(param.numel(), [&](int64_t b, int64_t e) { kernel(param, grad, sq, ga, buf, s, b, e); });
    return;
  }
  Tensor g = opt_.weight_decay != 0 ? grad + param * opt_.weight_decay : grad;
  sq *= opt_.alpha;
  sq += g * (1.0 - opt_.alpha) * g;
  Tensor avg;
  if (opt_.centered) {
    ga *= opt_.alpha;
    ga += g * (1.0 - opt_.alpha);
    avg = sqrt(sq - ga * ga);
  } else {
    avg = sqrt(sq);
  }
  avg += opt_.eps;
  if (opt_.momentum > 0) {
    buf *= opt_.momentum;
    buf += g / avg;
    param += buf * -lr();
  } else {
    param += g * -lr() / avg;
  }
}

}  // namespace loom::train
