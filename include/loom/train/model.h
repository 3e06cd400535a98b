#pragma once
// Model: a layer graph with a loss, an optimizer and metrics, trained by fit() on a data
// loader, measured by evaluate(), applied by predict(). Batches are the loader's fields: the
// graph's inputs first (in the graph's input order), then the target.
//
//   train::Model model(graph, [](const Tensor& y, const Tensor& t) { return train::cross_entropy(y, t); },
//                      std::make_shared<train::Adam>(params), {std::make_shared<train::Accuracy>()});
//   History h = model.fit(train_loader, {.epochs = 10, .validation = &test_loader});
//
// TensorX style: Model::from_graphs(inference, training, evaluation, ...) where the training
// graph (inputs: the inference inputs, then the targets) ends in the loss, all sharing state.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/data/loader.h"
#include "loom/graph/graph.h"
#include "loom/train/history.h"
#include "loom/train/metrics.h"
#include "loom/train/optimizers.h"
#include "loom/train/train_step.h"

namespace loom::train {

class Callback;
class DataParallel;  // loom/train/data_parallel.h
using Logs = std::map<std::string, double>;

struct LOOM_API FitOptions {
  int epochs = 1;
  data::DataLoader* validation = nullptr;
  std::vector<std::shared_ptr<Callback>> callbacks;
  bool progress = true;     // a ProgressBar on stdout
  int progress_every = 100; // steps between plain progress lines when stdout is not a terminal
  // Data-parallel training in several processes (dist::data_parallel() under mpirun): the
  // loader is sharded, gradients averaged before each step, logs averaged over the ranks; the
  // progress bar and root_only() callbacks (checkpoints, loggers) run on rank 0 only.
  std::shared_ptr<DataParallel> distributed;
};

class LOOM_API Model {
 public:
  Model(Graph graph, LossFn loss, std::shared_ptr<Optimizer> optimizer, std::vector<std::shared_ptr<Metric>> metrics = {});
  // The training graph's single output is the (scalar) loss; the evaluation graph, when given,
  // too (else the training graph is used for evaluation, in Eval mode).
  static Model from_graphs(Graph inference, Graph training, std::optional<Graph> evaluation,
                           std::shared_ptr<Optimizer> optimizer, std::vector<std::shared_ptr<Metric>> metrics = {});

  // A model from a file written by save() (or io::save_model): the graph with its weights,
  // `loss`, the optimizer that `make_optimizer` builds over the loaded graph's parameters, and
  // `metrics`. The loss and optimizer are code, so they are given again, as in Keras'
  // load_model(compile=False) followed by compile().
  static Model load(const std::string& path, LossFn loss,
                    const std::function<std::shared_ptr<Optimizer>(const std::vector<Tensor>& params)>& make_optimizer,
                    std::vector<std::shared_ptr<Metric>> metrics = {});
  // The inference graph's architecture and weights in one model file (io::save_model, so
  // io::load_model reads it too). The optimizer state, history and loader position are in
  // save_checkpoint's files, not here.
  void save(const std::string& path) const;
  // Trains from the loader's current position (so a restored checkpoint continues mid-epoch)
  // until `epochs` epochs are complete or a callback calls stop_training().
  History fit(data::DataLoader& train, const FitOptions& options = {});
  // Mean loss and metrics over one pass of the loader (Eval mode, no gradients).
  Logs evaluate(data::DataLoader& data);
  // The inference graph's output for `x` in batches (Eval mode, no gradients).
  Tensor predict(const Tensor& x, int64_t batch_size = 256);

  void stop_training() { stop_ = true; }
  bool stop_requested() const { return stop_; }
  Optimizer& optimizer() { return *optimizer_; }
  // The compiled training step fit() runs (its dump() and per-step memory figures).
  const TrainStep& train_step() const { return *step_; }
  const Graph& graph() const { return inference_; }
  const History& history() const { return history_; }
  // The inference graph's summary() table, then the optimizer (name, learning rate, how many
  // tensors and values it trains) and the metrics.
  std::string summary() const;
  int64_t epochs_done() const { return epochs_done_; }

  // Checkpoints hold the weights and buffers, the optimizer state, the default generator, the
  // epoch count and, when given, the loader position: load_checkpoint then fit continues
  // exactly as if training had not stopped.
  void save_checkpoint(const std::string& path, const data::DataLoader* loader = nullptr) const;
  // All or nothing: the weights, the training state, the optimizer state and the loader
  // position are all checked before any of them changes; a bad file throws and leaves the
  // model, the optimizer, the generator and the loader as they were (docs/io.md).
  void load_checkpoint(const std::string& path, data::DataLoader* loader = nullptr);

 private:
  Model() = default;
  // Loss and predictions for one batch in the current mode.
  std::pair<Tensor, Tensor> forward(const data::Batch& batch);
  // The inference graph's prediction for a batch's inputs, without gradients: what the metrics
  // see when a training graph computes the loss.
  Tensor metric_prediction(const data::Batch& batch);

  Graph inference_;
  std::optional<Graph> training_, evaluation_;
  std::shared_ptr<Plan> inference_plan_, training_plan_, evaluation_plan_;
  std::shared_ptr<TrainStep> step_;  // on inference_plan_ and loss_, or on training_plan_
  LossFn loss_;
  std::shared_ptr<Optimizer> optimizer_;
  std::vector<std::shared_ptr<Metric>> metrics_;
  History history_;
  int64_t epochs_done_ = 0;
  bool stop_ = false;
};

}  // namespace loom::train
