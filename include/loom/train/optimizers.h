#pragma once
// Optimizers over a list of parameter tensors, with torch.optim's update rules (PyTorch 1.13,
// single-tensor implementations, maximize = false), checked against torch.optim in
// tests/train (docs/training.md).
//
//   train::Adam opt(model.parameters(), {.lr = 1e-3, .weight_decay = 1e-4});
//   for (...) { opt.zero_grad(); Tensor loss = ...; loss.backward(); opt.step(); }
//
// step() updates, in place and without recording gradients, every parameter whose grad() is
// defined; parameters without a gradient are skipped (and get no state), as in PyTorch. On
// float32/float64 contiguous parameters the update of each element runs as one fused loop (the
// device backend's optimizer kernel; the CPU has them all) with no allocation (scalars rounded to the parameter's dtype as PyTorch's kernels do, and the
// same operation order); elsewhere it runs as a sequence of in-place tensor ops
// (`set_fused(false)` forces that path, which computes the same formulas).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom::train {

// An optimizer's state for checkpoints: the per-parameter buffers and step counters keyed
// "<parameter index>/<name>" (PyTorch's names: "0/exp_avg", "0/step", "3/momentum_buffer"),
// "steps" (the number of step() calls), and "lr" plus the hyperparameters under `scalars`.
// Loading it into a fresh optimizer over the same parameters resumes bit-exactly.
struct LOOM_API OptimizerState {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, int64_t> counters;
  std::map<std::string, double> scalars;
};

class LOOM_API Optimizer {
 public:
  // Parameters must be distinct floating leaf tensors (usually with requires_grad).
  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string name() const = 0;
  // One update of every parameter that has a gradient. With grad_scale, the update is the one
  // of gradients multiplied by grad_scale first (clip_grad_norm's coefficient: TrainStep clips
  // this way), bit for bit, but the gradients are not written: the fused updates scale each
  // value as they read it, the others get a scaled copy.
  void step(double grad_scale = 1.0);
  // Drops every parameter's gradient (PyTorch's zero_grad(set_to_none=True)).
  void zero_grad();

  double lr() const { return lr_; }
  void set_lr(double lr);
  const std::vector<Tensor>& params() const { return params_; }
  int64_t steps() const { return steps_; }
  bool fused() const { return fused_; }
  void set_fused(bool fused) { fused_ = fused; }

  // A copy of the state (tensors are copied, not shared).
  OptimizerState state_dict() const;
  // Replaces the state with a copy of `state`: buffers must match their parameter's shape
  // (ValueError naming the key otherwise), indices must be in range; restores lr when present.
  void load_state_dict(const OptimizerState& state);

 protected:
  struct ParamState {
    int64_t step = 0;  // updates of this parameter
    std::map<std::string, Tensor> buffers;
  };
  // The update of parameter `i` (called under NoGrad with a defined gradient of its shape).
  virtual void update(size_t i, Tensor& param, const Tensor& grad, ParamState& state) = 0;
  // An elementwise update of elements [begin, end) of a parameter, its scalars and state
  // already prepared. step() runs those of all parameters as one pass over the pool (one
  // parallel_for for the whole model instead of one per parameter); the result is the same
  // element for element.
  using RangeUpdate = std::function<void(int64_t begin, int64_t end)>;
  // The fused update of parameter `i` as a RangeUpdate, with its state advanced as update()
  // would; empty (and nothing changed) when the fused loop does not apply, and step() calls
  // update() instead. The default is always empty.
  virtual RangeUpdate fused_update(size_t i, Tensor& param, const Tensor& grad, ParamState& state);
  // The step's grad_scale, which a fused update multiplies each gradient value by (in the
  // gradient's dtype, as `grad *= scale` would).
  double grad_scale() const { return grad_scale_; }
  // Hyperparameters exported with the state (besides lr).
  virtual std::map<std::string, double> hyperparameters() const { return {}; }
  // A zero-filled buffer of the parameter's shape, dtype and device (created on first use).
  static Tensor& buffer(ParamState& state, const std::string& name, const Tensor& param, double fill = 0.0);
  // Whether the fused update (the device backend's optimizer kernel) may run on these tensors:
  // one float32/float64 dtype, one device, contiguous, and fused() on. The caller also checks
  // that the device's backend has the kernel.
  bool can_fuse(const std::vector<const Tensor*>& tensors) const;

 private:
  std::vector<Tensor> params_;
  std::vector<ParamState> state_;
  double lr_;
  int64_t steps_ = 0;
  bool fused_ = true;
  double grad_scale_ = 1.0;
};

// ---------------------------------------------------------------- SGD
// g += weight_decay * p; buf = momentum * buf + (1 - dampening) * g (buf = g on the first
// step); g = nesterov ? g + momentum * buf : buf; p -= lr * g.
struct LOOM_API SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class LOOM_API SGD : public Optimizer {
 public:
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  std::string name() const override { return "SGD"; }
  const SGDOptions& options() const { return opt_; }

 protected:
  void update(size_t i, Tensor& param, const Tensor& grad, ParamState& state) override;
  RangeUpdate fused_update(size_t i, Tensor& param, const Tensor& grad, ParamState& state) override;
  std::map<std::string, double> hyperparameters() const override;

 private:
  SGDOptions opt_;
};

// ---------------------------------------------------------------- Adam / AdamW
// Adam: g += weight_decay * p (L2). AdamW: p *= 1 - lr * weight_decay (decoupled). Then
// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; (amsgrad: vmax = max(vmax, v), used for v);
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
struct LOOM_API AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
};

class LOOM_API Adam : public Optimizer {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  std::string name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  const AdamOptions& options() const { return opt_; }

 protected:
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled);
  void update(size_t i, Tensor& param, const Tensor& grad, ParamState& state) override;
  RangeUpdate fused_update(size_t i, Tensor& param, const Tensor& grad, ParamState& state) override;
  std::map<std::string, double> hyperparameters() const override;

 private:
  AdamOptions opt_;
  bool decoupled_;
};

// AdamW's default weight decay is 1e-2 (as torch.optim.AdamW).
struct LOOM_API AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
};

class LOOM_API AdamW : public Adam {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
};

// ---------------------------------------------------------------- RMSProp
// g += weight_decay * p; sq = alpha sq + (1 - alpha) g^2; centered: ga = alpha ga + (1 - alpha) g,
// avg = sqrt(sq - ga^2), else avg = sqrt(sq); avg += eps; momentum > 0: buf = momentum buf + g / avg,
// p -= lr buf; else p -= lr g / avg.
struct LOOM_API RMSPropOptions {
  double lr = 0.01;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;
  bool centered = false;
};

class LOOM_API RMSProp : public Optimizer {
 public:
  explicit RMSProp(std::vector<Tensor> params, RMSPropOptions options = {});
  std::string name() const override { return "RMSProp"; }
  const RMSPropOptions& options() const { return opt_; }

 protected:
  void update(size_t i, Tensor& param, const Tensor& grad, ParamState& state) override;
  std::map<std::string, double> hyperparameters() const override;

 private:
  RMSPropOptions opt_;
};

// ---------------------------------------------------------------- Adagrad
// g += weight_decay * p; clr = lr / (1 + (t - 1) lr_decay); sum += g^2; p -= clr g / (sqrt(sum) + eps),
// with sum starting at initial_accumulator_value.
struct LOOM_API AdagradOptions {
  double lr = 0.01;
  double lr_decay = 0.0;
  double weight_decay = 0.0;
  double initial_accumulator_value = 0.0;
  double eps = 1e-10;
};

class LOOM_API Adagrad : public Optimizer {
 public:
  explicit Adagrad(std::vector<Tensor> params, AdagradOptions options = {});
  std::string name() const override { return "Adagrad"; }
  const AdagradOptions& options() const { return opt_; }

 protected:
  void update(size_t i, Tensor& param, const Tensor& grad, ParamState& state) override;
  std::map<std::string, double> hyperparameters() const override;

 private:
  AdagradOptions opt_;
};

// An optimizer by name with its default options (the tables above; Keras' optimizers.get):
// "sgd", "adam", "adamw", "rmsprop", "adagrad", in any case. An unknown name throws ValueError
// listing the valid ones.
LOOM_API std::shared_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<Tensor> params);

}  // namespace loom::train
