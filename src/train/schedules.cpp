// Learning-rate schedules (torch.optim.lr_scheduler semantics, closed forms).
#include "loom/train/schedules.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <string>

namespace loom::train {

// ---------------------------------------------------------------- Schedule

Schedule::Schedule(Optimizer& optimizer) : optimizer_(&optimizer), base_lr_(optimizer.lr()) {}

void Schedule::start() {
  last_epoch_ = 0;
  optimizer_->set_lr(lr_at(0));
}

void Schedule::step() {
  ++last_epoch_;
  optimizer_->set_lr(lr_at(last_epoch_));
}

ScheduleState Schedule::state_dict() const {
  ScheduleState s;
  s.counters["last_epoch"] = last_epoch_;
  s.scalars["base_lr"] = base_lr_;
  return s;
}

void Schedule::load_state_dict(const ScheduleState& s) {
  auto e = s.counters.find("last_epoch");
  if (e == s.counters.end()) throw ValueError(name() + ".load_state_dict: the state has no 'last_epoch'");
  if (e->second < 0) throw ValueError(name() + ".load_state_dict: last_epoch is negative");
  last_epoch_ = e->second;
  auto b = s.scalars.find("base_lr");
  if (b != s.scalars.end()) base_lr_ = b->second;
}

// ---------------------------------------------------------------- closed forms

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : Schedule(optimizer), step_size_(step_size), gamma_(gamma) {
  if (step_size < 1) throw ValueError("StepLR: step_size must be >= 1, got " + std::to_string(step_size));
  start();
}

double StepLR::lr_at(int64_t epoch) const {
  return base_lr() * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma) : Schedule(optimizer), gamma_(gamma) { start(); }

double ExponentialLR::lr_at(int64_t epoch) const { return base_lr() * std::pow(gamma_, static_cast<double>(epoch)); }

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : Schedule(optimizer), t_max_(t_max), eta_min_(eta_min) {
  if (t_max < 1) throw ValueError("CosineAnnealingLR: t_max must be >= 1, got " + std::to_string(t_max));
  start();
}

double CosineAnnealingLR::lr_at(int64_t epoch) const {
  return eta_min_ + (base_lr() - eta_min_) *
                        (1.0 + std::cos(std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(t_max_))) /
                        2.0;
}

LinearWarmup::LinearWarmup(Optimizer& optimizer, int64_t warmup_steps, double start_factor,
                           std::unique_ptr<Schedule> after)
    : Schedule(optimizer), warmup_(warmup_steps), start_factor_(start_factor), after_(std::move(after)) {
  if (warmup_steps < 1) throw ValueError("LinearWarmup: warmup_steps must be >= 1, got " + std::to_string(warmup_steps));
  if (!(start_factor >= 0 && start_factor <= 1))
    throw ValueError("LinearWarmup: start_factor must be in [0, 1], got " + std::to_string(start_factor));
  if (after_ && &after_->optimizer() != &optimizer)
    throw ValueError("LinearWarmup: the wrapped schedule drives a different optimizer");
  start();
}

double LinearWarmup::lr_at(int64_t epoch) const {
  if (epoch < warmup_)
    return base_lr() *
           (start_factor_ + (1.0 - start_factor_) * static_cast<double>(epoch) / static_cast<double>(warmup_));
  return after_ ? after_->lr_at(epoch - warmup_) : base_lr();
}

// ---------------------------------------------------------------- ReduceLROnPlateau

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, PlateauOptions options)
    : optimizer_(&optimizer), opt_(options) {
  if (!(options.factor < 1.0 && options.factor >= 0))
    throw ValueError("ReduceLROnPlateau: factor must be in [0, 1), got " + std::to_string(options.factor));
  if (options.patience < 0 || options.cooldown < 0)
    throw ValueError("ReduceLROnPlateau: patience and cooldown must be >= 0");
  best_ = opt_.mode == PlateauOptions::Mode::Min ? std::numeric_limits<double>::infinity()
                                                 : -std::numeric_limits<double>::infinity();
}

bool ReduceLROnPlateau::is_better(double a) const {
  const bool rel = opt_.threshold_mode == PlateauOptions::Threshold::Rel;
  if (opt_.mode == PlateauOptions::Mode::Min)
    return rel ? a < best_ * (1.0 - opt_.threshold) : a < best_ - opt_.threshold;
  return rel ? a > best_ * (opt_.threshold + 1.0) : a > best_ + opt_.threshold;
}

void ReduceLROnPlateau::step(double value) {
  ++last_epoch_;
  if (is_better(value)) {
    best_ = value;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (in_cooldown()) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;  // bad epochs in cooldown do not count
  }
  if (num_bad_epochs_ > opt_.patience) {
    const double old_lr = optimizer_->lr();
    const double new_lr = std::max(old_lr * opt_.factor, opt_.min_lr);
    if (old_lr - new_lr > opt_.eps) optimizer_->set_lr(new_lr);
    cooldown_counter_ = opt_.cooldown;
    num_bad_epochs_ = 0;
  }
}

ScheduleState ReduceLROnPlateau::state_dict() const {
  ScheduleState s;
  s.counters["last_epoch"] = last_epoch_;
  s.counters["num_bad_epochs"] = num_bad_epochs_;
  s.counters["cooldown_counter"] = cooldown_counter_;
  s.scalars["best"] = best_;
  return s;
}

void ReduceLROnPlateau::load_state_dict(const ScheduleState& s) {
  for (const char* k : {"last_epoch", "num_bad_epochs", "cooldown_counter"})
    if (!s.counters.count(k)) throw ValueError(std::string("ReduceLROnPlateau.load_state_dict: the state has no '") + k + "'");
  if (!s.scalars.count("best")) throw ValueError("ReduceLROnPlateau.load_state_dict: the state has no 'best'");
  last_epoch_ = s.counters.at("last_epoch");
  num_bad_epochs_ = s.counters.at("num_bad_epochs");
  cooldown_counter_ = s.counters.at("cooldown_counter");
  best_ = s.scalars.at("best");
}

}  // namespace loom::train
