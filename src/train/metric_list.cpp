// Metrics by Keras' names or as plain functions (issue 36).
#include "loom/train/metric_list.h"

#include <utility>

#include "loom/core/grad_mode.h"

namespace loom::train {

namespace {

using Make = std::function<std::shared_ptr<Metric>()>;

const std::vector<std::pair<std::string, Make>>& table() {
  static const std::vector<std::pair<std::string, Make>> t = {
      {"accuracy", [] { return std::make_shared<Accuracy>(); }},
      {"acc", [] { return std::make_shared<Accuracy>(); }},
      {"sparse_categorical_accuracy", [] { return std::make_shared<Accuracy>(); }},
      {"binary_accuracy", [] { return std::make_shared<Accuracy>(0.5); }},
      {"sparse_top_k_categorical_accuracy", [] { return std::make_shared<TopKAccuracy>(5); }},
      {"mse", [] { return std::make_shared<MeanSquaredError>(); }},
      {"mean_squared_error", [] { return std::make_shared<MeanSquaredError>(); }},
      {"mae", [] { return std::make_shared<MeanAbsoluteError>(); }},
      {"mean_absolute_error", [] { return std::make_shared<MeanAbsoluteError>(); }},
      {"precision", [] { return std::make_shared<Precision>(); }},
      {"recall", [] { return std::make_shared<Recall>(); }},
      {"f1_score", [] { return std::make_shared<F1Score>(); }},
  };
  return t;
}

}  // namespace

FunctionMetric::FunctionMetric(std::string name, MetricFn fn) : name_(std::move(name)), fn_(std::move(fn)) {
  if (name_.empty()) throw ValueError("FunctionMetric: a metric needs a name (its History key)");
  if (!fn_) throw ValueError("FunctionMetric '" + name_ + "': no function given");
}

void FunctionMetric::update(const Tensor& pred, const Tensor& target) {
  NoGrad off;
  const int64_t n = target.defined() && target.ndim() > 0 ? target.dim(0) : 1;
  sum_ += fn_(pred, target) * static_cast<double>(n);
  count_ += n;
}

MetricSpec::MetricSpec(const char* name) : MetricSpec(std::string(name ? name : "")) {}

MetricSpec::MetricSpec(const std::string& name) {
  for (const auto& [n, make] : table())
    if (n == name) {
      metric_ = make();
      return;
    }
  std::string valid;
  for (const std::string& n : valid_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw ValueError("train::MetricSpec: unknown metric '" + name + "' (valid: " + valid +
                   ", a Metric object, or {\"name\", function of (prediction, target)})");
}

MetricSpec::MetricSpec(double (*fn)(const Tensor&, const Tensor&)) {
  using F = double (*)(const Tensor&, const Tensor&);
  if (fn == static_cast<F>(&accuracy)) metric_ = std::make_shared<Accuracy>();
  else if (fn == static_cast<F>(&mean_squared_error)) metric_ = std::make_shared<MeanSquaredError>();
  else if (fn == static_cast<F>(&mean_absolute_error)) metric_ = std::make_shared<MeanAbsoluteError>();
  else
    throw ValueError("train::MetricSpec: a function metric needs a name, its History key: {\"name\", function} "
                     "(accuracy, mean_squared_error and mean_absolute_error are known by theirs)");
}

MetricSpec::MetricSpec(std::string name, MetricFn fn) : metric_(std::make_shared<FunctionMetric>(std::move(name), std::move(fn))) {}

std::vector<std::string> MetricSpec::valid_names() {
  std::vector<std::string> names;
  for (const auto& [n, make] : table()) names.push_back(n);
  return names;
}

MetricList::MetricList(std::initializer_list<MetricSpec> specs) {
  for (const MetricSpec& s : specs) metrics_.push_back(s.metric());
}

MetricList::MetricList(std::vector<std::shared_ptr<Metric>> metrics) : metrics_(std::move(metrics)) {
  for (const auto& m : metrics_)
    if (!m) throw ValueError("train::MetricList: a null metric");
}

MetricList::MetricList(const std::vector<MetricSpec>& specs) {
  for (const MetricSpec& s : specs) metrics_.push_back(s.metric());
}

}  // namespace loom::train
