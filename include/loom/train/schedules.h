#pragma once
// Learning-rate schedules that drive an optimizer's lr, with torch.optim.lr_scheduler
// semantics: constructing a schedule records the optimizer's current lr as base_lr and sets
// the lr for epoch 0; each step() advances one epoch (or iteration — whatever the caller counts)
// and sets the lr for it. The lr is a closed form of the epoch (PyTorch's chainable forms give
// the same values up to rounding; tests/train checks them to 1e-12 relative).
// A schedule keeps a reference to its optimizer, which must outlive it.
//
//   train::SGD opt(params, {.lr = 0.1});
//   train::CosineAnnealingLR sched(opt, /*t_max=*/100);
//   for (int epoch = 0; epoch < 100; ++epoch) { train_one_epoch(opt); sched.step(); }
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "loom/core/api.h"
#include "loom/train/optimizers.h"

namespace loom::train {

// Counters and values of a schedule, for checkpoints (load into a schedule of the same kind
// and settings over the resumed optimizer).
struct LOOM_API ScheduleState {
  std::map<std::string, int64_t> counters;
  std::map<std::string, double> scalars;
};

class LOOM_API Schedule {
 public:
  explicit Schedule(Optimizer& optimizer);
  virtual ~Schedule() = default;
  Schedule(const Schedule&) = delete;
  Schedule& operator=(const Schedule&) = delete;

  virtual std::string name() const = 0;
  // The lr of `epoch` (>= 0) given the base lr.
  virtual double lr_at(int64_t epoch) const = 0;
  // Advances one epoch and sets the optimizer's lr.
  void step();
  int64_t last_epoch() const { return last_epoch_; }
  double base_lr() const { return base_lr_; }
  double lr() const { return optimizer_->lr(); }
  Optimizer& optimizer() const { return *optimizer_; }

  virtual ScheduleState state_dict() const;
  // Restores last_epoch and base_lr (the optimizer's lr comes from its own state).
  virtual void load_state_dict(const ScheduleState& state);

 protected:
  // Sets the lr for epoch 0; derived constructors call it once their settings are checked.
  void start();

 private:
  Optimizer* optimizer_;
  double base_lr_;
  int64_t last_epoch_ = 0;
};

// base_lr * gamma^(epoch / step_size) (integer division): decays every step_size epochs.
class LOOM_API StepLR : public Schedule {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  std::string name() const override { return "StepLR"; }
  double lr_at(int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// base_lr * gamma^epoch.
class LOOM_API ExponentialLR : public Schedule {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);
  std::string name() const override { return "ExponentialLR"; }
  double lr_at(int64_t epoch) const override;

 private:
  double gamma_;
};

// eta_min + (base_lr - eta_min) (1 + cos(pi epoch / t_max)) / 2: half a cosine from base_lr down
// to eta_min over t_max epochs, then back up (periodic with 2 t_max, as PyTorch's recursion).
class LOOM_API CosineAnnealingLR : public Schedule {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0.0);
  std::string name() const override { return "CosineAnnealingLR"; }
  double lr_at(int64_t epoch) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// Linear warmup over `warmup_steps` epochs from start_factor * base_lr up to base_lr
// (torch's LinearLR(start_factor, 1.0, warmup_steps)); afterwards base_lr, or — when `after` is
// given — the wrapped schedule's lr at epoch - warmup_steps (torch's
// SequentialLR([LinearLR, after], milestones=[warmup_steps])). `after` must drive the same
// optimizer and be constructed before the warmup (so that both read the same base lr).
class LOOM_API LinearWarmup : public Schedule {
 public:
  LinearWarmup(Optimizer& optimizer, int64_t warmup_steps, double start_factor = 1.0 / 3.0,
               std::unique_ptr<Schedule> after = nullptr);
  std::string name() const override { return "LinearWarmup"; }
  double lr_at(int64_t epoch) const override;
  const Schedule* after() const { return after_.get(); }

 private:
  int64_t warmup_;
  double start_factor_;
  std::unique_ptr<Schedule> after_;
};

// Cuts the lr by `factor` when a monitored value (e.g. the validation loss) has not improved
// for more than `patience` epochs (torch's ReduceLROnPlateau): improvement in mode Min means
// value < best (1 - threshold) (relative) or value < best - threshold (absolute); after a cut,
// `cooldown` epochs are ignored; the lr never goes below min_lr, and a cut smaller than eps is
// skipped.
struct LOOM_API PlateauOptions {
  enum class Mode { Min, Max };
  enum class Threshold { Rel, Abs };
  Mode mode = Mode::Min;
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  Threshold threshold_mode = Threshold::Rel;
  int64_t cooldown = 0;
  double min_lr = 0.0;
  double eps = 1e-8;
};

class LOOM_API ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, PlateauOptions options = {});
  // Records one epoch's monitored value; may lower the optimizer's lr.
  void step(double value);
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }
  int64_t last_epoch() const { return last_epoch_; }
  bool in_cooldown() const { return cooldown_counter_ > 0; }
  double lr() const { return optimizer_->lr(); }
  const PlateauOptions& options() const { return opt_; }

  ScheduleState state_dict() const;
  void load_state_dict(const ScheduleState& state);

 private:
  bool is_better(double value) const;

  Optimizer* optimizer_;
  PlateauOptions opt_;
  double best_;
  int64_t num_bad_epochs_ = 0, cooldown_counter_ = 0, last_epoch_ = 0;
};

}  // namespace loom::train
