// Metrics against hand-computed values, and streaming metrics against the one-shot functions.
#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/index.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/train/metrics.h>

#include "unit/common/core_test_util.h"

using namespace loom;
namespace tr = loom::train;
using loom_test::contains_all;
using loom_test::error_message;

namespace {

// 3 classes, 8 samples.
//   target: 0 0 0 1 1 2 2 2
//   pred:   0 1 0 1 2 2 2 0
// confusion (rows true, cols pred): [[2,1,0],[0,1,1],[1,0,2]]
Tensor target3() { return tensor<int64_t>({0, 0, 0, 1, 1, 2, 2, 2}); }
Tensor pred3() { return tensor<int64_t>({0, 1, 0, 1, 2, 2, 2, 0}); }

// Logits whose argmax along axis 1 is pred3().
Tensor logits3() {
  Tensor ids = pred3();
  std::vector<float> v;
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t c = 0; c < 3; ++c) v.push_back(c == ids.at({i}) ? 2.0f : -0.5f * static_cast<float>(c));
  return from_vector(v, {8, 3});
}

}  // namespace

TEST(TrainMetrics, AccuracyFromIdsLogitsAndBinaryScores) {
  EXPECT_DOUBLE_EQ(tr::accuracy(pred3(), target3()), 5.0 / 8);
  EXPECT_DOUBLE_EQ(tr::accuracy(logits3(), target3()), 5.0 / 8);
  // binary probabilities (threshold 0.5) and logits (threshold 0)
  Tensor y = tensor<int64_t>({1, 0, 1, 1});
  EXPECT_DOUBLE_EQ(tr::accuracy(tensor<float>({0.9f, 0.2f, 0.4f, 0.5f}), y), 0.75);
  EXPECT_DOUBLE_EQ(tr::accuracy(tensor<float>({2.f, -1.f, -0.1f, 3.f}), y, 0.0), 0.75);
  // floating targets holding class ids
  EXPECT_DOUBLE_EQ(tr::accuracy(pred3(), target3().astype(Float32)), 5.0 / 8);
  // (N, C, d) scores: classes on axis 1
  Tensor s = zeros({2, 3, 2});
  s.index_put_({0, 2, 0}, 1.0);
  s.index_put_({0, 1, 1}, 1.0);
  s.index_put_({1, 0, 0}, 1.0);
  s.index_put_({1, 0, 1}, 1.0);
  EXPECT_DOUBLE_EQ(tr::accuracy(s, tensor<int64_t>({2, 1, 0, 2}).reshape({2, 2})), 0.75);
}

TEST(TrainMetrics, TopK) {
  Tensor scores = tensor<float>({0.1f, 0.5f, 0.3f, 0.1f,    // ranks: 1, 2, 0/3 tie
                                 0.4f, 0.3f, 0.2f, 0.1f,
                                 0.25f, 0.25f, 0.25f, 0.25f})
                      .reshape({3, 4});
  Tensor y = tensor<int64_t>({2, 3, 1});
  EXPECT_DOUBLE_EQ(tr::top_k_accuracy(scores, y, 1), 0.0);
  EXPECT_DOUBLE_EQ(tr::top_k_accuracy(scores, y, 2), 2.0 / 3);  // sample 0 (rank 1), sample 2 (tie, rank 1)
  EXPECT_DOUBLE_EQ(tr::top_k_accuracy(scores, y, 4), 1.0);
  EXPECT_DOUBLE_EQ(tr::top_k_accuracy(scores, tensor<int64_t>({1, 0, 0}), 1), 1.0);
}

TEST(TrainMetrics, ConfusionMatrixPrecisionRecallF1) {
  Tensor cm = tr::confusion_matrix(pred3(), target3(), 3);
  EXPECT_EQ(cm.dtype(), Int64);
  EXPECT_EQ(cm.shape(), (Shape{3, 3}));
  EXPECT_EQ(loom_test::values(cm), (std::vector<double>{2, 1, 0, 0, 1, 1, 1, 0, 2}));
  // per class: precision 2/3, 1/2, 2/3; recall 2/3, 1/2, 2/3; f1 the same
  using tr::Average;
  EXPECT_NEAR(tr::precision(pred3(), target3(), 3, Average::Macro), (2.0 / 3 + 0.5 + 2.0 / 3) / 3, 1e-15);
  EXPECT_NEAR(tr::recall(pred3(), target3(), 3, Average::Macro), (2.0 / 3 + 0.5 + 2.0 / 3) / 3, 1e-15);
  EXPECT_NEAR(tr::f1_score(logits3(), target3(), 3, Average::Macro), (2.0 / 3 + 0.5 + 2.0 / 3) / 3, 1e-15);
  EXPECT_NEAR(tr::precision(pred3(), target3(), 3, Average::Micro), 5.0 / 8, 1e-15);
  EXPECT_NEAR(tr::precision(pred3(), target3(), 3, Average::Binary, 2), 2.0 / 3, 1e-15);

  // binary: target 1 1 1 0 0 0, pred 1 0 1 1 0 0: tp 2, fp 1, fn 1
  Tensor y = tensor<int64_t>({1, 1, 1, 0, 0, 0});
  Tensor p = tensor<float>({0.8f, 0.3f, 0.6f, 0.7f, 0.1f, 0.2f});
  EXPECT_DOUBLE_EQ(tr::precision(p, y), 2.0 / 3);
  EXPECT_DOUBLE_EQ(tr::recall(p, y), 2.0 / 3);
  EXPECT_DOUBLE_EQ(tr::f1_score(p, y), 2.0 / 3);
  // recall 1, precision 3/5 -> f1 = 2 * 0.6 / 1.6 = 0.75
  Tensor p2 = tensor<int64_t>({1, 1, 1, 1, 1, 0});
  EXPECT_DOUBLE_EQ(tr::precision(p2, y), 0.6);
  EXPECT_DOUBLE_EQ(tr::recall(p2, y), 1.0);
  EXPECT_NEAR(tr::f1_score(p2, y), 0.75, 1e-15);
  // nothing predicted positive: precision 0 (zero_division = 0)
  EXPECT_EQ(tr::precision(zeros({6}, Int64), y), 0.0);
}

TEST(TrainMetrics, MacroSkipsClassesAbsentFromBothSides) {
  // class 2 of 3 never appears: macro over classes 0 and 1 (scikit-learn's labels=None)
  Tensor y = tensor<int64_t>({0, 1, 1, 0});
  Tensor p = tensor<int64_t>({0, 1, 0, 0});
  // precision: class 0: 2/3, class 1: 1/1
  EXPECT_NEAR(tr::precision(p, y, 3, tr::Average::Macro), (2.0 / 3 + 1.0) / 2, 1e-15);
}

TEST(TrainMetrics, MeanErrors) {
  Tensor a = tensor<float>({1, 2, 3}), b = tensor<float>({1, 0, 6});
  EXPECT_DOUBLE_EQ(tr::mean_squared_error(a, b), 13.0 / 3);
  EXPECT_DOUBLE_EQ(tr::mean_absolute_error(a, b), 5.0 / 3);
}

TEST(TrainMetrics, StreamingEqualsOneShot) {
  Tensor logits = logits3(), y = target3();
  tr::Accuracy acc;
  tr::F1Score f1(3, tr::Average::Macro);
  tr::ConfusionMatrix cm(3);
  tr::MeanSquaredError mse;
  tr::TopKAccuracy top2(2);
  std::vector<tr::Metric*> all{&acc, &f1, &cm, &mse, &top2};
  for (tr::Metric* m : all) m->update(zeros({1, 3}), tensor<int64_t>({1}));  // junk before reset
  for (tr::Metric* m : all) m->reset();
  for (int64_t b = 0; b < 8; b += 3) {
    const int64_t e = std::min<int64_t>(b + 3, 8);
    Tensor lb = logits.index({Slice(b, e)}), yb = y.index({Slice(b, e)});
    acc.update(lb, yb);
    f1.update(lb, yb);
    cm.update(lb, yb);
    top2.update(lb, yb);
    mse.update(lb.index({Slice(), 0}), yb.astype(Float32));
  }
  EXPECT_DOUBLE_EQ(acc.result(), tr::accuracy(logits, y));
  EXPECT_EQ(acc.total(), 8);
  EXPECT_DOUBLE_EQ(f1.result(), tr::f1_score(logits, y, 3, tr::Average::Macro));
  EXPECT_TRUE(array_equal(cm.matrix(), tr::confusion_matrix(logits, y, 3)));
  EXPECT_DOUBLE_EQ(cm.result(), 5.0 / 8);
  EXPECT_DOUBLE_EQ(top2.result(), tr::top_k_accuracy(logits, y, 2));
  EXPECT_NEAR(mse.result(), tr::mean_squared_error(logits.index({Slice(), 0}), y.astype(Float32)), 1e-12);
  EXPECT_EQ(top2.name(), "top2_accuracy");
  auto fresh = f1.clone();
  EXPECT_EQ(fresh->result(), 0.0);
  EXPECT_EQ(fresh->name(), "f1");

  tr::Mean loss;
  loss.update(scalar_tensor(2.0), zeros({4}));
  loss.update(scalar_tensor(5.0), zeros({2}));
  EXPECT_DOUBLE_EQ(loss.result(), (2.0 * 4 + 5.0 * 2) / 6);
}

TEST(TrainMetrics, Errors) {
  EXPECT_TRUE(contains_all(error_message<IndexError>([] { tr::confusion_matrix(pred3(), target3(), 2); }),
                           {"class id 2", "2 classes"}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { tr::accuracy(zeros({4, 3}), zeros({3}, Int64)); }),
                           {"(4, 3)", "(3,)"}));
  EXPECT_THROW(tr::accuracy(pred3(), target3().astype(Float32) + 0.5), ValueError);
  EXPECT_THROW(tr::top_k_accuracy(logits3(), target3(), 0), ValueError);
  EXPECT_THROW(tr::precision(pred3(), target3(), 3, tr::Average::Binary, 3), IndexError);
}
