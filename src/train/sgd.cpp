// SGD with momentum, dampening, Nesterov momentum and L2 weight decay (torch.optim.SGD).
#include "loom/ops/elementwise.h"
#include "loom/train/optimizers.h"
#include "train/fused.h"

namespace loom::train {

namespace {

// Elements [b, e) of the update (elementwise: any split gives the same result).
template <typename T>
void sgd_range(const Tensor& param, const Tensor& grad, const Tensor& buf, bool first, const SGDOptions& o, double lr,
               double grad_scale, int64_t b0, int64_t e0) {
  T* p = detail::ptr<T>(param);
  const T* g = detail::ptr<T>(grad);
  T* b = detail::ptr<T>(buf);
  const T wd = static_cast<T>(o.weight_decay), mom = static_cast<T>(o.momentum);
  const T damp = static_cast<T>(1.0 - o.dampening), neg_lr = static_cast<T>(-lr);
  const bool decay = o.weight_decay != 0, use_mom = o.momentum != 0, nesterov = o.nesterov;
  const bool scaled = grad_scale != 1.0;
  const T gs = static_cast<T>(grad_scale);
  for (int64_t i = b0; i < e0; ++i) {
    T d = scaled ? g[i] * gs : g[i];
    if (decay) d = d + wd * p[i];
    if (use_mom) {
      const T bi = first ? d : b[i] * mom + damp * d;
      b[i] = bi;
      d = nesterov ? d + mom * bi : bi;
    }
    p[i] = p[i] + neg_lr * d;
  }
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

Optimizer::RangeUpdate SGD::fused_update(size_t, Tensor& param, const Tensor& grad, ParamState& state) {
  const auto it = state.buffers.find("momentum_buffer");
  const bool first = it == state.buffers.end();
  const Tensor existing = first ? Tensor() : it->second;  // a new buffer is the parameter's kind
  if (!can_fuse({&param, &grad, &existing})) return {};
  Tensor buf;
  if (opt_.momentum != 0) buf = buffer(state, "momentum_buffer", param);
  ++state.step;
  const double lr_now = lr(), gs = grad_scale();
  if (param.dtype() == DType::Float32)
    return [param, grad, buf, first, o = opt_, lr_now, gs](int64_t b, int64_t e) {
      sgd_range<float>(param, grad, buf, first, o, lr_now, gs, b, e);
    };
  return [param, grad, buf, first, o = opt_, lr_now, gs](int64_t b, int64_t e) {
    sgd_range<double>(param, grad, buf, first, o, lr_now, gs, b, e);
  };
}

void SGD::update(size_t i, Tensor& param, const Tensor& grad, ParamState& state) {
  if (RangeUpdate f = fused_update(i, param, grad, state)) {
    detail::fused_blocks(param.numel(), f);
    return;
  }
  const bool first = state.buffers.count("momentum_buffer") == 0;
  Tensor buf;
  if (opt_.momentum != 0) buf = buffer(state, "momentum_buffer", param);
  ++state.step;
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
