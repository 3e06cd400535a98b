// Model::fit on a loader: epochs of steps (forward and backward, the optimizer's update, the
// running logs), each epoch closed by validation, the history and the callbacks; data-parallel
// through train::DataParallel's hooks.
#include <cmath>
#include <cstdio>
#include <exception>
#include <optional>
#include <utility>

#include "loom/autograd/autograd.h"
#include "loom/data/dataset.h"
#include "loom/nn/mode.h"
#include "loom/train/callbacks.h"
#include "loom/train/data_parallel.h"
#include "loom/train/model.h"
#include "loom/train/progress.h"

namespace loom::train {

namespace {

// Every rank's logs become their mean over the ranks (keys in the same order everywhere).
void average_logs(DataParallel* dp, Logs& logs) {
  if (!dp) return;
  std::vector<double> values;
  for (const auto& [k, v] : logs) values.push_back(v);
  dp->average(values);
  size_t i = 0;
  for (auto& [k, v] : logs) v = values[i++];
}

// Whether any rank asked to stop (a callback on one rank only must not leave the others
// waiting in the next step's collectives).
bool any_rank_stops(DataParallel* dp, bool stop) {
  if (!dp) return stop;
  std::vector<double> flag{stop ? 1.0 : 0.0};
  dp->average(flag);
  return flag[0] > 0;
}

// Data-parallel: whatever one rank throws in a phase of the loop (a callback on rank 0 only,
// the optimizer's step, a metric, ...), every rank throws at the phase's end (settle) instead
// of the others waiting for it in their next collective. A failed rank skips the rest of the
// phase and still takes part in the collectives up to that point. One process: exceptions pass
// straight through.
class PhaseFailures {
 public:
  explicit PhaseFailures(DataParallel* dp) : dp_(dp) {}

  template <class Phase>
  void attempt(const Phase& phase) {
    if (failure_) return;
    if (!dp_) return phase();
    try {
      phase();
    } catch (...) {
      failure_ = std::current_exception();
    }
  }
  void settle() {
    if (dp_) dp_->check_failures(std::exchange(failure_, nullptr));
  }
  bool failed() const { return failure_ != nullptr; }

 private:
  DataParallel* dp_;
  std::exception_ptr failure_;
};

// Releases DataParallel::begin()'s set-up however fit ends.
struct EndGuard {
  DataParallel* dp;
  ~EndGuard() {
    if (dp) dp->end();
  }
};

}  // namespace

// One call of Model::fit on a loader, its phases named (a friend of Model: it drives the
// model's step, optimizer, metrics and history).
class FitRun {
 public:
  FitRun(Model& m, data::DataLoader& train, const FitOptions& o, int64_t target)
      : m_(m), train_(train), o_(o), dp_(o.distributed.get()), target_(target), failures_(dp_), bar_(stdout, o.progress_every) {
    const bool root = !dp_ || dp_->rank() == 0;
    show_ = o.progress && root;
    // callbacks that write files run on rank 0 only
    for (auto& cb : o.callbacks)
      if (root || !cb->root_only()) cbs_.push_back(cb.get());
  }

  History run() {
    failures_.attempt([&] {
      for (auto* cb : cbs_) cb->on_train_begin(m_);
    });
    failures_.settle();
    steps_ = train_.size();
    if (train_.position().epoch < m_.epochs_done_) train_.set_position({m_.epochs_done_, 0});
    while (m_.epochs_done_ < target_ && !m_.stop_) {
      const int64_t epoch = m_.epochs_done_;
      Logs logs;
      if (!train_epoch(epoch, logs)) break;  // stopped mid-epoch: the epoch is not done
      end_epoch(epoch, logs);
    }
    for (auto* cb : cbs_) cb->on_train_end(m_, m_.history_);
    return m_.history_;
  }

 private:
  // An epoch's running sums, from which each step's logs are the means so far.
  struct EpochTotals {
    std::vector<double> head_sums;
    double loss_sum = 0;
    int64_t seen = 0;
    int64_t step = 0;  // the loader's batch, from 1
  };
  // What a step's forward and backward left: the batch (none at the epoch's end), the loss and
  // the predictions the metrics see.
  struct StepOutput {
    std::optional<data::Batch> batch;
    Tensor loss, pred;
    std::vector<Tensor> preds;
  };

  // The epoch's steps until the loader is through (true) or a stop was asked for (false);
  // `logs` holds the last step's.
  bool train_epoch(int64_t epoch, Logs& logs) {
    failures_.attempt([&] {
      for (auto* cb : cbs_) cb->on_epoch_begin(m_, epoch);
    });
    failures_.settle();
    reset_metrics();
    EpochTotals totals;
    totals.head_sums.assign(m_.heads_.size(), 0.0);
    totals.step = train_.position().batch;
    if (show_) bar_.start_epoch(static_cast<int>(epoch + 1), static_cast<int>(target_), steps_);
    for (;;) {
      StepOutput out = forward_backward(totals.step);
      failures_.settle();  // before the gradient average, which a failed rank would not join
      if (!out.batch) return true;
      if (dp_) dp_->average_gradients(*m_.optimizer_);
      const int64_t n = update(out, totals, logs);
      end_step(totals.step, n, logs);
      m_.stop_ = any_rank_stops(dp_, m_.stop_);
      if (m_.stop_) return false;
    }
  }

  void reset_metrics() {
    for (auto& m : m_.metrics_) m->reset();
    for (const Model::Head& h : m_.heads_)
      for (auto& m : h.metrics) m->reset();
  }

  // The next batch, on_batch_begin, then zero_grad, forward, loss and backward (Train mode).
  StepOutput forward_backward(int64_t& step) {
    StepOutput out;
    failures_.attempt([&] {
      out.batch = train_.next();
      if (!out.batch) return;
      out.batch = m_.bind_sparse(*out.batch);
      ++step;
      for (auto* cb : cbs_) cb->on_batch_begin(m_, step);
      TrainStep::Result r = m_.step_->forward_backward(*out.batch);
      out.loss = r.loss;
      out.pred = r.prediction;
      out.preds = std::move(r.predictions);
      if (m_.training_ && !m_.metrics_.empty()) {  // the inference graph's prediction, for the metrics
        nn::ModeScope mode(nn::Mode::Train);
        out.pred = m_.metric_prediction(*out.batch);
      }
    });
    return out;
  }

  // The optimizer's update, then the epoch's running loss and metrics into `logs` (each
  // output's too, for a graph of several); the batch's number of samples.
  int64_t update(const StepOutput& out, EpochTotals& totals, Logs& logs) {
    const size_t n_in = m_.inference_.inputs().size();
    const data::Batch& batch = *out.batch;
    int64_t n = 0;
    failures_.attempt([&] {
      m_.step_->update();
      n = batch[0].ndim() ? batch[0].dim(0) : 1;
      totals.loss_sum += out.loss.item<double>() * static_cast<double>(n);
      totals.seen += n;
      if (out.pred.defined() && m_.heads_.empty()) {
        NoGrad off;
        for (auto& m : m_.metrics_) m->update(out.pred.detach(), batch[n_in]);
      }
      logs = {{"loss", totals.loss_sum / static_cast<double>(totals.seen)}};
      for (auto& m : m_.metrics_) logs[m->name()] = m->result();
      for (size_t i = 0; i < m_.heads_.size(); ++i) {  // each output's loss and metrics
        NoGrad off;
        const Model::Head& head = m_.heads_[i];
        totals.head_sums[i] += (*m_.head_losses_)[i].item<double>() * static_cast<double>(n);
        logs[head.name + "_loss"] = totals.head_sums[i] / static_cast<double>(totals.seen);
        for (auto& m : head.metrics) {
          m->update(out.preds[i].detach(), batch[n_in + i]);
          logs[head.name + "_" + m->name()] = m->result();
        }
      }
    });
    if (failures_.failed()) logs = blank_logs();
    return n;
  }

  // The step's logs averaged over the ranks, on_batch_end, the progress bar.
  void end_step(int64_t step, int64_t n, Logs& logs) {
    average_logs(dp_, logs);  // the ranks' shards are equally large: the mean is the whole batch's
    failures_.attempt([&] {
      for (auto* cb : cbs_) cb->on_batch_end(m_, step, logs);
    });
    failures_.settle();
    if (show_) bar_.update(step, dp_ ? n * dp_->size() : n, {logs.begin(), logs.end()});  // the whole batch's samples
  }

  // Validation, the learning rate, the history, on_epoch_end and the progress bar's line.
  void end_epoch(int64_t epoch, Logs& logs) {
    if (o_.validation) {
      Logs val;
      failures_.attempt([&] { val = m_.evaluate(*o_.validation); });
      if (failures_.failed()) val = blank_logs();
      average_logs(dp_, val);
      failures_.settle();
      for (const auto& [k, v] : val) logs["val_" + k] = v;
    }
    logs["lr"] = m_.optimizer_->lr();
    for (const auto& [k, v] : logs) m_.history_.append(k, v);
    ++m_.epochs_done_;
    failures_.attempt([&] {
      for (auto* cb : cbs_) cb->on_epoch_end(m_, epoch, logs);
    });
    failures_.settle();
    m_.stop_ = any_rank_stops(dp_, m_.stop_);
    if (show_) {
      std::vector<std::pair<std::string, double>> shown;
      for (const auto& [k, v] : logs)
        if (k != "lr") shown.emplace_back(k, v);
      bar_.end_epoch(shown);
    }
  }

  // What a failed rank contributes to the average of the logs: the same keys as the others'.
  Logs blank_logs() const {
    Logs blank{{"loss", std::nan("")}};
    for (auto& m : m_.metrics_) blank[m->name()] = std::nan("");
    for (const Model::Head& h : m_.heads_) {
      blank[h.name + "_loss"] = std::nan("");
      for (auto& m : h.metrics) blank[h.name + "_" + m->name()] = std::nan("");
    }
    return blank;
  }

  Model& m_;
  data::DataLoader& train_;
  const FitOptions& o_;
  DataParallel* dp_;
  const int64_t target_;
  PhaseFailures failures_;
  ProgressBar bar_;
  bool show_ = false;
  std::vector<Callback*> cbs_;
  int64_t steps_ = 0;  // the loader's batches per epoch
};

History Model::fit(data::DataLoader& train, const FitOptions& o) {
  if (o.epochs < 0) throw ValueError("Model::fit: epochs must be >= 0 (how many more epochs to train), got " + std::to_string(o.epochs));
  // `epochs` counts from here (Keras); total_epochs resumes to a planned total
  const int64_t target = o.total_epochs >= 0 ? o.total_epochs : epochs_done_ + o.epochs;
  stop_ = false;
  DataParallel* dp = o.distributed.get();
  const EndGuard end_guard{dp};
  if (dp) dp->begin(*this, train);
  return FitRun(*this, train, o, target).run();
}

}  // namespace loom::train
