#pragma once
// A Model::fit callback writing TensorBoard event files (io::SummaryWriter), laid out as Keras'
// TensorBoard callback lays them out, so both show side by side:
//
//   auto tb = std::make_shared<train::TensorBoardLogger>("logs/mlp", /*histogram_freq=*/1);
//   model.fit(train_loader, {.epochs = 10, .validation = &test_loader, .callbacks = {tb}});
//   // tensorboard --logdir logs
//
// <log_dir>/train gets "epoch_<name>" for each training metric of the epoch's logs ("lr" as
// "epoch_learning_rate") and, every `update_freq` batches, "batch_<name>" at the batch's global
// step; <log_dir>/validation gets "epoch_<name>" for each "val_<name>". Every `histogram_freq`
// epochs the distribution of each weight and buffer (named as in model files,
// "<layer>/<path>") is written to <log_dir>/train. Epochs are 0-based steps.
#include <cstdint>
#include <optional>
#include <string>

#include "loom/core/api.h"
#include "loom/io/tensorboard.h"
#include "loom/train/callbacks.h"

namespace loom::train {

class LOOM_API TensorBoardLogger : public Callback {
 public:
  // ValueError for a negative histogram_freq or update_freq (0 turns either off).
  explicit TensorBoardLogger(std::string log_dir, int64_t histogram_freq = 0, int64_t update_freq = 0);
  bool root_only() const override { return true; }
  void on_train_begin(Model& model) override;
  void on_batch_end(Model& model, int64_t step, const Logs& logs) override;
  void on_epoch_end(Model& model, int64_t epoch, const Logs& logs) override;
  // Writes one epoch's logs as on_epoch_end does (without histograms); `wall_time` in seconds
  // since the Unix epoch, 0 for now. What `loom runs export --tensorboard` uses for stored runs.
  void log_epoch(int64_t epoch, const Logs& logs, double wall_time = 0);
  const std::string& log_dir() const { return log_dir_; }

 private:
  std::string log_dir_;
  int64_t histogram_freq_, update_freq_;
  int64_t batches_ = 0;  // over every fit with this logger: the batch scalars' step
  std::optional<io::SummaryWriter> train_, validation_;
};

}  // namespace loom::train
