// The Optimizer base: parameter checks, the step loop, per-parameter state and its export.
#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "loom/autograd/autograd.h"
#include "loom/core/describe.h"
#include "loom/core/parallel.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/train/optimizers.h"
#include "train/fused.h"

namespace loom::train {

namespace {

// "<index>/<name>" -> (index, name); throws ValueError for other keys.
std::pair<size_t, std::string> split_key(const std::string& key, size_t n_params, const char* op) {
  const size_t slash = key.find('/');
  size_t index = 0;
  bool ok = slash != std::string::npos && slash > 0 && slash <= 9 && slash + 1 < key.size();  // <= 9 digits: no overflow
  for (size_t k = 0; ok && k < slash; ++k) {
    if (key[k] < '0' || key[k] > '9') ok = false;
    else index = index * 10 + static_cast<size_t>(key[k] - '0');
  }
  if (!ok) throw ValueError(std::string(op) + ": key '" + key + "' is not of the form '<parameter index>/<name>'");
  if (index >= n_params)
    throw ValueError(std::string(op) + ": key '" + key + "' names parameter " + std::to_string(index) +
                     " but the optimizer has " + std::to_string(n_params) + " parameters");
  return {index, key.substr(slash + 1)};
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  std::set<const TensorImpl*> seen;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    const std::string where = "optimizer: parameter " + std::to_string(i);
    if (!p.defined()) throw ValueError(where + " is undefined");
    if (!is_floating(p.dtype())) throw DTypeError(where + " must be floating, got " + describe(p));
    if (!p.is_leaf()) throw ValueError(where + " " + describe(p) + " is not a leaf tensor (it was computed by an op)");
    if (!seen.insert(p.impl().get()).second) throw ValueError(where + " appears more than once in the list");
    if (has_internal_overlap(p.shape(), p.strides()))  // every step would refuse it, after updating the others
      throw ValueError(where + " " + describe(p) + " has elements that share memory (strides " + shape_str(p.strides()) +
                       ", a broadcast view); in-place updates cannot write it (pass a copy())");
  }
  state_.resize(params_.size());
  set_lr(lr);
}

void Optimizer::set_lr(double lr) {
  if (!(lr >= 0)) throw ValueError("optimizer: learning rate must be >= 0, got " + std::to_string(lr));
  lr_ = lr;
}

void Optimizer::step(double grad_scale) {
  NoGrad off;
  grad_scale_ = grad_scale;
  // Every gradient is checked (and converted) before any parameter changes: a bad gradient
  // on the last parameter must not leave the first ones updated.
  std::vector<std::pair<size_t, Tensor>> grads;
  grads.reserve(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (g.shape() != p.shape())
      throw ShapeError(name() + ".step: the gradient of parameter " + std::to_string(i) + " has shape " +
                       shape_str(g.shape()) + " but the parameter has " + shape_str(p.shape()) +
                       "; no parameter was updated");
    if (g.device() != p.device())
      throw DeviceError(name() + ".step: the gradient of parameter " + std::to_string(i) + " is on " +
                        g.device().str() + " but the parameter is on " + p.device().str() +
                        "; no parameter was updated");
    if (g.dtype() != p.dtype()) g = g.astype(p.dtype());
    grads.emplace_back(i, g.contiguous());
  }
  // The fused updates of all parameters run as one pass over the pool: the parameters laid
  // end to end, each from a multiple of kFusedGrain, split into blocks of that many values
  // (as fused_blocks splits one parameter: the same elements share a block either way).
  std::vector<RangeUpdate> work;
  std::vector<int64_t> numel, start{0};
  std::set<const Storage*> storages;
  bool shared = false;  // parameters that are views of one storage: update them one at a time
  for (auto& [i, g] : grads) {
    // the fused updates write through raw pointers: bump the version as every in-place op does,
    // so autograd's saved-tensor checks and the prepared-weights caches see the change
    params_[i].storage()->bump_version();
    if (RangeUpdate f = fused_update(i, params_[i], g, state_[i])) {
      work.push_back(std::move(f));
      numel.push_back(params_[i].numel());
      const int64_t blocks = (numel.back() + detail::kFusedGrain - 1) / detail::kFusedGrain;
      start.push_back(start.back() + blocks);
      shared = !storages.insert(params_[i].storage().get()).second || shared;
    } else {
      update(i, params_[i], grad_scale == 1.0 ? g : g * grad_scale, state_[i]);
    }
  }
  if (shared) {
    for (size_t k = 0; k < work.size(); ++k) detail::fused_blocks(numel[k], work[k]);
  } else {
    // `start` counts blocks: parameter k holds blocks [start[k], start[k + 1])
    parallel_for(0, start.back(), 1, [&](int64_t b0, int64_t b1) {
      size_t k = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), b0) - start.begin()) - 1;
      for (int64_t b = b0; b < b1; ++k) {
        const int64_t stop = std::min(b1, start[k + 1]);
        if (stop > b)
          work[k]((b - start[k]) * detail::kFusedGrain, std::min(numel[k], (stop - start[k]) * detail::kFusedGrain));
        b = stop;
      }
    });
  }
  ++steps_;
}

Optimizer::RangeUpdate Optimizer::fused_update(size_t, Tensor&, const Tensor&, ParamState&) { return {}; }

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.zero_grad();
}

Tensor& Optimizer::buffer(ParamState& state, const std::string& name, const Tensor& param, double fill) {
  auto it = state.buffers.find(name);
  if (it != state.buffers.end()) return it->second;
  return state.buffers.emplace(name, full(param.shape(), fill, param.dtype(), param.device())).first->second;
}

bool Optimizer::can_fuse(const std::vector<const Tensor*>& tensors) const {
  if (!fused_ || tensors.empty()) return false;
  const DType dt = tensors.front()->dtype();
  const Device device = tensors.front()->device();
  if (dt != DType::Float32 && dt != DType::Float64) return false;
  for (const Tensor* t : tensors)
    if (t->defined() && (t->dtype() != dt || t->device() != device || !t->is_contiguous())) return false;
  return true;
}

OptimizerState Optimizer::state_dict() const {
  NoGrad off;
  OptimizerState s;
  for (size_t i = 0; i < state_.size(); ++i) {
    const ParamState& ps = state_[i];
    if (ps.step == 0 && ps.buffers.empty()) continue;
    const std::string prefix = std::to_string(i) + "/";
    s.counters[prefix + "step"] = ps.step;
    for (const auto& [name, t] : ps.buffers) s.tensors[prefix + name] = t.copy();
  }
  s.counters["steps"] = steps_;
  s.scalars = hyperparameters();
  s.scalars["lr"] = lr_;
  return s;
}

void Optimizer::load_state_dict(const OptimizerState& s) {
  NoGrad off;
  const std::string op = name() + ".load_state_dict";
  std::vector<ParamState> next(params_.size());
  int64_t steps = 0;
  for (const auto& [key, value] : s.counters) {
    if (key == "steps") {
      if (value < 0) throw ValueError(op + ": counter 'steps' is negative (" + std::to_string(value) + ")");
      steps = value;
      continue;
    }
    auto [i, name] = split_key(key, params_.size(), op.c_str());
    if (name != "step") throw ValueError(op + ": unknown counter '" + key + "' (expected '<index>/step' or 'steps')");
    if (value < 0) throw ValueError(op + ": counter '" + key + "' is negative");
    next[i].step = value;
  }
  for (const auto& [key, value] : s.tensors) {
    auto [i, name] = split_key(key, params_.size(), op.c_str());
    const Tensor& p = params_[i];
    if (!value.defined()) throw ValueError(op + ": tensor '" + key + "' is undefined");
    if (value.shape() != p.shape())
      throw ValueError(op + ": tensor '" + key + "' has shape " + shape_str(value.shape()) + " but parameter " +
                       std::to_string(i) + " has " + shape_str(p.shape()));
    Tensor t = value.detach().to(p.device()).astype(p.dtype()).copy();
    next[i].buffers[name] = t;
  }
  auto lr = s.scalars.find("lr");
  if (lr != s.scalars.end()) set_lr(lr->second);
  state_ = std::move(next);
  steps_ = steps;
}

std::shared_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<Tensor> params) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (n == "sgd") return std::make_shared<SGD>(std::move(params));
  if (n == "adam") return std::make_shared<Adam>(std::move(params));
  if (n == "adamw") return std::make_shared<AdamW>(std::move(params));
  if (n == "rmsprop") return std::make_shared<RMSProp>(std::move(params));
  if (n == "adagrad") return std::make_shared<Adagrad>(std::move(params));
  throw ValueError("make_optimizer: unknown optimizer '" + name + "' (valid: sgd, adam, adamw, rmsprop, adagrad; or an Optimizer object)");
}

}  // namespace loom::train
