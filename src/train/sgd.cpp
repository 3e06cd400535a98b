// SGD with momentum, dampening, Nesterov momentum and L2 weight decay (torch.optim.SGD).
#include "loom/ops/elementwise.h"
#include "loom/train/optimizers.h"
#include "ops/backend.h"
#include "train/fused.h"

namespace loom::train {

// The fused update's slot (src/ops/backend.h, KernelSlot; its shared contract above SGDStep
// there), filled by src/ops/cpu/optimizers.cpp. Unfilled: the optimizer runs tensor ops.
// SGD: d = g + weight_decay p; with a momentum buffer, buf = first ? d : momentum buf +
// (1 - dampening) d and d = nesterov ? d + momentum buf : buf; p += -lr d.
static constinit const loom::detail::KernelSlot<void(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                                                     const loom::detail::SGDStep& s, int64_t begin, int64_t end)>
    kSgdUpdate{"optim.sgd_update"};

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
  const auto kernel = kSgdUpdate.if_filled(param.device());
  if (!kernel || !can_fuse({&param, &grad, &existing})) return {};
  Tensor buf;
  if (opt_.momentum != 0) buf = buffer(state, "momentum_buffer", param);
  ++state.step;
  const loom::detail::SGDStep s{.lr = lr(),
                                .momentum = opt_.momentum,
                                .dampening = opt_.dampening,
                                .weight_decay = opt_.weight_decay,
                                .nesterov = opt_.nesterov,
                                .first = first,
                                .grad_scale = grad_scale()};
  return [kernel, param, grad, buf, s](int64_t b, int64_t e) { kernel(param, grad, buf, s, b, e); };
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
