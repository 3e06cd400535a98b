// Adagrad with learning-rate decay and L2 weight decay (torch.optim.Adagrad).
#include <cmath>

#include "loom/ops/elementwise.h"
#include "loom/train/optimizers.h"
#include "train/fused.h"

namespace loom::train {

namespace {

template <typename T>
void adagrad_fused(const Tensor& param, const Tensor& grad, const Tensor& sum, const AdagradOptions& o, double clr) {
  T* p = detail::ptr<T>(param);
  const T* g = detail::ptr<T>(grad);
  T* s = detail::ptr<T>(sum);
  const T wd = static_cast<T>(o.weight_decay), eps = static_cast<T>(o.eps), neg_clr = static_cast<T>(-clr);
  const bool decay = o.weight_decay != 0;
  detail::fused_for(param.numel(), [&](int64_t i) {
    T gi = g[i];
    if (decay) gi = gi + wd * p[i];
    const T si = s[i] + gi * gi;
    s[i] = si;
    p[i] = p[i] + (neg_clr * gi) / (std::sqrt(si) + eps);
  });
}

}  // namespace

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
  if (can_fuse({&param, &grad, &s})) {
    if (param.dtype() == DType::Float32) adagrad_fused<float>(param, grad, s, opt_, clr);
    else adagrad_fused<double>(param, grad, s, opt_, clr);
    return;
  }
  Tensor g = opt_.weight_decay != 0 ? grad + param * opt_.weight_decay : grad;
  s += g * g;
  param += g * -clr / (sqrt(s) + opt_.eps);
}

}  // namespace loom::train
