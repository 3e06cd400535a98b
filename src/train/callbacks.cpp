#include "loom/train/callbacks.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>

#include "core/json_util.h"
#include "loom/core/file.h"
#include "loom/core/grad_mode.h"
#include "loom/io/model_file.h"

namespace loom::train {

namespace {

bool maximizes(MonitorMode mode, const std::string& monitor) {
  if (mode != MonitorMode::Auto) return mode == MonitorMode::Max;
  for (const char* up : {"acc", "precision", "recall", "f1", "auc"})
    if (monitor.find(up) != std::string::npos) return true;
  return false;
}

double monitored(const Logs& logs, const std::string& monitor, const char* who) {
  auto it = logs.find(monitor);
  if (it == logs.end()) {
    std::string known;
    for (const auto& [k, v] : logs) known += (known.empty() ? "" : ", ") + k;
    throw ValueError(std::string(who) + ": the monitored value '" + monitor + "' is not in the epoch's logs (" + known +
                     "); pass a validation loader for val_ values");
  }
  return it->second;
}

}  // namespace

// ---------------------------------------------------------------- EarlyStopping
EarlyStopping::EarlyStopping(std::string monitor, int patience, double min_delta, MonitorMode mode, bool restore)
    : monitor_(std::move(monitor)), patience_(patience), min_delta_(std::fabs(min_delta)), maximize_(maximizes(mode, monitor_)),
      restore_(restore) {}

void EarlyStopping::on_train_begin(Model&) {
  wait_ = 0;
  stopped_epoch_ = -1;
  best_ = maximize_ ? -INFINITY : INFINITY;
  best_weights_.clear();
}

void EarlyStopping::on_epoch_end(Model& m, int64_t epoch, const Logs& logs) {
  const double v = monitored(logs, monitor_, "EarlyStopping");
  const bool better = maximize_ ? v > best_ + min_delta_ : v < best_ - min_delta_;
  if (better) {
    best_ = v;
    wait_ = 0;
    if (restore_) {
      best_weights_.clear();
      for (const auto& [k, t] : io::graph_state(m.graph())) best_weights_.push_back(t.copy());
    }
    return;
  }
  if (++wait_ >= patience_) {
    stopped_epoch_ = epoch;
    m.stop_training();
  }
}

void EarlyStopping::on_train_end(Model& m, const History&) {
  if (!restore_ || best_weights_.empty() || stopped_epoch_ < 0) return;
  NoGrad off;
  size_t i = 0;
  for (auto& [k, t] : io::graph_state(m.graph())) {
    Tensor dst = t;
    dst.copy_(best_weights_[i++]);
  }
}

// ---------------------------------------------------------------- ModelCheckpoint
ModelCheckpoint::ModelCheckpoint(std::string best_path, std::string last_path, std::string monitor, MonitorMode mode,
                                 const data::DataLoader* loader)
    : best_path_(std::move(best_path)), last_path_(std::move(last_path)), monitor_(std::move(monitor)),
      maximize_(maximizes(mode, monitor_)), loader_(loader), best_(maximize_ ? -INFINITY : INFINITY) {}

void ModelCheckpoint::on_epoch_end(Model& m, int64_t, const Logs& logs) {
  if (!best_path_.empty()) {
    const double v = monitored(logs, monitor_, "ModelCheckpoint");
    if (!have_best_ || (maximize_ ? v > best_ : v < best_)) {
      best_ = v;
      have_best_ = true;
      io::save_model(best_path_, m.graph(), {}, {{monitor_, std::to_string(v)}});
    }
  }
  if (!last_path_.empty()) m.save_checkpoint(last_path_, loader_);
}

// ---------------------------------------------------------------- loggers
void CSVLogger::on_epoch_end(Model&, int64_t epoch, const Logs& logs) {
  if (columns_.empty()) {
    text_ = "epoch";
    for (const auto& [k, v] : logs) {
      columns_.push_back(k);
      text_ += "," + k;
    }
    text_ += "\n";
  }
  text_ += std::to_string(epoch + 1);
  for (const auto& c : columns_) {
    auto it = logs.find(c);
    char b[40] = "";
    if (it != logs.end()) std::snprintf(b, sizeof b, "%.10g", it->second);
    text_ += std::string(",") + b;
  }
  text_ += "\n";
  write_file_atomic(path_, text_);
}

void JSONLinesLogger::on_epoch_end(Model&, int64_t epoch, const Logs& logs) {
  nlohmann::json j{{"epoch", epoch + 1}};
  for (const auto& [k, v] : logs) j[k] = detail::json_float(v);  // NaN/inf as strings, as in every Loom JSON
  text_ += j.dump() + "\n";
  write_file_atomic(path_, text_);
}

// ---------------------------------------------------------------- schedules, NaN
void LearningRateScheduler::on_epoch_end(Model&, int64_t, const Logs& logs) {
  if (schedule_) schedule_->step();
  if (plateau_) plateau_->step(monitored(logs, monitor_, "LearningRateScheduler"));
}

void TerminateOnNaN::on_batch_end(Model& m, int64_t, const Logs& logs) {
  auto it = logs.find("loss");
  if (it != logs.end() && !std::isfinite(it->second)) {
    triggered_ = true;
    m.stop_training();
  }
}

}  // namespace loom::train
