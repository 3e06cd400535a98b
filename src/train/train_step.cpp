// TrainStep: a whole training step as one call on a compiled plan (docs/compile.md).
#include "loom/train/train_step.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <utility>

#include "loom/autograd/autograd.h"
#include "loom/core/memory.h"
#include "loom/nn/mode.h"
#include "loom/train/clip.h"

namespace loom::train {

namespace {

std::string mb(int64_t bytes) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << static_cast<double>(bytes) / 1e6 << " MB";
  return s.str();
}

}  // namespace

TrainStep::TrainStep(std::shared_ptr<Plan> plan, size_t n_inputs, LossFn loss, std::shared_ptr<Optimizer> optimizer,
                     TrainStepOptions options)
    : plan_(std::move(plan)), n_inputs_(n_inputs), loss_(std::move(loss)), optimizer_(std::move(optimizer)),
      options_(std::move(options)), arena_(std::make_unique<StepArena>()) {
  if (!plan_) throw ValueError("TrainStep: no plan given");
  if (!optimizer_) throw ValueError("TrainStep: no optimizer given");
  if (!(options_.clip_grad_norm >= 0))
    throw ValueError("TrainStep: clip_grad_norm must be >= 0 (0: no clipping), got " +
                     std::to_string(options_.clip_grad_norm));
}

TrainStep::TrainStep(std::shared_ptr<Plan> plan, size_t n_inputs, size_t n_outputs, MultiLossFn loss,
                     std::shared_ptr<Optimizer> optimizer, TrainStepOptions options)
    : TrainStep(std::move(plan), n_inputs, LossFn(), std::move(optimizer), std::move(options)) {
  if (!loss) throw ValueError("TrainStep: no loss function given");
  if (n_outputs == 0) throw ValueError("TrainStep: a graph of no outputs");
  multi_loss_ = std::move(loss);
  n_outputs_ = n_outputs;
}

TrainStep::TrainStep(const Graph& graph, LossFn loss, std::shared_ptr<Optimizer> optimizer, TrainStepOptions options)
    : TrainStep(std::make_shared<Plan>(graph.compile()), graph.inputs().size(), std::move(loss), std::move(optimizer),
                std::move(options)) {
  if (!loss_) throw ValueError("TrainStep: no loss function given (for a graph that ends in its loss: from_loss_graph)");
  if (graph.outputs().size() != 1)
    throw ValueError("TrainStep: the graph must have one output, it has " + std::to_string(graph.outputs().size()));
}

TrainStep TrainStep::from_loss_graph(const Graph& training, std::shared_ptr<Optimizer> optimizer, TrainStepOptions options) {
  if (training.outputs().size() != 1)
    throw ValueError("TrainStep::from_loss_graph: the graph's single output must be the loss; it has " +
                     std::to_string(training.outputs().size()) + " outputs");
  return TrainStep(std::make_shared<Plan>(training.compile()), training.inputs().size(), nullptr, std::move(optimizer),
                   std::move(options));
}

TrainStep::Result TrainStep::forward_backward(const std::vector<Tensor>& batch) {
  const size_t need = multi_loss_ ? n_inputs_ + n_outputs_ : loss_ ? n_inputs_ + 1 : n_inputs_;
  if (batch.size() < need)
    throw ValueError("TrainStep: a batch has " + std::to_string(batch.size()) + " fields; the step needs " +
                     std::to_string(n_inputs_) +
                     (multi_loss_ ? " input(s) and then " + std::to_string(n_outputs_) + " targets, one per output"
                      : loss_     ? std::string(" input(s) and then the target")
                                  : std::string(" (the loss graph's inputs)")));
  const MemoryStats before = memory_stats();
  reset_peak_memory();
  live_before_ = before.current_bytes;
  allocations_before_ = before.allocations;
  system_before_ = before.system_allocations;
  // the memory plan: nearly every block of a step is allocated (and most are freed) here
  StepArena::Scope planned(*arena_);
  Result r;
  {
    nn::ModeScope mode(nn::Mode::Train);
    optimizer_->zero_grad();
    std::vector<Tensor> outs = plan_->run(std::vector<Tensor>(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(n_inputs_)));
    const Tensor out = outs[0];
    if (multi_loss_) {
      const auto first = batch.begin() + static_cast<std::ptrdiff_t>(n_inputs_);
      r.prediction = out;
      r.loss = multi_loss_(outs, std::vector<Tensor>(first, first + static_cast<std::ptrdiff_t>(n_outputs_)));
      r.predictions = std::move(outs);
    } else if (loss_) {
      r.prediction = out;
      r.loss = loss_(out, batch[n_inputs_]);
    } else {
      r.loss = out;
    }
  }
  if (r.loss.numel() != 1)
    throw ShapeError("TrainStep: the loss must be a single value, got shape " + shape_str(r.loss.shape()));
  r.loss.backward();
  return r;
}

void TrainStep::update() {
  if (options_.before_update) options_.before_update(*optimizer_);
  // clipping as clip_grad_norm, its scaling done inside the update (one pass fewer over the
  // gradients); .grad() keeps the unclipped values
  double scale = 1.0;
  if (options_.clip_grad_norm > 0)
    scale = std::min(options_.clip_grad_norm / (total_grad_norm(optimizer_->params()) + 1e-6), 1.0);
  optimizer_->step(scale);
  const StepArena::Stats arena = arena_->stats();
  stats_.arena_served = arena.served;
  stats_.arena_missed = arena.missed;
  stats_.arena_bytes = arena.reserved_bytes;
  stats_.arena_planned_peak = arena.recorded_peak_bytes;
  if (arena.served > 0 && arena.missed == 0) ++stats_.arena_steps;
  const MemoryStats after = memory_stats();
  stats_.peak_bytes = after.peak_bytes - live_before_;
  stats_.allocations = after.allocations - allocations_before_;
  stats_.system_allocations = after.system_allocations - system_before_;
  if (stats_.system_allocations == 0) ++stats_.cached_steps;
  ++stats_.steps;
}

TrainStep::Result TrainStep::operator()(const std::vector<Tensor>& batch) {
  Result r = forward_backward(batch);
  update();
  return r;
}

std::string TrainStep::dump() const {
  std::ostringstream s;
  s << "TrainStep: forward, loss, backward and update in one call\n";
  s << "forward " << plan_->dump();
  s << "loss: " << (multi_loss_ ? "the loss function, on the plan's outputs and the batch's targets (one each)"
                     : loss_ ? "the loss function, on the plan's output and the batch's target"
                             : "the plan's output")
    << "\n";
  s << "backward: autograd's per-op rules, recorded by the forward; each node's saved tensors freed once it has run\n";
  int64_t values = 0;
  for (const Tensor& p : optimizer_->params()) values += p.numel();
  s << "update: " << optimizer_->name() << " over " << optimizer_->params().size() << " parameter tensors (" << values
    << " values)" << (optimizer_->fused() ? ", the fused updates of all of them in one pass" : ", tensor ops") << "\n";
  if (options_.clip_grad_norm > 0)
    s << "        of the gradients clipped to norm " << options_.clip_grad_norm
      << " (clip_grad_norm's coefficient applied inside the update)\n";
  if (stats_.steps == 0) {
    s << "memory: no step run yet\n";
  } else {
    s << "memory (last of " << stats_.steps << " steps): peak " << mb(stats_.peak_bytes) << " above the "
      << mb(live_before_) << " live before it; " << stats_.allocations << " allocations, "
      << stats_.system_allocations << " of them from the system; " << stats_.cached_steps << " of the "
      << stats_.steps << " steps took every block from the allocator's cache or the memory plan\n";
    if (stats_.arena_bytes > 0)
      s << "memory plan: " << mb(stats_.arena_bytes) << " buffer for blocks that held at most "
        << mb(stats_.arena_planned_peak) << " at once when recorded; the last step took " << stats_.arena_served
        << " blocks from it, " << stats_.arena_missed << " planned ones elsewhere; " << stats_.arena_steps << " of the "
        << stats_.steps << " steps ran on it\n";
    else
      s << "memory plan: none yet (recorded by the second step, used from the third)\n";
  }
  return s.str();
}

}  // namespace loom::train
