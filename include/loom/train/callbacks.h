#pragma once
// Hooks into Model::fit. Every hook has an empty default; `logs` hold the running loss and
// metrics (batch hooks) or the epoch's results including validation ("val_" prefix) and "lr".
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "loom/core/api.h"
#include "loom/train/model.h"
#include "loom/train/schedules.h"

namespace loom::train {

class LOOM_API Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(Model&) {}
  virtual void on_train_end(Model&, const History&) {}
  virtual void on_epoch_begin(Model&, int64_t /*epoch*/) {}
  virtual void on_epoch_end(Model&, int64_t /*epoch*/, const Logs&) {}
  virtual void on_batch_begin(Model&, int64_t /*step*/) {}
  virtual void on_batch_end(Model&, int64_t /*step*/, const Logs&) {}
  // In data-parallel training (FitOptions::distributed), called on rank 0 only: callbacks that
  // write files. Those that change training (stopping, schedules) run on every rank, which see
  // the same averaged logs and so decide alike.
  virtual bool root_only() const { return false; }
};

enum class MonitorMode : uint8_t { Auto, Min, Max };  // Auto: Max for accuracy-like names

// Stops when `monitor` has not improved by min_delta for `patience` epochs; optionally puts
// back the best weights.
class LOOM_API EarlyStopping : public Callback {
 public:
  EarlyStopping(std::string monitor = "val_loss", int patience = 3, double min_delta = 0, MonitorMode mode = MonitorMode::Auto,
                bool restore_best_weights = false);
  void on_train_begin(Model&) override;
  void on_epoch_end(Model& m, int64_t epoch, const Logs& logs) override;
  void on_train_end(Model& m, const History&) override;
  int64_t stopped_epoch() const { return stopped_epoch_; }

 private:
  std::string monitor_;
  int patience_;
  double min_delta_;
  bool maximize_, restore_;
  double best_ = 0;
  int wait_ = 0;
  int64_t stopped_epoch_ = -1;
  std::vector<Tensor> best_weights_;
};

// Saves the model (architecture + weights, io::save_model) to `best_path` whenever `monitor`
// improves, and a full training checkpoint (Model::save_checkpoint) to `last_path` after every
// epoch; either path may be empty.
class LOOM_API ModelCheckpoint : public Callback {
 public:
  bool root_only() const override { return true; }
  ModelCheckpoint(std::string best_path, std::string last_path = "", std::string monitor = "val_loss",
                  MonitorMode mode = MonitorMode::Auto, const data::DataLoader* loader = nullptr);
  void on_epoch_end(Model& m, int64_t epoch, const Logs& logs) override;
  double best() const { return best_; }

 private:
  std::string best_path_, last_path_, monitor_;
  bool maximize_;
  const data::DataLoader* loader_;
  double best_;
  bool have_best_ = false;
};

// One CSV row per epoch (rewritten atomically each epoch: a crash never leaves half a file).
class LOOM_API CSVLogger : public Callback {
 public:
  bool root_only() const override { return true; }
  explicit CSVLogger(std::string path) : path_(std::move(path)) {}
  void on_epoch_end(Model&, int64_t epoch, const Logs& logs) override;

 private:
  std::string path_, text_;
  std::vector<std::string> columns_;
};

// One JSON object per epoch and line.
class LOOM_API JSONLinesLogger : public Callback {
 public:
  bool root_only() const override { return true; }
  explicit JSONLinesLogger(std::string path) : path_(std::move(path)) {}
  void on_epoch_end(Model&, int64_t epoch, const Logs& logs) override;

 private:
  std::string path_, text_;
};

// Steps a schedule at the end of every epoch (ReduceLROnPlateau: with the monitored value).
class LOOM_API LearningRateScheduler : public Callback {
 public:
  explicit LearningRateScheduler(std::shared_ptr<Schedule> schedule) : schedule_(std::move(schedule)) {}
  LearningRateScheduler(std::shared_ptr<ReduceLROnPlateau> plateau, std::string monitor = "val_loss")
      : plateau_(std::move(plateau)), monitor_(std::move(monitor)) {}
  void on_epoch_end(Model&, int64_t epoch, const Logs& logs) override;

 private:
  std::shared_ptr<Schedule> schedule_;
  std::shared_ptr<ReduceLROnPlateau> plateau_;
  std::string monitor_;
};

// Stops training as soon as the running loss is NaN or infinite.
class LOOM_API TerminateOnNaN : public Callback {
 public:
  void on_batch_end(Model& m, int64_t step, const Logs& logs) override;
  bool triggered() const { return triggered_; }

 private:
  bool triggered_ = false;
};

// User functions at the start and end of training, epochs and batches.
struct LOOM_API LambdaCallback : public Callback {
  std::function<void(Model&)> train_begin;
  std::function<void(Model&, const History&)> train_end;
  std::function<void(Model&, int64_t)> epoch_begin;
  std::function<void(Model&, int64_t, const Logs&)> epoch_end;
  std::function<void(Model&, int64_t)> batch_begin;
  std::function<void(Model&, int64_t, const Logs&)> batch_end;
  void on_train_begin(Model& m) override { if (train_begin) train_begin(m); }
  void on_train_end(Model& m, const History& h) override { if (train_end) train_end(m, h); }
  void on_epoch_begin(Model& m, int64_t e) override { if (epoch_begin) epoch_begin(m, e); }
  void on_epoch_end(Model& m, int64_t e, const Logs& l) override { if (epoch_end) epoch_end(m, e, l); }
  void on_batch_begin(Model& m, int64_t s) override { if (batch_begin) batch_begin(m, s); }
  void on_batch_end(Model& m, int64_t s, const Logs& l) override { if (batch_end) batch_end(m, s, l); }
};

}  // namespace loom::train
