#pragma once
// What train::Model takes as its metrics: streaming Metric objects, Keras' names ("accuracy",
// "mse", ...), or plain functions of (prediction, target) -> double, mixed in one list:
//
//   train::Model m(graph, train::cross_entropy, "adam", {"accuracy", std::make_shared<train::TopKAccuracy>(3),
//                                                         {"mean_logit", [](const Tensor& y, const Tensor&) { ... }}});
//
// A function's value per batch is averaged over the epoch weighted by the batch size (Keras'
// MeanMetricWrapper); the functions of metrics.h by name become their streaming classes, whose
// results equal the function over the whole epoch.
#include <concepts>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/error.h"
#include "loom/core/tensor.h"
#include "loom/train/metrics.h"

namespace loom::train {

using MetricFn = std::function<double(const Tensor& prediction, const Tensor& target)>;

// A Metric of a function's per-batch values: their mean weighted by the batch size (dim 0 of
// the target, 1 for a 0-d target).
class LOOM_API FunctionMetric : public Metric {
 public:
  FunctionMetric(std::string name, MetricFn fn);
  std::string name() const override { return name_; }
  void reset() override { sum_ = 0, count_ = 0; }
  void update(const Tensor& pred, const Tensor& target) override;
  double result() const override { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<FunctionMetric>(name_, fn_); }

 private:
  std::string name_;
  MetricFn fn_;
  double sum_ = 0;
  int64_t count_ = 0;
};

class LOOM_API MetricSpec {
 public:
  template <class M>
    requires std::derived_from<M, Metric>
  MetricSpec(std::shared_ptr<M> metric) : metric_(std::move(metric)) {  // NOLINT
    if (!metric_) throw ValueError("train::MetricSpec: a null metric");
  }
  // Keras' names (valid_names()); anything else throws ValueError listing them.
  MetricSpec(const char* name);         // NOLINT
  MetricSpec(const std::string& name);  // NOLINT
  // accuracy, mean_squared_error, mean_absolute_error (metrics.h) become their streaming
  // classes; another function needs a name: {"name", function}.
  MetricSpec(double (*fn)(const Tensor&, const Tensor&));  // NOLINT
  MetricSpec(std::string name, MetricFn fn);

  const std::shared_ptr<Metric>& metric() const { return metric_; }
  // accuracy / acc / sparse_categorical_accuracy / binary_accuracy (Accuracy; binary at 0.5),
  // sparse_top_k_categorical_accuracy (TopKAccuracy(5)), mse / mean_squared_error, mae /
  // mean_absolute_error, precision, recall, f1_score (binary).
  static std::vector<std::string> valid_names();

 private:
  std::shared_ptr<Metric> metric_;
};

// The metrics argument of train::Model: a braced list of MetricSpecs, or a vector of Metrics.
class LOOM_API MetricList {
 public:
  MetricList() = default;
  MetricList(std::initializer_list<MetricSpec> specs);                  // NOLINT
  MetricList(std::vector<std::shared_ptr<Metric>> metrics);             // NOLINT
  MetricList(const std::vector<MetricSpec>& specs);                     // NOLINT
  const std::vector<std::shared_ptr<Metric>>& metrics() const { return metrics_; }

 private:
  std::vector<std::shared_ptr<Metric>> metrics_;
};

}  // namespace loom::train
