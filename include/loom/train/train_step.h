#pragma once
// One training step compiled once and run as one call: the compiled plan of the graph
// (forward, and the loss when the graph ends in it), the loss function, the backward pass
// through the per-op gradient rules the forward recorded (autograd's rules: no second set),
// optional gradient clipping, and the optimizer's update of all parameters in one pass.
// Model::fit runs its steps through one; a loop written by hand is the eager equivalent.
//
//   train::TrainStep step(graph, [](const Tensor& y, const Tensor& t) { return cross_entropy(y, t); },
//                         std::make_shared<train::Adam>(graph.parameters()));
//   for (auto& batch : batches) float loss = step(batch).loss.item<float>();
//
// The step's memory is planned (StepArena, loom/core/memory.h): the second step's forward and
// backward record the sizes and lifetimes of the blocks they allocate, and from the third step
// on those blocks have their places in one buffer laid out by their lifetimes. Each call also measures what the step did
// with memory (stats()): the peak bytes it held above those live before it, how many
// allocations it made, how many of them the plan served and how many the system had to serve
// (see docs/compile.md).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/memory.h"
#include "loom/graph/graph.h"
#include "loom/train/optimizers.h"

namespace loom::train {

using LossFn = std::function<Tensor(const Tensor& prediction, const Tensor& target)>;
// A graph of several outputs: the (scalar) loss of all its predictions, in the graph's output
// order, against the targets, one per output (the batch's fields after the inputs).
using MultiLossFn = std::function<Tensor(const std::vector<Tensor>& predictions, const std::vector<Tensor>& targets)>;

struct LOOM_API TrainStepOptions {
  // > 0: the update is that of clip_grad_norm(params, this) followed by step(), bit for bit,
  // with the scaling done inside the update; .grad() keeps the unclipped gradients
  double clip_grad_norm = 0;
  // Called with the optimizer between backward and the update (data-parallel gradient
  // averaging, logging gradients).
  std::function<void(Optimizer&)> before_update;
};

struct LOOM_API StepStats {
  int64_t steps = 0;               // steps run
  int64_t peak_bytes = 0;          // the last step's highest live bytes above those live before it
  int64_t allocations = 0;         // allocator calls in the last step
  int64_t system_allocations = 0;  // of them, served by the system rather than the allocator's cache
  int64_t cached_steps = 0;        // steps so far whose every allocation came from the cache
  int64_t arena_served = 0;        // of the last step's allocations, served by the memory plan
  int64_t arena_missed = 0;        // of them, planned but not served (another shape, a place still held)
  int64_t arena_bytes = 0;         // the memory plan's buffer (0 until the second step has run)
  int64_t arena_planned_peak = 0;  // the most bytes its planned blocks held at once when recorded
  int64_t arena_steps = 0;         // steps so far with allocations served by the plan and none missed
};

class LOOM_API TrainStep {
 public:
  // `graph` maps the batch's first graph.inputs().size() fields to a prediction; `loss`
  // compares it with the next field (the target).
  TrainStep(const Graph& graph, LossFn loss, std::shared_ptr<Optimizer> optimizer, TrainStepOptions options = {});
  // A graph whose single output is the (scalar) loss and whose inputs are the whole batch
  // (TensorX's training graph: the inference inputs, then the targets).
  static TrainStep from_loss_graph(const Graph& training, std::shared_ptr<Optimizer> optimizer,
                                   TrainStepOptions options = {});
  // The same on plans compiled already (Model shares its plans).
  TrainStep(std::shared_ptr<Plan> plan, size_t n_inputs, LossFn loss, std::shared_ptr<Optimizer> optimizer,
            TrainStepOptions options = {});
  // A plan of `n_outputs` outputs whose loss compares each with its target.
  TrainStep(std::shared_ptr<Plan> plan, size_t n_inputs, size_t n_outputs, MultiLossFn loss, std::shared_ptr<Optimizer> optimizer,
            TrainStepOptions options = {});

  struct Result {
    Tensor loss;        // 0-d
    Tensor prediction;  // the graph's output (undefined for a loss graph; the first of several)
    std::vector<Tensor> predictions;  // every output of a graph of several (MultiLossFn)
  };
  // One step on a batch (inputs, then target) in Train mode: zero_grad, forward, loss,
  // backward, [before_update,] [clipping,] update.
  Result operator()(const std::vector<Tensor>& batch);
  // The same in two halves, for callers that act in between (Model::fit: the data-parallel
  // failure checks): zero_grad, forward, loss and backward (on the memory plan); then the update.
  Result forward_backward(const std::vector<Tensor>& batch);
  void update();

  const StepStats& stats() const { return stats_; }
  Optimizer& optimizer() { return *optimizer_; }
  const Plan& plan() const { return *plan_; }
  // The forward plan's dump, then the loss, backward and update stages and the last step's
  // memory figures.
  std::string dump() const;

 private:

  std::shared_ptr<Plan> plan_;
  size_t n_inputs_;
  LossFn loss_;
  MultiLossFn multi_loss_;
  size_t n_outputs_ = 1;
  std::shared_ptr<Optimizer> optimizer_;
  TrainStepOptions options_;
  StepStats stats_;
  int64_t live_before_ = 0, allocations_before_ = 0, system_before_ = 0;
  std::unique_ptr<StepArena> arena_;  // forward_backward's memory plan (on the heap: the step stays movable)
};

}  // namespace loom::train
