#pragma once
// Evaluation metrics (not differentiable; computed without recording gradients, in double).
//
// Predictions are read as class ids the same way everywhere:
//   - an integer / bool `pred` of the target's shape holds class ids;
//   - a floating `pred` with one more axis than the target holds scores (logits or
//     probabilities) with the classes on axis 1 ((N, C) or (N, C, d1, ...)) — argmax is taken;
//   - a floating `pred` of the target's shape is a binary score: class 1 where pred >= threshold
//     (0.5 for probabilities; pass 0 for logits).
// Targets hold integer class ids (floating targets must hold integral values).
//
// A streaming Metric (reset / update per batch / result) accumulates exact counts or double
// sums, so the result over an epoch equals the function applied to the concatenated batches.
#include <cstdint>
#include <memory>
#include <string>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom::train {

// How precision / recall / F1 combine classes: Binary reports the positive class only; Macro is
// the unweighted mean over classes; Micro pools the counts of all classes (equals accuracy for
// single-label data). A class with no predicted (or no true) samples scores 0 (scikit-learn's
// zero_division=0).
enum class Average { Binary, Macro, Micro };

// Class ids predicted by `pred` for `target` (the rules above), as int64 of the target's shape.
LOOM_API Tensor predicted_classes(const Tensor& pred, const Tensor& target, double threshold = 0.5);

// Fraction of samples whose predicted class equals the target.
// (Two overloads rather than a default: `accuracy` names a function of (pred, target).)
LOOM_API double accuracy(const Tensor& pred, const Tensor& target);
LOOM_API double accuracy(const Tensor& pred, const Tensor& target, double threshold);
// Fraction of samples whose target is among the k highest scores (scores (N, C, ...)); ties
// are broken towards the lower class id (as argmax).
LOOM_API double top_k_accuracy(const Tensor& scores, const Tensor& target, int64_t k);
// Counts (C, C) int64: row = true class, column = predicted class (scikit-learn's layout).
// Class ids outside [0, num_classes) throw IndexError.
LOOM_API Tensor confusion_matrix(const Tensor& pred, const Tensor& target, int64_t num_classes, double threshold = 0.5);
LOOM_API double precision(const Tensor& pred, const Tensor& target, int64_t num_classes = 2, Average average = Average::Binary,
                 int64_t positive = 1, double threshold = 0.5);
LOOM_API double recall(const Tensor& pred, const Tensor& target, int64_t num_classes = 2, Average average = Average::Binary,
              int64_t positive = 1, double threshold = 0.5);
LOOM_API double f1_score(const Tensor& pred, const Tensor& target, int64_t num_classes = 2, Average average = Average::Binary,
                int64_t positive = 1, double threshold = 0.5);
// From a confusion matrix (rows true, columns predicted).
LOOM_API double precision(const Tensor& confusion, Average average, int64_t positive = 1);
LOOM_API double recall(const Tensor& confusion, Average average, int64_t positive = 1);
LOOM_API double f1_score(const Tensor& confusion, Average average, int64_t positive = 1);
// Mean of (pred - target)^2 / |pred - target| over all elements (the operands broadcast).
LOOM_API double mean_squared_error(const Tensor& pred, const Tensor& target);
LOOM_API double mean_absolute_error(const Tensor& pred, const Tensor& target);

// ---------------------------------------------------------------- streaming metrics
class LOOM_API Metric {
 public:
  virtual ~Metric() = default;
  virtual std::string name() const = 0;
  virtual void reset() = 0;
  // Adds one batch.
  virtual void update(const Tensor& pred, const Tensor& target) = 0;
  // The value over every batch since reset (0 before any sample).
  virtual double result() const = 0;
  virtual std::unique_ptr<Metric> clone() const = 0;  // a fresh copy with the same settings
};

class LOOM_API Accuracy : public Metric {
 public:
  explicit Accuracy(double threshold = 0.5) : threshold_(threshold) {}
  std::string name() const override { return "accuracy"; }
  void reset() override { correct_ = total_ = 0; }
  void update(const Tensor& pred, const Tensor& target) override;
  double result() const override { return total_ ? static_cast<double>(correct_) / static_cast<double>(total_) : 0.0; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<Accuracy>(threshold_); }
  int64_t correct() const { return correct_; }
  int64_t total() const { return total_; }

 private:
  double threshold_;
  int64_t correct_ = 0, total_ = 0;
};

class LOOM_API TopKAccuracy : public Metric {
 public:
  explicit TopKAccuracy(int64_t k) : k_(k) {}
  std::string name() const override { return "top" + std::to_string(k_) + "_accuracy"; }
  void reset() override { correct_ = total_ = 0; }
  void update(const Tensor& scores, const Tensor& target) override;
  double result() const override { return total_ ? static_cast<double>(correct_) / static_cast<double>(total_) : 0.0; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<TopKAccuracy>(k_); }

 private:
  int64_t k_;
  int64_t correct_ = 0, total_ = 0;
};

// Accumulates a (C, C) confusion matrix; result() is the accuracy (trace / total).
class LOOM_API ConfusionMatrix : public Metric {
 public:
  explicit ConfusionMatrix(int64_t num_classes, double threshold = 0.5);
  std::string name() const override { return "confusion_matrix"; }
  void reset() override;
  void update(const Tensor& pred, const Tensor& target) override;
  double result() const override;
  std::unique_ptr<Metric> clone() const override { return std::make_unique<ConfusionMatrix>(num_classes_, threshold_); }
  const Tensor& matrix() const { return counts_; }  // int64 (C, C)
  int64_t num_classes() const { return num_classes_; }

 protected:
  int64_t num_classes_;
  double threshold_;
  Tensor counts_;
};

// Precision, recall or F1 over the running confusion matrix (the free functions above).
class LOOM_API ConfusionScore : public ConfusionMatrix {
 public:
  enum class Kind : uint8_t { Precision, Recall, F1 };
  ConfusionScore(Kind kind, int64_t num_classes, Average average, int64_t positive, double threshold)
      : ConfusionMatrix(num_classes, threshold), kind_(kind), average_(average), positive_(positive) {}
  std::string name() const override {
    return kind_ == Kind::Precision ? "precision" : kind_ == Kind::Recall ? "recall" : "f1";
  }
  double result() const override {
    if (kind_ == Kind::Precision) return precision(counts_, average_, positive_);
    if (kind_ == Kind::Recall) return recall(counts_, average_, positive_);
    return f1_score(counts_, average_, positive_);
  }
  std::unique_ptr<Metric> clone() const override {
    return std::make_unique<ConfusionScore>(kind_, num_classes_, average_, positive_, threshold_);
  }

 private:
  Kind kind_;
  Average average_;
  int64_t positive_;
};

class LOOM_API Precision : public ConfusionScore {
 public:
  explicit Precision(int64_t num_classes = 2, Average average = Average::Binary, int64_t positive = 1, double threshold = 0.5)
      : ConfusionScore(Kind::Precision, num_classes, average, positive, threshold) {}
};

class LOOM_API Recall : public ConfusionScore {
 public:
  explicit Recall(int64_t num_classes = 2, Average average = Average::Binary, int64_t positive = 1, double threshold = 0.5)
      : ConfusionScore(Kind::Recall, num_classes, average, positive, threshold) {}
};

class LOOM_API F1Score : public ConfusionScore {
 public:
  explicit F1Score(int64_t num_classes = 2, Average average = Average::Binary, int64_t positive = 1, double threshold = 0.5)
      : ConfusionScore(Kind::F1, num_classes, average, positive, threshold) {}
};

class LOOM_API MeanSquaredError : public Metric {
 public:
  std::string name() const override { return "mse"; }
  void reset() override { sum_ = 0; count_ = 0; }
  void update(const Tensor& pred, const Tensor& target) override;
  double result() const override { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<MeanSquaredError>(); }

 private:
  double sum_ = 0;
  int64_t count_ = 0;
};

class LOOM_API MeanAbsoluteError : public Metric {
 public:
  std::string name() const override { return "mae"; }
  void reset() override { sum_ = 0; count_ = 0; }
  void update(const Tensor& pred, const Tensor& target) override;
  double result() const override { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<MeanAbsoluteError>(); }

 private:
  double sum_ = 0;
  int64_t count_ = 0;
};

// The running mean of a scalar per batch (e.g. the loss), weighted by the batch size:
// update(loss, target) adds loss * target.dim(0) (1 for a 0-d target); add(value, n) directly.
class LOOM_API Mean : public Metric {
 public:
  explicit Mean(std::string name = "loss") : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  void reset() override { sum_ = 0; count_ = 0; }
  void update(const Tensor& value, const Tensor& target) override;
  void add(double value, int64_t n = 1) { sum_ += value * static_cast<double>(n); count_ += n; }
  double result() const override { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<Mean>(name_); }

 private:
  std::string name_;
  double sum_ = 0;
  int64_t count_ = 0;
};

}  // namespace loom::train
