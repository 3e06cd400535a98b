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
#include "loom/train/loss.h"
#include "loom/train/metric_list.h"
#include "loom/train/metrics.h"
#include "loom/train/optimizers.h"
#include "loom/train/train_step.h"

namespace loom::train {

class Callback;
class DataParallel;  // loom/train/data_parallel.h
class FitRun;  // fit's phases (src/train/fit.cpp), not for use outside Model
using Logs = std::map<std::string, double>;

struct LOOM_API FitOptions {
  // How many epochs this call trains, as in Keras: a second fit(loader, {.epochs = 3}) trains
  // three more. A checkpoint restored mid-epoch counts its unfinished epoch as the first.
  int epochs = 1;
  // When >= 0, train until the model has completed this many epochs in all (epochs_done()),
  // whatever `epochs` says: resuming a restored checkpoint to a planned total (what Keras'
  // initial_epoch + epochs does). 0 more when the model is already there.
  int64_t total_epochs = -1;
  data::DataLoader* validation = nullptr;
  std::vector<std::shared_ptr<Callback>> callbacks;
  bool progress = true;     // a ProgressBar on stdout
  int progress_every = 100; // steps between plain progress lines when stdout is not a terminal
  // fit(x, y, ...) on tensors only (Keras' fit): samples per batch, the fraction of the
  // samples held out for validation (the last ones, taken before shuffling, as Keras does;
  // logged with the val_ prefix), whether each epoch shuffles, and the shuffling's seed.
  int64_t batch_size = 32;
  double validation_split = 0;
  bool shuffle = true;
  uint64_t seed = 0;
  // Data-parallel training in several processes (dist::data_parallel() under mpirun): the
  // loader is sharded, gradients averaged before each step, logs averaged over the ranks; the
  // progress bar and root_only() callbacks (checkpoints, loggers) run on rank 0 only.
  std::shared_ptr<DataParallel> distributed;
};

// One output of a graph of several: its loss, the loss's weight in the total and its metrics
// (Keras' compile with a loss, loss_weights and metrics per output). History keys are Keras':
// "loss" (the weighted total), "<output>_loss", "<output>_<metric>", and val_ before each.
struct LOOM_API OutputLoss {
  std::string output;  // the output layer's name; "" for the output at this position of the list
  Loss loss;
  double weight = 1.0;
  MetricList metrics;
};

class LOOM_API Model {
 public:
  // loss: a function of (prediction, target) — train::cross_entropy, a lambda — or Keras' name
  // ("mse", "sparse_categorical_crossentropy": loss.h); metrics: Metric objects, names
  // ("accuracy") or named functions (metric_list.h); the optimizer an object or a name
  // ("adam", "sgd": make_optimizer with its defaults, over graph.parameters()).
  Model(Graph graph, Loss loss, std::shared_ptr<Optimizer> optimizer, MetricList metrics = {});
  Model(Graph graph, Loss loss, const std::string& optimizer, MetricList metrics = {});
  // A graph of several outputs: one OutputLoss per output, by name or in the graph's output
  // order; batches hold the inputs, then one target per output. (The constructors above, on
  // such a graph, use the one loss and the metrics for every output, as Keras does.)
  Model(Graph graph, std::vector<OutputLoss> outputs, std::shared_ptr<Optimizer> optimizer);
  Model(Graph graph, std::vector<OutputLoss> outputs, const std::string& optimizer);
  // The training graph's single output is the (scalar) loss; the evaluation graph, when given,
  // too (else the training graph is used for evaluation, in Eval mode).
  static Model from_graphs(Graph inference, Graph training, std::optional<Graph> evaluation,
                           std::shared_ptr<Optimizer> optimizer, MetricList metrics = {});

  // A model from a file written by save() (or io::save_model): the graph with its weights,
  // `loss`, the optimizer that `make_optimizer` builds over the loaded graph's parameters, and
  // `metrics`. The loss and optimizer are code, so they are given again, as in Keras'
  // load_model(compile=False) followed by compile().
  static Model load(const std::string& path, Loss loss,
                    const std::function<std::shared_ptr<Optimizer>(const std::vector<Tensor>& params)>& make_optimizer,
                    MetricList metrics = {});
  // The inference graph's architecture and weights in one model file (io::save_model, so
  // io::load_model reads it too). The optimizer state, history and loader position are in
  // save_checkpoint's files, not here.
  void save(const std::string& path) const;
  // Trains from the loader's current position (so a restored checkpoint continues mid-epoch)
  // for `epochs` more epochs (or up to `total_epochs`) or until a callback calls
  // stop_training(). Epochs are numbered from the model's first (callbacks, the progress
  // bar), and the returned History holds every epoch the model trained, across fit calls.
  History fit(data::DataLoader& train, const FitOptions& options = {});
  // Keras' fit(x, y): the tensors' rows are the samples (one tensor per graph input, in the
  // graph's input order), batched by options.batch_size, shuffled each epoch unless
  // options.shuffle is false, with options.validation_split held out.
  History fit(const Tensor& x, const Tensor& y, const FitOptions& options = {});
  History fit(const std::vector<Tensor>& x, const Tensor& y, const FitOptions& options = {});
  // A graph of several outputs: one target tensor per output, in the graph's output order.
  History fit(const std::vector<Tensor>& x, const std::vector<Tensor>& y, const FitOptions& options = {});
  // Mean loss and metrics over one pass of the loader (Eval mode, no gradients).
  Logs evaluate(data::DataLoader& data);
  Logs evaluate(const Tensor& x, const Tensor& y, int64_t batch_size = 32);
  Logs evaluate(const std::vector<Tensor>& x, const Tensor& y, int64_t batch_size = 32);
  Logs evaluate(const std::vector<Tensor>& x, const std::vector<Tensor>& y, int64_t batch_size = 32);
  // The inference graph's output for `x` in batches (Eval mode, no gradients); one tensor per
  // graph input for a graph of several.
  Tensor predict(const Tensor& x, int64_t batch_size = 256);
  Tensor predict(const std::vector<Tensor>& x, int64_t batch_size = 256);
  // Every output, in the graph's output order (predict takes a graph of one output).
  std::vector<Tensor> predict_all(const std::vector<Tensor>& x, int64_t batch_size = 256);

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
  friend class FitRun;
  Model() = default;
  // Loss and predictions for one batch in the current mode.
  std::pair<Tensor, Tensor> forward(const data::Batch& batch);
  // The inference graph's prediction for a batch's inputs, without gradients: what the metrics
  // see when a training graph computes the loss.
  Tensor metric_prediction(const data::Batch& batch);

  // The graph's SparseInputs take the batch fields after the dense inputs, in the graph's node
  // order: each such field becomes its input's value (SparseInput::set_value) and leaves the
  // batch, so what follows sees the dense inputs, then the targets.
  data::Batch bind_sparse(const data::Batch& batch) const;
  size_t n_input_fields() const { return inference_.inputs().size() + sparse_inputs_.size(); }

  // A graph of several outputs: each one's loss, weight and metrics, in the graph's order.
  struct Head {
    std::string name;
    Loss loss;
    double weight = 1.0;
    std::vector<std::shared_ptr<Metric>> metrics;
  };
  void set_heads(std::vector<OutputLoss> outputs);

  Graph inference_;
  std::vector<nn::Layer> sparse_inputs_;  // the SparseInputs of inference_, in node order
  std::vector<Head> heads_;  // empty for a graph of one output (loss_ and metrics_)
  std::shared_ptr<std::vector<Tensor>> head_losses_;  // each output's loss in the last training step
  std::optional<Graph> training_, evaluation_;
  std::shared_ptr<Plan> inference_plan_, training_plan_, evaluation_plan_;
  std::shared_ptr<TrainStep> step_;  // on inference_plan_ and loss_, or on training_plan_
  Loss loss_;
  std::shared_ptr<Optimizer> optimizer_;
  std::vector<std::shared_ptr<Metric>> metrics_;
  History history_;
  int64_t epochs_done_ = 0;
  bool stop_ = false;
};

}  // namespace loom::train
