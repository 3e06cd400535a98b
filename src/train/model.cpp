#include "loom/train/model.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <exception>
#include <optional>
#include <utility>

#include "core/json_util.h"
#include "loom/autograd/autograd.h"
#include "loom/io/model.h"
#include "loom/nn/mode.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/random.h"
#include "loom/train/callbacks.h"
#include "loom/train/data_parallel.h"
#include "loom/train/progress.h"

namespace loom::train {

using json = nlohmann::json;

Model::Model(Graph graph, LossFn loss, std::shared_ptr<Optimizer> optimizer, std::vector<std::shared_ptr<Metric>> metrics)
    : inference_(std::move(graph)), loss_(std::move(loss)), optimizer_(std::move(optimizer)), metrics_(std::move(metrics)) {
  if (!optimizer_) throw ValueError("Model: no optimizer given");
  if (!loss_) throw ValueError("Model: no loss function given");
  if (inference_.outputs().size() != 1)
    throw ValueError("Model: the graph must have one output, it has " + std::to_string(inference_.outputs().size()));
  inference_plan_ = std::make_shared<Plan>(inference_);
  step_ = std::make_shared<TrainStep>(inference_plan_, inference_.inputs().size(), loss_, optimizer_);
}

Model Model::from_graphs(Graph inference, Graph training, std::optional<Graph> evaluation, std::shared_ptr<Optimizer> optimizer,
                         std::vector<std::shared_ptr<Metric>> metrics) {
  if (!optimizer) throw ValueError("Model::from_graphs: no optimizer given");
  for (const Graph* g : {&inference, &training})
    if (g->outputs().size() != 1) throw ValueError("Model::from_graphs: each graph must have one output");
  if (training.inputs().size() <= inference.inputs().size())
    throw ValueError("Model::from_graphs: the training graph takes the inference inputs and then the targets (" +
                     std::to_string(training.inputs().size()) + " inputs for " + std::to_string(inference.inputs().size()) +
                     " inference inputs)");
  Model m;
  m.inference_ = std::move(inference);
  m.training_ = std::move(training);
  m.evaluation_ = std::move(evaluation);
  m.optimizer_ = std::move(optimizer);
  m.metrics_ = std::move(metrics);
  m.inference_plan_ = std::make_shared<Plan>(m.inference_);
  m.training_plan_ = std::make_shared<Plan>(*m.training_);
  if (m.evaluation_) m.evaluation_plan_ = std::make_shared<Plan>(*m.evaluation_);
  m.step_ = std::make_shared<TrainStep>(m.training_plan_, m.training_->inputs().size(), nullptr, m.optimizer_);
  return m;
}

std::pair<Tensor, Tensor> Model::forward(const data::Batch& batch) {
  const size_t n_in = inference_.inputs().size();
  if (batch.size() < n_in + 1)
    throw ValueError("Model: a batch has " + std::to_string(batch.size()) + " fields; the model needs " + std::to_string(n_in) +
                     " input(s) and then the target(s)");
  std::vector<Tensor> xs(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(n_in));
  if (training_) {
    const bool eval = nn::current_mode() == nn::Mode::Eval;
    Plan& p = eval && evaluation_plan_ ? *evaluation_plan_ : *training_plan_;
    Tensor loss = p.run(batch)[0];
    return {loss, metrics_.empty() ? Tensor() : metric_prediction(batch)};
  }
  Tensor pred = inference_plan_->run(xs)[0];
  return {loss_(pred, batch[n_in]), pred};
}

Tensor Model::metric_prediction(const data::Batch& batch) {
  const auto n_in = static_cast<std::ptrdiff_t>(inference_.inputs().size());
  NoGrad off;
  return inference_plan_->run(std::vector<Tensor>(batch.begin(), batch.begin() + n_in))[0];
}

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

}  // namespace

History Model::fit(data::DataLoader& train, const FitOptions& o) {
  stop_ = false;
  DataParallel* dp = o.distributed.get();
  struct EndGuard {  // releases begin()'s set-up however fit ends
    DataParallel* dp;
    ~EndGuard() {
      if (dp) dp->end();
    }
  } end_guard{dp};
  if (dp) dp->begin(*this, train);
  const bool root = !dp || dp->rank() == 0;
  const bool show = o.progress && root;
  // callbacks that write files run on rank 0 only
  std::vector<Callback*> cbs;
  for (auto& cb : o.callbacks)
    if (root || !cb->root_only()) cbs.push_back(cb.get());
  ProgressBar bar(stdout, o.progress_every);
  const size_t n_in = inference_.inputs().size();
  // Data-parallel: whatever one rank throws in a phase of the loop (a callback on rank 0
  // only, the optimizer's step, a metric, ...), every rank throws at the phase's end
  // (check_failures) instead of the others waiting for it in their next collective. A failed
  // rank skips the rest of the phase and still takes part in the collectives up to that point.
  // One process: exceptions pass straight through.
  std::exception_ptr failure;
  auto attempt = [&](const auto& phase) {
    if (failure) return;
    if (!dp) return phase();
    try {
      phase();
    } catch (...) {
      failure = std::current_exception();
    }
  };
  auto settle = [&] {
    if (dp) dp->check_failures(std::exchange(failure, nullptr));
  };
  // What a failed rank contributes to the average of the logs: the same keys as the others'.
  auto blank_logs = [&] {
    Logs blank{{"loss", std::nan("")}};
    for (auto& m : metrics_) blank[m->name()] = std::nan("");
    return blank;
  };
  attempt([&] {
    for (auto* cb : cbs) cb->on_train_begin(*this);
  });
  settle();
  const int64_t steps = train.size();
  if (train.position().epoch < epochs_done_) train.set_position({epochs_done_, 0});
  while (epochs_done_ < o.epochs && !stop_) {
    const int64_t epoch = epochs_done_;
    attempt([&] {
      for (auto* cb : cbs) cb->on_epoch_begin(*this, epoch);
    });
    settle();
    for (auto& m : metrics_) m->reset();
    double loss_sum = 0;
    int64_t seen = 0;
    if (show) bar.start_epoch(static_cast<int>(epoch + 1), o.epochs, steps);
    int64_t step = train.position().batch;
    bool complete = false;
    Logs logs;
    for (;;) {
      std::optional<data::Batch> batch;
      Tensor loss, pred;
      attempt([&] {
        batch = train.next();
        if (batch) {
          ++step;
          for (auto* cb : cbs) cb->on_batch_begin(*this, step);
          // zero_grad, forward, loss and backward (Train mode)
          TrainStep::Result r = step_->forward_backward(*batch);
          loss = r.loss;
          pred = r.prediction;
          if (training_ && !metrics_.empty()) {  // the inference graph's prediction, for the metrics
            nn::ModeScope mode(nn::Mode::Train);
            pred = metric_prediction(*batch);
          }
        }
      });
      settle();  // before the gradient average, which a failed rank would not join
      if (!batch) {
        complete = true;
        break;
      }
      if (dp) dp->average_gradients(*optimizer_);
      int64_t n = 0;
      attempt([&] {
        step_->update();
        n = (*batch)[0].ndim() ? (*batch)[0].dim(0) : 1;
        loss_sum += loss.item<double>() * static_cast<double>(n);
        seen += n;
        if (pred.defined()) {
          NoGrad off;
          for (auto& m : metrics_) m->update(pred.detach(), (*batch)[n_in]);
        }
        logs = {{"loss", loss_sum / static_cast<double>(seen)}};
        for (auto& m : metrics_) logs[m->name()] = m->result();
      });
      if (failure) logs = blank_logs();
      average_logs(dp, logs);  // the ranks' shards are equally large: the mean is the whole batch's
      attempt([&] {
        for (auto* cb : cbs) cb->on_batch_end(*this, step, logs);
      });
      settle();
      if (show) bar.update(step, dp ? n * dp->size() : n, {logs.begin(), logs.end()});  // the whole batch's samples
      stop_ = any_rank_stops(dp, stop_);
      if (stop_) break;
    }
    if (!complete) break;  // stopped mid-epoch: the epoch is not done
    if (o.validation) {
      Logs val;
      attempt([&] { val = evaluate(*o.validation); });
      if (failure) val = blank_logs();
      average_logs(dp, val);
      settle();
      for (const auto& [k, v] : val) logs["val_" + k] = v;
    }
    logs["lr"] = optimizer_->lr();
    for (const auto& [k, v] : logs) history_.append(k, v);
    ++epochs_done_;
    attempt([&] {
      for (auto* cb : cbs) cb->on_epoch_end(*this, epoch, logs);
    });
    settle();
    stop_ = any_rank_stops(dp, stop_);
    if (show) {
      std::vector<std::pair<std::string, double>> shown;
      for (const auto& [k, v] : logs)
        if (k != "lr") shown.emplace_back(k, v);
      bar.end_epoch(shown);
    }
  }
  for (auto* cb : cbs) cb->on_train_end(*this, history_);
  return history_;
}

Logs Model::evaluate(data::DataLoader& loader) {
  nn::ModeScope mode(nn::Mode::Eval);
  NoGrad off;
  const size_t n_in = inference_.inputs().size();
  std::vector<std::unique_ptr<Metric>> ms;
  for (auto& m : metrics_) ms.push_back(m->clone());
  loader.set_position({loader.position().epoch, 0});
  double loss_sum = 0;
  int64_t seen = 0;
  while (auto batch = loader.next()) {
    auto [loss, pred] = forward(*batch);
    const int64_t n = (*batch)[0].ndim() ? (*batch)[0].dim(0) : 1;
    loss_sum += loss.item<double>() * static_cast<double>(n);
    seen += n;
    for (auto& m : ms) m->update(pred, (*batch)[n_in]);
  }
  Logs logs{{"loss", seen ? loss_sum / static_cast<double>(seen) : 0.0}};
  for (auto& m : ms) logs[m->name()] = m->result();
  return logs;
}

Tensor Model::predict(const Tensor& x, int64_t batch_size) {
  if (batch_size <= 0) throw ValueError("Model::predict: batch_size must be positive, got " + std::to_string(batch_size));
  if (inference_.inputs().size() != 1)
    throw ValueError("Model::predict: the graph has " + std::to_string(inference_.inputs().size()) + " inputs; predict takes one");
  nn::ModeScope mode(nn::Mode::Eval);
  NoGrad off;
  std::vector<Tensor> outs;
  for (int64_t b = 0; b < x.dim(0); b += batch_size)
    outs.push_back(inference_plan_->run({slice(x, 0, b, std::min(x.dim(0), b + batch_size))})[0]);
  if (outs.empty()) throw ValueError("Model::predict: the input has no rows");
  return outs.size() == 1 ? outs[0] : concatenate(outs, 0);
}

Model Model::load(const std::string& path, LossFn loss,
                  const std::function<std::shared_ptr<Optimizer>(const std::vector<Tensor>& params)>& make_optimizer,
                  std::vector<std::shared_ptr<Metric>> metrics) {
  if (!make_optimizer) throw ValueError("Model::load: no optimizer factory given");
  Graph graph = io::load_model(path);
  std::shared_ptr<Optimizer> optimizer = make_optimizer(graph.parameters());
  return Model(std::move(graph), std::move(loss), std::move(optimizer), std::move(metrics));
}

void Model::save(const std::string& path) const { io::save_model(path, inference_); }

std::string Model::summary() const {
  int64_t values = 0;
  for (const Tensor& p : optimizer_->params()) values += p.numel();
  char lr[32];
  std::snprintf(lr, sizeof lr, "%g", optimizer_->lr());
  std::string s = inference_.summary() + "Optimizer: " + optimizer_->name() + " (lr " + lr + ") over " +
                  std::to_string(optimizer_->params().size()) + " tensors, " + std::to_string(values) + " values\n";
  std::string names;
  for (const auto& m : metrics_) names += (names.empty() ? "" : ", ") + m->name();
  return s + "Metrics: " + (names.empty() ? "(none)" : names) + "\n";
}

void Model::save_checkpoint(const std::string& path, const data::DataLoader* loader) const {
  const OptimizerState os = optimizer_->state_dict();
  io::TensorMap extra;
  for (const auto& [k, t] : os.tensors) extra["optimizer/" + k] = t;
  // Floats through detail::json_float: a NaN or inf loss must not become null (unloadable).
  json scalars = json::object(), history = json::object();
  for (const auto& [k, v] : os.scalars) scalars[k] = detail::json_float(v);
  for (const auto& [k, series] : history_.series) {
    json values = json::array();
    for (double v : series) values.push_back(detail::json_float(v));
    history[k] = std::move(values);
  }
  json meta{{"optimizer", optimizer_->name()},
            {"counters", os.counters},
            {"scalars", std::move(scalars)},
            {"rng", {default_generator().seed(), default_generator().counter()}},
            {"epochs_done", epochs_done_},
            {"history", std::move(history)}};
  if (loader) {
    meta["loader"] = {loader->position().epoch, loader->position().batch};
    // What a batch was, so that a loader of another layout (data-parallel at another number
    // of ranks, another batch size) resumes at the same place in the epoch's order.
    const data::LoaderOptions& lo = loader->options();
    meta["loader_layout"] = {{"batch_size", lo.batch_size}, {"shards", lo.shard.count}, {"batches", loader->size()}};
  }
  io::save_state(path, inference_, extra, {{"loom.train", meta.dump()}});
}

void Model::load_checkpoint(const std::string& path, data::DataLoader* loader) {
  // All or nothing: the file is read and every part checked (weights, training state,
  // optimizer state, loader position) before the model, the optimizer or the loader change.
  const std::string source = "'" + path + "'";
  io::TensorMap weights;
  io::Checkpoint c = io::read_state(path, &weights);
  io::check_graph_state(inference_, weights, source);
  auto it = c.metadata.find("loom.train");
  if (it == c.metadata.end()) throw IOError("Model::load_checkpoint: '" + path + "' holds weights but no training state");
  auto bad = [&](const std::string& what) { return IOError("Model::load_checkpoint: '" + path + "' has a malformed training state: " + what); };
  std::string error;
  const std::optional<json> parsed = detail::parse_json(it->second, &error);
  if (!parsed) throw bad(error);
  const json& meta = *parsed;
  if (!meta.is_object()) throw bad("it is not a JSON object");
  auto field = [&](const char* key, bool (json::*is)() const noexcept, const char* valid) -> const json& {
    auto f = meta.find(key);
    if (f == meta.end()) throw bad(std::string("the field '") + key + "' is missing");
    if (!((*f).*is)()) throw bad(std::string("the field '") + key + "' is not " + valid);
    return *f;
  };
  const std::string optimizer = field("optimizer", &json::is_string, "a string").get<std::string>();
  if (optimizer != optimizer_->name())
    throw ValueError("Model::load_checkpoint: '" + path + "' was written by a " + optimizer + " optimizer, this model uses " +
                     optimizer_->name());
  OptimizerState os;
  for (const auto& [k, t] : c.extra)
    if (k.rfind("optimizer/", 0) == 0) os.tensors[k.substr(10)] = t;
  for (const auto& [k, v] : field("counters", &json::is_object, "an object").items()) {
    const auto n = detail::json_to_int(v);
    if (!n) throw bad("the counter '" + k + "' is not an integer");
    os.counters[k] = *n;
  }
  for (const auto& [k, v] : field("scalars", &json::is_object, "an object").items()) {
    const auto x = detail::json_to_float(v);
    if (!x) throw bad("the scalar '" + k + "' is not " + detail::json_float_help());
    os.scalars[k] = *x;
  }
  const json& rng = field("rng", &json::is_array, "an array");
  if (rng.size() != 2 || !rng[0].is_number_unsigned() || !rng[1].is_number_unsigned())
    throw bad("the field 'rng' is not two non-negative integers (seed, counter)");
  const auto epochs = detail::json_to_int(field("epochs_done", &json::is_number, "a number"), 0);
  if (!epochs) throw bad("the field 'epochs_done' is not an integer >= 0");
  std::map<std::string, std::vector<double>> history;
  for (const auto& [k, series] : field("history", &json::is_object, "an object").items()) {
    if (!series.is_array()) throw bad("the history of '" + k + "' is not an array");
    std::vector<double>& out = history[k];
    for (const json& v : series) {
      // null: a non-finite value as files before detail::json_float wrote it
      const auto x = v.is_null() ? std::optional<double>(std::nan("")) : detail::json_to_float(v);
      if (!x) throw bad("the history of '" + k + "' holds " + v.dump() + " (valid: " + detail::json_float_help() + ")");
      out.push_back(*x);
    }
  }
  std::optional<data::LoaderPosition> position;
  if (loader && meta.contains("loader")) {
    // The layout the position counts in: the file's (written with one), else this loader's.
    int64_t batch_size = loader->options().batch_size, shards = loader->options().shard.count, batches = loader->size();
    if (meta.contains("loader_layout")) {
      const json& lay = meta["loader_layout"];
      auto get = [&](const char* key) {
        const auto v = lay.is_object() && lay.contains(key) ? detail::json_to_int(lay[key], 1) : std::nullopt;
        if (!v) throw bad(std::string("the loader layout's '") + key + "' is missing or not an integer >= 1");
        return *v;
      };
      batch_size = get("batch_size");
      shards = get("shards");
      batches = lay.is_object() && lay.contains("batches") ? detail::json_to_int(lay["batches"], 0).value_or(-1) : -1;
      if (batches < 0) throw bad("the loader layout's 'batches' is missing or not an integer >= 0");
    }
    const json& l = meta["loader"];
    const auto epoch = l.is_array() && l.size() == 2 ? detail::json_to_int(l[0], 0) : std::nullopt;
    const auto batch = l.is_array() && l.size() == 2 ? detail::json_to_int(l[1], 0, batches) : std::nullopt;
    if (!epoch || !batch)
      throw bad("the loader position " + (l.is_structured() ? std::string("") : l.dump()) +
                " is not [epoch >= 0, batch in [0, " + std::to_string(batches) + "]]");
    position = data::LoaderPosition{*epoch, *batch};
    const int64_t here = loader->options().batch_size * loader->options().shard.count;
    int64_t global = 0, sample = 0;
    if (__builtin_mul_overflow(batch_size, shards, &global) || __builtin_mul_overflow(*batch, global, &sample))
      throw bad("the loader layout's global batch (batch_size * shards) or position overflows");
    if (*batch == batches) {
      position->batch = loader->size();  // the epoch's batches were all delivered
    } else {
      // Mid-epoch: the same place in the epoch's order, also in another layout (every shard's
      // batch b covers the order's positions [b * global, (b + 1) * global)).
      auto layout = [](int64_t n, int64_t b) {
        return std::to_string(n) + (n == 1 ? " shard" : " shards") + " of batch " + std::to_string(b) + " (a global batch of " +
               std::to_string(n * b) + ")";
      };
      if (sample / here > loader->size())
        throw ValueError("Model::load_checkpoint: '" + path + "' stands at position " + std::to_string(sample) + " of epoch " +
                         std::to_string(position->epoch) + "'s order, beyond this loader's " + std::to_string(loader->size()) + " batches of " +
                         layout(loader->options().shard.count, loader->options().batch_size));
      if (sample % here != 0)
        throw ValueError("Model::load_checkpoint: '" + path + "' stands mid-epoch after batch " + std::to_string(*batch) + " of " +
                         std::to_string(batches) + " of epoch " + std::to_string(position->epoch) + " of a loader of " + layout(shards, batch_size) +
                         ", at position " + std::to_string(sample) + " of the epoch's order; this loader of " +
                         layout(loader->options().shard.count, loader->options().batch_size) +
                         " has no batch boundary there (valid: a global batch that divides " + std::to_string(sample) +
                         ", or a checkpoint written at the end of an epoch)");
      position->batch = sample / here;
    }
  }
  // Commit. The optimizer checks its state against its parameters and changes nothing when it
  // throws; the weights were checked above, so copying them cannot fail.
  optimizer_->load_state_dict(os);
  io::load_graph_state(inference_, weights, source);
  default_generator().set_state(rng[0].get<uint64_t>(), rng[1].get<uint64_t>());
  epochs_done_ = *epochs;
  history_.series = std::move(history);
  if (position) loader->set_position(*position);
}

}  // namespace loom::train
