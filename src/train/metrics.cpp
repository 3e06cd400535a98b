// Evaluation metrics: exact integer counts on the CPU, sums in double.
#include "loom/train/metrics.h"

#include <string>
#include <vector>

#include "loom/autograd/autograd.h"
#include "loom/core/describe.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"

namespace loom::train {

namespace {

void check_defined(const Tensor& pred, const Tensor& target, const char* op) {
  if (!pred.defined() || !target.defined()) throw ValueError(std::string(op) + ": pred and target must be defined");
}

// A contiguous CPU int64 copy (or the tensor itself when it already is one).
Tensor cpu_int64(const Tensor& t) { return t.to(Device::cpu()).astype(DType::Int64).contiguous(); }

Tensor target_classes(const Tensor& target, const char* op) {
  if (is_floating(target.dtype())) {
    if (target.numel() > 0 && any(target != floor(target)).item<bool>())
      throw ValueError(std::string(op) + ": a floating target must hold integral class ids, got " + describe(target));
  } else if (!is_integral(target.dtype()) && target.dtype() != DType::Bool) {
    throw DTypeError(std::string(op) + ": target must hold class ids, got " + describe(target));
  }
  return cpu_int64(target);
}

// Adds the confusion counts of (pred, target) into the contiguous int64 (C, C) `counts`.
void add_confusion(Tensor& counts, const Tensor& pred, const Tensor& target, int64_t C, double threshold,
                   const char* op) {
  NoGrad off;
  Tensor p = cpu_int64(predicted_classes(pred, target, threshold));
  Tensor t = target_classes(target, op);
  const int64_t* pp = p.data<int64_t>();
  const int64_t* tp = t.data<int64_t>();
  int64_t* c = counts.data<int64_t>();
  for (int64_t i = 0; i < p.numel(); ++i) {
    if (tp[i] < 0 || tp[i] >= C || pp[i] < 0 || pp[i] >= C)
      throw IndexError(std::string(op) + ": class id " + std::to_string(tp[i] < 0 || tp[i] >= C ? tp[i] : pp[i]) +
                       (tp[i] < 0 || tp[i] >= C ? " (target)" : " (prediction)") + " is out of range for " +
                       std::to_string(C) + " classes (valid: 0 to " + std::to_string(C - 1) + ")");
    ++c[tp[i] * C + pp[i]];
  }
}

struct Counts {
  std::vector<double> tp, predicted, actual;  // per class
};

Counts counts_of(const Tensor& confusion, const char* op) {
  if (!confusion.defined() || confusion.ndim() != 2 || confusion.dim(0) != confusion.dim(1))
    throw ShapeError(std::string(op) + ": expected a square (C, C) confusion matrix, got " +
                     (confusion.defined() ? describe(confusion) : std::string("undefined")));
  const int64_t C = confusion.dim(0);
  Tensor m = cpu_int64(confusion);
  const int64_t* d = m.data<int64_t>();
  Counts r{std::vector<double>(C), std::vector<double>(C), std::vector<double>(C)};
  for (int64_t i = 0; i < C; ++i)
    for (int64_t j = 0; j < C; ++j) {
      const double v = static_cast<double>(d[i * C + j]);
      r.actual[i] += v;
      r.predicted[j] += v;
      if (i == j) r.tp[i] += v;
    }
  return r;
}

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

enum class Score { Precision, Recall, F1 };

double score_of(const Tensor& confusion, Average average, int64_t positive, Score which, const char* op) {
  Counts c = counts_of(confusion, op);
  const int64_t C = static_cast<int64_t>(c.tp.size());
  auto per_class = [&](double tp, double predicted, double actual) {
    switch (which) {
      case Score::Precision: return ratio(tp, predicted);
      case Score::Recall: return ratio(tp, actual);
      case Score::F1: return ratio(2 * tp, predicted + actual);
    }
    return 0.0;
  };
  switch (average) {
    case Average::Binary:
      if (positive < 0 || positive >= C)
        throw IndexError(std::string(op) + ": positive class " + std::to_string(positive) + " is out of range for " +
                         std::to_string(C) + " classes");
      return per_class(c.tp[positive], c.predicted[positive], c.actual[positive]);
    case Average::Micro: {
      double tp = 0, predicted = 0, actual = 0;
      for (int64_t k = 0; k < C; ++k) tp += c.tp[k], predicted += c.predicted[k], actual += c.actual[k];
      return per_class(tp, predicted, actual);
    }
    case Average::Macro: {
      // over the classes present in the targets or the predictions (scikit-learn's labels=None)
      double s = 0;
      int64_t n = 0;
      for (int64_t k = 0; k < C; ++k) {
        if (c.predicted[k] + c.actual[k] == 0) continue;
        s += per_class(c.tp[k], c.predicted[k], c.actual[k]);
        ++n;
      }
      return n ? s / static_cast<double>(n) : 0.0;
    }
  }
  return 0.0;
}

// Sum of f(pred - target) in double and the number of (broadcast) elements.
std::pair<double, int64_t> error_sum(const Tensor& pred, const Tensor& target, bool squared, const char* op) {
  check_defined(pred, target, op);
  NoGrad off;
  Tensor d = pred.detach().astype(DType::Float64) - target.detach().astype(DType::Float64);
  d = squared ? square(d) : abs(d);
  return {d.numel() ? sum(d).item<double>() : 0.0, d.numel()};
}

}  // namespace

Tensor predicted_classes(const Tensor& pred, const Tensor& target, double threshold) {
  check_defined(pred, target, "predicted_classes");
  NoGrad off;
  Tensor p = pred.detach();
  if (is_floating(p.dtype())) {
    if (p.ndim() == target.ndim() + 1) {
      Tensor ids = argmax(p, p.ndim() == 1 ? 0 : 1);
      if (ids.shape() != target.shape())
        throw ShapeError("predicted_classes: scores " + describe(pred) + " (classes on axis 1) do not match target " +
                         describe(target));
      return ids;
    }
    if (p.shape() == target.shape()) return (p >= threshold).astype(DType::Int64);
  } else if (p.shape() == target.shape()) {
    return p.astype(DType::Int64);
  }
  throw ShapeError("predicted_classes: pred " + describe(pred) + " does not fit target " + describe(target) +
                   " (expected class ids of the target's shape, floating scores with one more axis (classes on axis "
                   "1), or floating binary scores of the target's shape)");
}

double accuracy(const Tensor& pred, const Tensor& target) { return accuracy(pred, target, 0.5); }

double accuracy(const Tensor& pred, const Tensor& target, double threshold) {
  Accuracy m(threshold);
  m.update(pred, target);
  return m.result();
}

double top_k_accuracy(const Tensor& scores, const Tensor& target, int64_t k) {
  TopKAccuracy m(k);
  m.update(scores, target);
  return m.result();
}

Tensor confusion_matrix(const Tensor& pred, const Tensor& target, int64_t num_classes, double threshold) {
  ConfusionMatrix m(num_classes, threshold);
  m.update(pred, target);
  return m.matrix();
}

double precision(const Tensor& confusion, Average average, int64_t positive) {
  return score_of(confusion, average, positive, Score::Precision, "precision");
}
double recall(const Tensor& confusion, Average average, int64_t positive) {
  return score_of(confusion, average, positive, Score::Recall, "recall");
}
double f1_score(const Tensor& confusion, Average average, int64_t positive) {
  return score_of(confusion, average, positive, Score::F1, "f1_score");
}
double precision(const Tensor& pred, const Tensor& target, int64_t num_classes, Average average, int64_t positive,
                 double threshold) {
  return precision(confusion_matrix(pred, target, num_classes, threshold), average, positive);
}
double recall(const Tensor& pred, const Tensor& target, int64_t num_classes, Average average, int64_t positive,
              double threshold) {
  return recall(confusion_matrix(pred, target, num_classes, threshold), average, positive);
}
double f1_score(const Tensor& pred, const Tensor& target, int64_t num_classes, Average average, int64_t positive,
                double threshold) {
  return f1_score(confusion_matrix(pred, target, num_classes, threshold), average, positive);
}

double mean_squared_error(const Tensor& pred, const Tensor& target) {
  auto [s, n] = error_sum(pred, target, true, "mean_squared_error");
  return n ? s / static_cast<double>(n) : 0.0;
}
double mean_absolute_error(const Tensor& pred, const Tensor& target) {
  auto [s, n] = error_sum(pred, target, false, "mean_absolute_error");
  return n ? s / static_cast<double>(n) : 0.0;
}

// ---------------------------------------------------------------- streaming

void Accuracy::update(const Tensor& pred, const Tensor& target) {
  check_defined(pred, target, "accuracy");
  NoGrad off;
  Tensor p = cpu_int64(predicted_classes(pred, target, threshold_));
  Tensor t = target_classes(target, "accuracy");
  const int64_t* pp = p.data<int64_t>();
  const int64_t* tp = t.data<int64_t>();
  for (int64_t i = 0; i < p.numel(); ++i) correct_ += pp[i] == tp[i];
  total_ += p.numel();
}

void TopKAccuracy::update(const Tensor& scores, const Tensor& target) {
  check_defined(scores, target, "top_k_accuracy");
  if (k_ < 1) throw ValueError("top_k_accuracy: k must be >= 1, got " + std::to_string(k_));
  if (!is_floating(scores.dtype()) || scores.ndim() != target.ndim() + 1 || scores.ndim() < 1)
    throw ShapeError("top_k_accuracy: expected floating scores (N, C, ...) with one more axis than target, got scores " +
                     describe(scores) + " and target " + describe(target));
  NoGrad off;
  const int64_t axis = scores.ndim() == 1 ? 0 : 1;
  Tensor s = moveaxis(scores.detach(), axis, -1).to(Device::cpu()).astype(DType::Float64).contiguous();
  Tensor t = target_classes(target, "top_k_accuracy");
  const int64_t C = s.dim(-1), rows = t.numel();
  Shape expect = s.shape();
  expect.pop_back();
  if (expect != t.shape())
    throw ShapeError("top_k_accuracy: scores " + describe(scores) + " do not match target " + describe(target));
  const double* sd = s.data<double>();
  const int64_t* td = t.data<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t c = td[r];
    if (c < 0 || c >= C)
      throw IndexError("top_k_accuracy: target " + std::to_string(c) + " is out of range for " + std::to_string(C) +
                       " classes");
    const double* row = sd + r * C;
    int64_t rank = 0;  // classes ranked above the target (higher score, or equal with a lower id)
    for (int64_t j = 0; j < C; ++j) rank += row[j] > row[c] || (row[j] == row[c] && j < c);
    correct_ += rank < k_;
  }
  total_ += rows;
}

ConfusionMatrix::ConfusionMatrix(int64_t num_classes, double threshold)
    : num_classes_(num_classes), threshold_(threshold) {
  if (num_classes < 1) throw ValueError("ConfusionMatrix: num_classes must be >= 1, got " + std::to_string(num_classes));
  reset();
}

void ConfusionMatrix::reset() { counts_ = zeros({num_classes_, num_classes_}, DType::Int64, Device::cpu()); }

void ConfusionMatrix::update(const Tensor& pred, const Tensor& target) {
  check_defined(pred, target, name().c_str());
  add_confusion(counts_, pred, target, num_classes_, threshold_, name().c_str());
}

double ConfusionMatrix::result() const {
  Counts c = counts_of(counts_, "confusion_matrix");
  double tp = 0, total = 0;
  for (size_t k = 0; k < c.tp.size(); ++k) tp += c.tp[k], total += c.actual[k];
  return ratio(tp, total);
}

void MeanSquaredError::update(const Tensor& pred, const Tensor& target) {
  auto [s, n] = error_sum(pred, target, true, "mean_squared_error");
  sum_ += s;
  count_ += n;
}

void MeanAbsoluteError::update(const Tensor& pred, const Tensor& target) {
  auto [s, n] = error_sum(pred, target, false, "mean_absolute_error");
  sum_ += s;
  count_ += n;
}

void Mean::update(const Tensor& value, const Tensor& target) {
  if (!value.defined()) throw ValueError("Mean: value must be defined");
  NoGrad off;
  const int64_t n = target.defined() && target.ndim() > 0 ? target.dim(0) : 1;
  const double v = value.numel() == 1 ? value.detach().astype(DType::Float64).item<double>()
                                      : mean(value.detach().astype(DType::Float64)).item<double>();
  add(v, n);
}

}  // namespace loom::train
