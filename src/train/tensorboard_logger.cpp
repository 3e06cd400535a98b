#include "loom/train/tensorboard.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "loom/core/error.h"
#include "loom/io/model_file.h"

namespace loom::train {

TensorBoardLogger::TensorBoardLogger(std::string log_dir, int64_t histogram_freq, int64_t update_freq)
    : log_dir_(std::move(log_dir)), histogram_freq_(histogram_freq), update_freq_(update_freq) {
  if (log_dir_.empty()) throw ValueError("TensorBoardLogger: log_dir must not be empty");
  if (histogram_freq < 0 || update_freq < 0)
    throw ValueError("TensorBoardLogger: histogram_freq and update_freq must be >= 0 (0: off), not " +
                     std::to_string(histogram_freq) + " and " + std::to_string(update_freq));
}

void TensorBoardLogger::on_train_begin(Model&) {
  // New files for every fit, as Keras does: TensorBoard reads all files of a folder as one run.
  train_.emplace((std::filesystem::path(log_dir_) / "train").string());
  validation_.reset();
}

void TensorBoardLogger::on_batch_end(Model&, int64_t, const Logs& logs) {
  ++batches_;
  if (update_freq_ == 0 || batches_ % update_freq_ != 0 || !train_) return;
  for (const auto& [name, value] : logs) train_->add_scalar("batch_" + name, value, batches_);
}

void TensorBoardLogger::log_epoch(int64_t epoch, const Logs& logs, double wall_time) {
  if (!train_) train_.emplace((std::filesystem::path(log_dir_) / "train").string());
  for (const auto& [name, value] : logs) {
    if (name.rfind("val_", 0) == 0) {
      if (!validation_) validation_.emplace((std::filesystem::path(log_dir_) / "validation").string());
      validation_->add_scalar("epoch_" + name.substr(4), value, epoch, wall_time);
    } else {
      train_->add_scalar(name == "lr" ? "epoch_learning_rate" : "epoch_" + name, value, epoch, wall_time);
    }
  }
}

void TensorBoardLogger::on_epoch_end(Model& model, int64_t epoch, const Logs& logs) {
  log_epoch(epoch, logs);
  if (histogram_freq_ == 0 || (epoch + 1) % histogram_freq_ != 0) return;
  for (const auto& [name, tensor] : io::graph_state(model.graph())) {
    const std::vector<double> values = tensor.astype(DType::Float64).to_vector<double>();
    // A tensor without a finite value (diverged) has no distribution to draw; the scalars show it.
    if (std::any_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); }))
      train_->add_histogram(name, values, epoch);
  }
}

}  // namespace loom::train
