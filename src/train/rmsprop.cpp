// RMSProp with momentum, centering and L2 weight decay (torch.optim.RMSprop).
#include <cmath>

#include "loom/ops/elementwise.h"
#include "loom/train/optimizers.h"
#include "train/fused.h"

namespace loom::train {

namespace {

template <typename T>
void rmsprop_fused(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                   const Tensor& momentum_buffer, const RMSPropOptions& o, double lr) {
  T* p = detail::ptr<T>(param);
  const T* g = detail::ptr<T>(grad);
  T* sq = detail::ptr<T>(square_avg);
  T* ga = detail::ptr<T>(grad_avg);
  T* buf = detail::ptr<T>(momentum_buffer);
  const T alpha = static_cast<T>(o.alpha), oma = static_cast<T>(1.0 - o.alpha), eps = static_cast<T>(o.eps);
  const T wd = static_cast<T>(o.weight_decay), mom = static_cast<T>(o.momentum), neg_lr = static_cast<T>(-lr);
  const bool decay = o.weight_decay != 0;
  detail::fused_for(param.numel(), [&](int64_t i) {
    T gi = g[i];
    if (decay) gi = gi + wd * p[i];
    const T s = sq[i] * alpha + (oma * gi) * gi;
    sq[i] = s;
    T avg;
    if (ga) {
      const T a = ga[i] * alpha + oma * gi;
      ga[i] = a;
      avg = std::sqrt(s + (T(-1) * a) * a);
    } else {
      avg = std::sqrt(s);
    }
    avg = avg + eps;
    if (buf) {
      const T b = buf[i] * mom + gi / avg;
      buf[i] = b;
      p[i] = p[i] + neg_lr * b;
    } else {
      p[i] = p[i] + (neg_lr * gi) / avg;
    }
  });
}

}  // namespace

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
  if (can_fuse({&param, &grad, &sq, &ga, &buf})) {
    if (param.dtype() == DType::Float32) rmsprop_fused<float>(param, grad, sq, ga, buf, opt_, lr());
    else rmsprop_fused<double>(param, grad, sq, ga, buf, opt_, lr());
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
