#include "loom/train/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <utility>

#include "loom/autograd/autograd.h"
#include "loom/data/dataset.h"
#include "loom/io/model_file.h"
#include "loom/nn/mode.h"
#include "loom/nn/sparse.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"

namespace loom::train {

namespace {
std::vector<nn::Layer> sparse_inputs_of(const Graph& g) {
  std::vector<nn::Layer> found;
  for (const nn::Layer& l : g.nodes())
    if (std::string(l.kind()) == "SparseInput") found.push_back(l);
  return found;
}
}  // namespace

Model::Model(Graph graph, Loss loss, const std::string& optimizer, MetricList metrics)
    : Model(graph, std::move(loss), make_optimizer(optimizer, graph.parameters()), std::move(metrics)) {}

Model::Model(Graph graph, Loss loss, std::shared_ptr<Optimizer> optimizer, MetricList metrics)
    : inference_(std::move(graph)), sparse_inputs_(sparse_inputs_of(inference_)), loss_(std::move(loss)),
      optimizer_(std::move(optimizer)), metrics_(metrics.metrics()) {
  if (!optimizer_) throw ValueError("Model: no optimizer given");
  if (!loss_) throw ValueError("Model: no loss function given");
  inference_plan_ = std::make_shared<Plan>(inference_);
  const size_t n_out = inference_.outputs().size();
  if (n_out == 1) {
    step_ = std::make_shared<TrainStep>(inference_plan_, inference_.inputs().size(), loss_.function(), optimizer_);
    return;
  }
  // several outputs: the one loss and the metrics for each (Keras)
  std::vector<OutputLoss> outputs;
  for (size_t i = 0; i < n_out; ++i) {
    std::vector<std::shared_ptr<Metric>> own;
    for (const auto& m : metrics_) own.push_back(std::shared_ptr<Metric>(m->clone()));
    outputs.push_back({"", loss_, 1.0, MetricList(std::move(own))});
  }
  set_heads(std::move(outputs));
}

Model::Model(Graph graph, std::vector<OutputLoss> outputs, const std::string& optimizer)
    : Model(graph, std::move(outputs), make_optimizer(optimizer, graph.parameters())) {}

Model::Model(Graph graph, std::vector<OutputLoss> outputs, std::shared_ptr<Optimizer> optimizer)
    : inference_(std::move(graph)), sparse_inputs_(sparse_inputs_of(inference_)), optimizer_(std::move(optimizer)) {
  if (!optimizer_) throw ValueError("Model: no optimizer given");
  inference_plan_ = std::make_shared<Plan>(inference_);
  set_heads(std::move(outputs));
}

void Model::set_heads(std::vector<OutputLoss> outputs) {
  const std::vector<nn::Layer>& outs = inference_.outputs();
  std::string names;
  for (const nn::Layer& o : outs) names += (names.empty() ? "" : ", ") + ("'" + o.name() + "'");
  const bool named = std::any_of(outputs.begin(), outputs.end(), [](const OutputLoss& o) { return !o.output.empty(); });
  std::vector<std::optional<OutputLoss>> at(outs.size());
  if (named) {
    for (OutputLoss& o : outputs) {
      if (o.output.empty())
        throw ValueError("Model: name every output's loss or none (one is unnamed; the outputs: " + names + ")");
      auto it = std::find_if(outs.begin(), outs.end(), [&](const nn::Layer& l) { return l.name() == o.output; });
      if (it == outs.end()) throw ValueError("Model: a loss for '" + o.output + "', which is not an output (the outputs: " + names + ")");
      auto& slot = at[static_cast<size_t>(it - outs.begin())];
      if (slot) throw ValueError("Model: two losses for the output '" + o.output + "'");
      slot = std::move(o);
    }
    for (size_t i = 0; i < at.size(); ++i)
      if (!at[i]) throw ValueError("Model: no loss for the output '" + outs[i].name() + "' (the outputs: " + names + ")");
  } else {
    if (outputs.size() != outs.size())
      throw ValueError("Model: " + std::to_string(outputs.size()) + " losses for a graph of " + std::to_string(outs.size()) +
                       " outputs (" + names + "); give one per output, in order, or by name");
    for (size_t i = 0; i < outputs.size(); ++i) at[i] = std::move(outputs[i]);
  }
  for (size_t i = 0; i < at.size(); ++i) {
    if (!at[i]->loss) throw ValueError("Model: no loss function given for the output '" + outs[i].name() + "'");
    if (!std::isfinite(at[i]->weight))
      throw ValueError("Model: the loss weight of the output '" + outs[i].name() + "' is not finite");
  }
  const size_t n_in = inference_.inputs().size();
  if (outs.size() == 1) {  // one output: the ordinary model, its loss weighted
    const double w = at[0]->weight;
    Loss l = at[0]->loss;
    loss_ = w == 1.0 ? l : Loss([l, w](const Tensor& p, const Tensor& t) { return l(p, t) * w; });
    metrics_ = at[0]->metrics.metrics();
    step_ = std::make_shared<TrainStep>(inference_plan_, n_in, loss_.function(), optimizer_);
    return;
  }
  for (size_t i = 0; i < at.size(); ++i) heads_.push_back({outs[i].name(), at[i]->loss, at[i]->weight, at[i]->metrics.metrics()});
  head_losses_ = std::make_shared<std::vector<Tensor>>(heads_.size());
  std::vector<std::pair<Loss, double>> terms;
  for (const Head& h : heads_) terms.emplace_back(h.loss, h.weight);
  MultiLossFn total = [terms, parts = head_losses_](const std::vector<Tensor>& preds, const std::vector<Tensor>& targets) {
    Tensor sum;
    for (size_t i = 0; i < terms.size(); ++i) {
      const Tensor l = terms[i].first(preds[i], targets[i]);
      (*parts)[i] = l;
      const Tensor term = terms[i].second == 1.0 ? l : l * terms[i].second;
      sum = sum.defined() ? sum + term : term;
    }
    return sum;
  };
  step_ = std::make_shared<TrainStep>(inference_plan_, n_in, heads_.size(), std::move(total), optimizer_);
}

Model Model::from_graphs(Graph inference, Graph training, std::optional<Graph> evaluation, std::shared_ptr<Optimizer> optimizer,
                         MetricList metrics) {
  if (!optimizer) throw ValueError("Model::from_graphs: no optimizer given");
  for (const Graph* g : {&inference, &training})
    if (g->outputs().size() != 1) throw ValueError("Model::from_graphs: each graph must have one output");
  if (training.inputs().size() <= inference.inputs().size())
    throw ValueError("Model::from_graphs: the training graph takes the inference inputs and then the targets (" +
                     std::to_string(training.inputs().size()) + " inputs for " + std::to_string(inference.inputs().size()) +
                     " inference inputs)");
  Model m;
  m.inference_ = std::move(inference);
  m.sparse_inputs_ = sparse_inputs_of(m.inference_);
  m.training_ = std::move(training);
  m.evaluation_ = std::move(evaluation);
  m.optimizer_ = std::move(optimizer);
  m.metrics_ = metrics.metrics();
  m.inference_plan_ = std::make_shared<Plan>(m.inference_);
  m.training_plan_ = std::make_shared<Plan>(*m.training_);
  if (m.evaluation_) m.evaluation_plan_ = std::make_shared<Plan>(*m.evaluation_);
  m.step_ = std::make_shared<TrainStep>(m.training_plan_, m.training_->inputs().size(), nullptr, m.optimizer_);
  return m;
}

data::Batch Model::bind_sparse(const data::Batch& batch) const {
  if (sparse_inputs_.empty()) return batch;
  const size_t n_in = inference_.inputs().size();
  if (batch.size() < n_in + sparse_inputs_.size())
    throw ValueError("Model: a batch has " + std::to_string(batch.size()) + " fields; the model needs " + std::to_string(n_in) +
                     " dense input(s), then " + std::to_string(sparse_inputs_.size()) + " for its SparseInput(s), then the target(s)");
  for (size_t i = 0; i < sparse_inputs_.size(); ++i) nn::SparseInput(sparse_inputs_[i].impl()).set_value(batch[n_in + i]);
  data::Batch rest(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(n_in));
  rest.insert(rest.end(), batch.begin() + static_cast<std::ptrdiff_t>(n_in + sparse_inputs_.size()), batch.end());
  return rest;
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

// The number of samples (rows) in fit / evaluate / predict's tensors: one per graph input, all
// with the same number of rows.
int64_t rows_of(const std::vector<Tensor>& xs, size_t n_inputs, const char* op) {
  if (xs.size() != n_inputs)
    throw ValueError(std::string(op) + ": got " + std::to_string(xs.size()) + " input tensor(s) for a graph of " +
                     std::to_string(n_inputs) + " input(s); pass one per input, in the graph's input order");
  int64_t n = -1;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].defined() || xs[i].ndim() == 0)
      throw ShapeError(std::string(op) + ": input " + std::to_string(i) + " must have a first axis of samples, got " +
                       (xs[i].defined() ? "a 0-d tensor" : "an undefined tensor"));
    if (n >= 0 && xs[i].dim(0) != n)
      throw ShapeError(std::string(op) + ": input " + std::to_string(i) + " has " + std::to_string(xs[i].dim(0)) +
                       " rows, input 0 has " + std::to_string(n) + " (every input holds one row per sample)");
    n = xs[i].dim(0);
  }
  return n;
}

}  // namespace

History Model::fit(const Tensor& x, const Tensor& y, const FitOptions& options) {
  return fit(std::vector<Tensor>{x}, y, options);
}

History Model::fit(const std::vector<Tensor>& xs, const Tensor& y, const FitOptions& o) {
  return fit(xs, std::vector<Tensor>{y}, o);
}

namespace {

// The targets of fit / evaluate on tensors: one per graph output, one row per sample.
void check_targets(const std::vector<Tensor>& ys, size_t n_outputs, int64_t n, const char* op) {
  if (ys.size() != n_outputs)
    throw ValueError(std::string(op) + ": got " + std::to_string(ys.size()) + " target tensor(s) for a graph of " +
                     std::to_string(n_outputs) + " output(s); pass one per output, in the graph's output order");
  for (const Tensor& y : ys)
    if (!y.defined() || y.ndim() == 0 || y.dim(0) != n)
      throw ShapeError(std::string(op) + ": the targets must have one row per sample (" + std::to_string(n) + "), got " +
                       (y.defined() ? shape_str(y.shape()) : std::string("an undefined tensor")));
}

}  // namespace

History Model::fit(const std::vector<Tensor>& xs, const std::vector<Tensor>& ys, const FitOptions& o) {
  const int64_t n = rows_of(xs, n_input_fields(), "Model::fit");
  check_targets(ys, inference_.outputs().size(), n, "Model::fit");
  if (!(o.validation_split >= 0 && o.validation_split < 1))
    throw ValueError("Model::fit: validation_split must be in [0, 1), got " + std::to_string(o.validation_split));
  if (o.validation_split > 0 && o.validation)
    throw ValueError("Model::fit: give validation_split or a validation loader, not both");
  if (o.batch_size <= 0) throw ValueError("Model::fit: batch_size must be positive, got " + std::to_string(o.batch_size));
  // Keras: the last validation_split of the samples, before any shuffling
  const int64_t split = o.validation_split > 0 ? static_cast<int64_t>(static_cast<double>(n) * (1.0 - o.validation_split)) : n;
  if (split <= 0 || (o.validation_split > 0 && split >= n))
    throw ValueError("Model::fit: validation_split " + std::to_string(o.validation_split) + " of " + std::to_string(n) +
                     " samples leaves " + (split <= 0 ? "no training" : "no validation") + " samples");
  auto part = [&](int64_t begin, int64_t end) {
    std::vector<Tensor> fields;
    for (const Tensor& x : xs) fields.push_back(slice(x, 0, begin, end));
    for (const Tensor& y : ys) fields.push_back(slice(y, 0, begin, end));
    return std::make_shared<data::TensorDataset>(std::move(fields));
  };
  data::LoaderOptions lo;
  lo.batch_size = o.batch_size;
  data::LoaderOptions shuffled = lo;
  shuffled.shuffle = o.shuffle;
  shuffled.seed = o.seed;
  data::DataLoader train(part(0, split), shuffled);
  std::optional<data::DataLoader> val;
  FitOptions with = o;
  if (split < n) {
    val.emplace(part(split, n), lo);
    with.validation = &*val;
  }
  return fit(train, with);
}

Logs Model::evaluate(const Tensor& x, const Tensor& y, int64_t batch_size) { return evaluate(std::vector<Tensor>{x}, y, batch_size); }

Logs Model::evaluate(const std::vector<Tensor>& xs, const Tensor& y, int64_t batch_size) {
  return evaluate(xs, std::vector<Tensor>{y}, batch_size);
}

Logs Model::evaluate(const std::vector<Tensor>& xs, const std::vector<Tensor>& ys, int64_t batch_size) {
  const int64_t n = rows_of(xs, n_input_fields(), "Model::evaluate");
  check_targets(ys, inference_.outputs().size(), n, "Model::evaluate");
  if (batch_size <= 0) throw ValueError("Model::evaluate: batch_size must be positive, got " + std::to_string(batch_size));
  std::vector<Tensor> fields = xs;
  fields.insert(fields.end(), ys.begin(), ys.end());
  data::LoaderOptions lo;
  lo.batch_size = batch_size;
  data::DataLoader loader(std::make_shared<data::TensorDataset>(std::move(fields)), lo);
  return evaluate(loader);
}

Logs Model::evaluate(data::DataLoader& loader) {
  nn::ModeScope mode(nn::Mode::Eval);
  NoGrad off;
  const size_t n_in = inference_.inputs().size();
  if (!heads_.empty()) {  // several outputs: the weighted total, then each output's loss and metrics
    std::vector<std::vector<std::unique_ptr<Metric>>> ms(heads_.size());
    for (size_t i = 0; i < heads_.size(); ++i)
      for (auto& m : heads_[i].metrics) ms[i].push_back(m->clone());
    std::vector<double> sums(heads_.size(), 0.0);
    double total = 0;
    int64_t seen = 0;
    loader.set_position({loader.position().epoch, 0});
    while (auto raw = loader.next()) {
      const std::optional<data::Batch> batch = bind_sparse(*raw);
      if (batch->size() < n_in + heads_.size())
        throw ValueError("Model::evaluate: a batch has " + std::to_string(batch->size()) + " fields; the model needs " +
                         std::to_string(n_in) + " input(s) and then " + std::to_string(heads_.size()) + " targets, one per output");
      const std::vector<Tensor> outs =
          inference_plan_->run(std::vector<Tensor>(batch->begin(), batch->begin() + static_cast<std::ptrdiff_t>(n_in)));
      const int64_t n = (*batch)[0].ndim() ? (*batch)[0].dim(0) : 1;
      for (size_t i = 0; i < heads_.size(); ++i) {
        const double l = heads_[i].loss(outs[i], (*batch)[n_in + i]).item<double>();
        sums[i] += l * static_cast<double>(n);
        total += heads_[i].weight * l * static_cast<double>(n);
        for (auto& m : ms[i]) m->update(outs[i], (*batch)[n_in + i]);
      }
      seen += n;
    }
    const double d = seen ? static_cast<double>(seen) : 1.0;
    Logs logs{{"loss", total / d}};
    for (size_t i = 0; i < heads_.size(); ++i) {
      logs[heads_[i].name + "_loss"] = sums[i] / d;
      for (auto& m : ms[i]) logs[heads_[i].name + "_" + m->name()] = m->result();
    }
    return logs;
  }
  std::vector<std::unique_ptr<Metric>> ms;
  for (auto& m : metrics_) ms.push_back(m->clone());
  loader.set_position({loader.position().epoch, 0});
  double loss_sum = 0;
  int64_t seen = 0;
  while (auto raw = loader.next()) {
    const std::optional<data::Batch> batch = bind_sparse(*raw);
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
  if (n_input_fields() != 1)
    throw ValueError("Model::predict: the graph has " + std::to_string(n_input_fields()) +
                     " inputs; pass one tensor per input, in the graph's input order: predict({x1, x2, ...})");
  return predict(std::vector<Tensor>{x}, batch_size);
}

Tensor Model::predict(const std::vector<Tensor>& xs, int64_t batch_size) {
  if (inference_.outputs().size() != 1)
    throw ValueError("Model::predict: the graph has " + std::to_string(inference_.outputs().size()) +
                     " outputs; predict_all returns each of them");
  return predict_all(xs, batch_size)[0];
}

std::vector<Tensor> Model::predict_all(const std::vector<Tensor>& xs, int64_t batch_size) {
  if (batch_size <= 0) throw ValueError("Model::predict: batch_size must be positive, got " + std::to_string(batch_size));
  const int64_t n = rows_of(xs, n_input_fields(), "Model::predict");
  if (n == 0) throw ValueError("Model::predict: the input has no rows");
  nn::ModeScope mode(nn::Mode::Eval);
  NoGrad off;
  std::vector<std::vector<Tensor>> parts(inference_.outputs().size());
  for (int64_t b = 0; b < n; b += batch_size) {
    std::vector<Tensor> part;
    for (const Tensor& x : xs) part.push_back(slice(x, 0, b, std::min(n, b + batch_size)));
    std::vector<Tensor> outs = inference_plan_->run(bind_sparse(part));
    for (size_t k = 0; k < outs.size(); ++k) parts[k].push_back(std::move(outs[k]));
  }
  std::vector<Tensor> result;
  for (auto& p : parts) result.push_back(p.size() == 1 ? p[0] : concatenate(p, 0));
  return result;
}

Model Model::load(const std::string& path, Loss loss,
                  const std::function<std::shared_ptr<Optimizer>(const std::vector<Tensor>& params)>& make_optimizer,
                  MetricList metrics) {
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
  for (const Head& h : heads_)
    for (const auto& m : h.metrics) names += (names.empty() ? "" : ", ") + h.name + "_" + m->name();
  return s + "Metrics: " + (names.empty() ? "(none)" : names) + "\n";
}

}  // namespace loom::train
