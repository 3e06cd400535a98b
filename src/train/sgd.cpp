// SGD with momentum, dampening, Nesterov momentum and L2 weight decay (torch.optim.SGD).
#include "loom/ops/elementwise.h"
#include "loom/train/optimizers.h"
#include "train/fused.h"

namespace loom::train {

namespace {

template <typename T>
void sgd_fused(const Tensor& param, const Tensor& grad, const Tensor& buf, bool first, const SGDOptions& o, double lr) {
  T* p = detail::ptr<T>(param);
  const T* g = detail::ptr<T>(grad);
  T* b = detail::ptr<T>(buf);
  const T wd = static_cast<T>(o.weight_decay), mom = static_cast<T>(o.momentum);
  const T damp = static_cast<T>(1.0 - o.dampening), neg_lr = static_cast<T>(-lr);
  const bool decay = o.weight_decay != 0, use_mom = o.momentum != 0, nesterov = o.nesterov;
  detail::fused_for(param.numel(), [&](int64_t i) {
    T d = g[i];
    if (decay) d = d + wd * p[i];
    if (use_mom) {
      const T bi = first ? d : b[i] * mom + damp * d;
      b[i] = bi;
      d = nesterov ? d + mom * bi : bi;
    }
    p[i] = p[i] + neg_lr * d;
  });
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : Optimizer(std::move(params), options.lr), opt_(options) {
  if (!(options.momentum >= 0)) throw ValueError("SGD: momentum must be >= 0, got " + std::to_string(options.momentum));
  if (!(options.weight_decay >= 0))
    throw ValueError("SGD: weight_decay must be >= 0, got " + std::to_string(options.weight_decay));
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0))
    throw ValueError("SGD: Nesterov momentum requires a momentum > 0 and zero dampening");
}

std::map<std::string, double> SGD::hyperparameters() const {
  return {{"momentum", opt_.momentum}, {"dampening", opt_.dampening}, {"weight_decay", opt_.weight_decay},
          {"nesterov", opt_.nesterov ? 1.0 : 0.0}};
}

void SGD::update(size_t, Tensor& param, const Tensor& grad, ParamState& state) {
  const bool first = state.buffers.count("momentum_buffer") == 0;
  Tensor buf;
  if (opt_.momentum != 0) buf = buffer(state, "momentum_buffer", param);
  ++state.step;
  if (can_fuse({&param, &grad, &buf})) {
    if (param.dtype() == DType::Float32) sgd_fused<float>(param, grad, buf, first, opt_, lr());
    else sgd_fused<double>(param, grad, buf, first, opt_, lr());
    return;
  }
  Tensor d = grad;
  if (opt_.weight_decay != 0) d = d + param * opt_.weight_decay;
  if (opt_.momentum != 0) {
    if (first) {
      buf.copy_(d);
    } else {
      buf *= opt_.momentum;
      buf += d * (1.0 - opt_.dampening);
    }
    d = opt_.nesterov ? d + buf * opt_.momentum : buf;
  }
  param += d * -lr();
}

}  // namespace loom::train
