#pragma once
// Cross-validation splits of sample indices, as scikit-learn's KFold and StratifiedKFold define
// them (docs/workflow.md, "Cross-validation"):
//
//   data::KFold kf(5, /*shuffle=*/true, /*seed=*/0);
//   for (const data::Fold& f : kf.split(1000)) { ... f.train, f.test: indices in 0..999 ... }
//   data::StratifiedKFold skf(5);
//   for (const data::Fold& f : skf.split(labels)) { ... each class spread evenly over the folds ... }
//
// KFold: the (optionally shuffled) indices are cut into n_splits consecutive test folds, the first
// n % n_splits of them one sample larger. StratifiedKFold: the labels sorted, then dealt to the
// folds round robin, so that each fold holds each class's count / n_splits (rounded as the deal
// falls); with shuffle, which samples of a class go to which fold is drawn at random. In both,
// `train` and `test` are in ascending order and every index is in exactly one test fold. The
// shuffle is a Fisher-Yates shuffle of Loom's own generator, so the folds of a seed are the same on
// every machine (not numpy's: the same rules, other draws).
#include <cstdint>
#include <vector>

#include "loom/core/api.h"

namespace loom::data {

struct LOOM_API Fold {
  std::vector<int64_t> train;
  std::vector<int64_t> test;
};

class LOOM_API KFold {
 public:
  // ValueError for n_splits < 2.
  explicit KFold(int64_t n_splits = 5, bool shuffle = false, uint64_t seed = 0);
  // The n_splits folds of n samples; ValueError when n_splits > n.
  std::vector<Fold> split(int64_t n) const;
  int64_t n_splits() const { return n_splits_; }

 private:
  int64_t n_splits_;
  bool shuffle_;
  uint64_t seed_;
};

class LOOM_API StratifiedKFold {
 public:
  // ValueError for n_splits < 2.
  explicit StratifiedKFold(int64_t n_splits = 5, bool shuffle = false, uint64_t seed = 0);
  // The n_splits folds of the samples whose classes are `y` (any integers; classes are numbered
  // in order of first appearance, as scikit-learn does). ValueError when n_splits > y.size() or
  // when no class has n_splits members (scikit-learn's rule; a class with fewer members than
  // n_splits is allowed and leaves some folds without it).
  std::vector<Fold> split(const std::vector<int64_t>& y) const;
  int64_t n_splits() const { return n_splits_; }

 private:
  int64_t n_splits_;
  bool shuffle_;
  uint64_t seed_;
};

}  // namespace loom::data
