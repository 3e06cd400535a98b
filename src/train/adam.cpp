// Adam (L2 weight decay, optional AMSGrad) and AdamW (decoupled weight decay), as
// torch.optim.Adam / AdamW.
#include <algorithm>
#include <cmath>

#include "loom/core/parallel.h"
#include "loom/ops/elementwise.h"
#include "loom/train/optimizers.h"
#include "ops/cpu/simd/simd.h"
#include "train/fused.h"

namespace loom::train {

namespace {

struct AdamStep {
  double decay_factor;  // AdamW: 1 - lr * weight_decay (1 for Adam)
  double l2;            // Adam: weight_decay (0 for AdamW)
  double step_size;     // lr / (1 - beta1^t)
  double bc2_sqrt;      // sqrt(1 - beta2^t)
};

// Elements [b0, e0) of the update (elementwise: any split gives the same result).
template <typename T>
void adam_range(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const Tensor& max_sq, const AdamOptions& o, const AdamStep& s, double grad_scale, int64_t b0,
                int64_t e0) {
  T* p = detail::ptr<T>(param);
  const T* g = detail::ptr<T>(grad);
  T* m = detail::ptr<T>(exp_avg);
  T* v = detail::ptr<T>(exp_avg_sq);
  T* vmax = detail::ptr<T>(max_sq);
  const T b1 = static_cast<T>(o.beta1), omb1 = static_cast<T>(1.0 - o.beta1);
  const T b2 = static_cast<T>(o.beta2), omb2 = static_cast<T>(1.0 - o.beta2);
  const T l2 = static_cast<T>(s.l2), decay = static_cast<T>(s.decay_factor);
  const T neg_step = static_cast<T>(-s.step_size), bc2 = static_cast<T>(s.bc2_sqrt), eps = static_cast<T>(o.eps);
  const bool use_l2 = s.l2 != 0, use_decay = s.decay_factor != 1.0, ams = vmax != nullptr;
  const bool scaled = grad_scale != 1.0;
  const T gs = static_cast<T>(grad_scale);
  for (int64_t i = b0; i < e0; ++i) {
    T pi = p[i];
    if (use_decay) pi = pi * decay;
    T gi = scaled ? g[i] * gs : g[i];
    if (use_l2) gi = gi + l2 * pi;
    const T mi = m[i] * b1 + omb1 * gi;
    const T vi = v[i] * b2 + (omb2 * gi) * gi;
    m[i] = mi;
    v[i] = vi;
    T vv = vi;
    if (ams) vmax[i] = vv = std::max(vmax[i], vi);
    const T denom = std::sqrt(vv) / bc2 + eps;
    p[i] = pi + (neg_step * mi) / denom;
  }
}

// float32: the vector kernel of the CPU's instruction set.
void adam_range_f32(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                    const Tensor& max_sq, const cpu::simd::AdamArgs& a, int64_t b, int64_t e) {
  float* vmax = detail::ptr<float>(max_sq);
  cpu::simd::table().adam(detail::ptr<float>(param) + b, detail::ptr<float>(grad) + b, detail::ptr<float>(exp_avg) + b,
                          detail::ptr<float>(exp_avg_sq) + b, vmax ? vmax + b : nullptr, e - b, a);
}

}  // namespace

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
AdamStep adam_step(const AdamOptions& o, bool decoupled, double lr, int64_t t) {
  AdamStep s;
  s.decay_factor = decoupled ? 1.0 - lr * o.weight_decay : 1.0;
  s.l2 = decoupled ? 0.0 : o.weight_decay;
  s.step_size = lr / (1.0 - std::pow(o.beta1, static_cast<double>(t)));
  s.bc2_sqrt = std::sqrt(1.0 - std::pow(o.beta2, static_cast<double>(t)));
  return s;
}
}  // namespace

Optimizer::RangeUpdate Adam::fused_update(size_t, Tensor& param, const Tensor& grad, ParamState& state) {
  auto existing = [&](const char* name) {  // a new buffer is the parameter's kind
    const auto it = state.buffers.find(name);
    return it == state.buffers.end() ? Tensor() : it->second;
  };
  const Tensor m0 = existing("exp_avg"), v0 = existing("exp_avg_sq"), x0 = existing("max_exp_avg_sq");
  if (!can_fuse({&param, &grad, &m0, &v0, &x0})) return {};
  const Tensor m = buffer(state, "exp_avg", param), v = buffer(state, "exp_avg_sq", param);
  const Tensor vmax = opt_.amsgrad ? buffer(state, "max_exp_avg_sq", param) : Tensor();
  const AdamStep s = adam_step(opt_, decoupled_, lr(), ++state.step);
  if (param.dtype() == DType::Float32) {
    const cpu::simd::AdamArgs a{static_cast<float>(s.decay_factor), static_cast<float>(s.l2),
                                static_cast<float>(opt_.beta1),     static_cast<float>(1.0 - opt_.beta1),
                                static_cast<float>(opt_.beta2),     static_cast<float>(1.0 - opt_.beta2),
                                static_cast<float>(-s.step_size),   static_cast<float>(s.bc2_sqrt),
                                static_cast<float>(opt_.eps),       static_cast<float>(grad_scale())};
    return [param, grad, m, v, vmax, a](int64_t b, int64_t e) { adam_range_f32(param, grad, m, v, vmax, a, b, e); };
  }
  return [param, grad, m, v, vmax, o = opt_, s, gs = grad_scale()](int64_t b, int64_t e) {
    adam_range<double>(param, grad, m, v, vmax, o, s, gs, b, e);
  };
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
  const AdamStep s = adam_step(opt_, decoupled_, lr(), ++state.step);
  if (s.decay_factor != 1.0) param *= s.decay_factor;
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
