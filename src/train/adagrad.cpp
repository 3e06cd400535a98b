// Adagrad with learning-rate decay and L2 weight decay (torch.optim.Adagrad).
#include "loom/ops/elementwise.h"
#include "loom/train/optimizers.h"
#include "ops/backend.h"
#include "train/fused.h"

namespace loom::train {

// The fused update's slot (src/ops/backend.h, KernelSlot; its shared contract above SGDStep
// there), filled by src/ops/cpu/optimizers.cpp. Unfilled: the optimizer runs tensor ops.
// Adagrad: g += weight_decay p; sum += g g; p += (-lr g) / (sqrt(sum) + eps).
static constinit const loom::detail::KernelSlot<void(const Tensor& param, const Tensor& grad, const Tensor& sum,
                                                     const loom::detail::AdagradStep& s, int64_t begin, int64_t end)>
    kAdagradUpdate{"optim.adagrad_update"};

Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions o) : Optimizer(std::move(params), o.lr), opt_(o) {
  if (!(o.lr_decay >= 0)) throw ValueError("Adagrad: lr_decay must be >= 0, got " + std::to_string(o.lr_decay));
  if (!(o.weight_decay >= 0))
    throw ValueError("Adagrad: weight_decay must be >= 0, got " + std::to_string(o.weight_decay));
  if (!(o.initial_accumulator_value >= 0))
    throw ValueError("Adagrad: initial_accumulator_value must be >= 0, got " +
                     std::to_string(o.initial_accumulator_value));
  if (!(o.eps >= 0)) throw ValueError("Adagrad: eps must be >= 0, got " + std::to_string(o.eps));
}

std::map<std::string, double> Adagrad::hyperparameters() const {
  return {{"lr_decay", opt_.lr_decay}, {"weight_decay", opt_.weight_decay},
          {"initial_accumulator_value", opt_.initial_accumulator_value}, {"eps", opt_.eps}};
}

void Adagrad::update(size_t, Tensor& param, const Tensor& grad, ParamState& state) {
  Tensor& s = buffer(state, "sum", param, opt_.initial_accumulator_value);
  const int64_t t = ++state.step;
  const double clr = lr() / (1.0 + static_cast<double>(t - 1) * opt_.lr_decay);
  const auto kernel = kAdagradUpdate.if_filled(param.device());
  if (kernel && can_fuse({&param, &grad, &s})) {
    const loom::detail::AdagradStep k{.lr = clr, .weight_decay = opt_.weight_decay, .eps = opt_.eps};
    detail::fused_blocks(param.numel(), [&](int64_t b, int64_t e) { kernel(param, grad, s, k, b, e); });
    return;
  }
  Tensor g = opt_.weight_decay != 0 ? grad + param * opt_.weight_decay : grad;
  s += g * g;
  param += g * -clr / (sqrt(s) + opt_.eps);
}

}  // namespace loom::train
