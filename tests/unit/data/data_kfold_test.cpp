// KFold and StratifiedKFold against scikit-learn's rules (scikit-learn is not installed here, so
// its documented examples and its rules are checked directly): fold sizes, disjoint test folds
// covering every index, train = the complement, stratification per class.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/data/kfold.h>

#include <algorithm>
#include <map>
#include <set>

using namespace loom;
using namespace loom::data;

namespace {

// Every index of 0..n-1 in exactly one test fold; train = the complement; both ascending.
void expect_partition(const std::vector<Fold>& folds, int64_t n) {
  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (const Fold& f : folds) {
    EXPECT_TRUE(std::is_sorted(f.test.begin(), f.test.end()));
    EXPECT_TRUE(std::is_sorted(f.train.begin(), f.train.end()));
    EXPECT_EQ(f.train.size() + f.test.size(), static_cast<size_t>(n));
    std::set<int64_t> test(f.test.begin(), f.test.end());
    for (int64_t i : f.test) ++seen[i];
    for (int64_t i : f.train) EXPECT_EQ(test.count(i), 0u) << i;
  }
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "index " << i;
}

}  // namespace

TEST(DataKFold, UnshuffledFoldsAreConsecutiveFirstOnesLarger) {
  // scikit-learn: n_samples // n_splits each, the first n_samples % n_splits one more.
  const std::vector<Fold> folds = KFold(3).split(10);
  ASSERT_EQ(folds.size(), 3u);
  EXPECT_EQ(folds[0].test, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(folds[1].test, (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(folds[2].test, (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(folds[1].train, (std::vector<int64_t>{0, 1, 2, 3, 7, 8, 9}));
  expect_partition(folds, 10);
  // scikit-learn's documented example: KFold(n_splits=2) of 4 samples.
  const std::vector<Fold> two = KFold(2).split(4);
  EXPECT_EQ(two[0].train, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(two[0].test, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(two[1].test, (std::vector<int64_t>{2, 3}));
}

TEST(DataKFold, ShuffledSizesCoverAndSeed) {
  for (int64_t n : {5, 17, 100, 101}) {
    for (int64_t k : {2, 3, 5}) {
      const std::vector<Fold> folds = KFold(k, true, 42).split(n);
      expect_partition(folds, n);
      for (int64_t j = 0; j < k; ++j)
        EXPECT_EQ(static_cast<int64_t>(folds[j].test.size()), n / k + (j < n % k ? 1 : 0)) << n << " " << k << " " << j;
    }
  }
  // The same seed gives the same folds, another seed others, and shuffling moves samples.
  const std::vector<Fold> a = KFold(5, true, 7).split(100), b = KFold(5, true, 7).split(100), c = KFold(5, true, 8).split(100);
  const std::vector<Fold> plain = KFold(5).split(100);
  bool differ = false, moved = false;
  for (size_t j = 0; j < a.size(); ++j) {
    EXPECT_EQ(a[j].test, b[j].test);
    differ = differ || a[j].test != c[j].test;
    moved = moved || a[j].test != plain[j].test;
  }
  EXPECT_TRUE(differ);
  EXPECT_TRUE(moved);
}

TEST(DataKFold, BadSplitsAreValueErrors) {
  EXPECT_THROW(KFold(1), ValueError);
  EXPECT_THROW(KFold(0), ValueError);
  EXPECT_THROW(KFold(5).split(4), ValueError);
  EXPECT_THROW(KFold(2).split(-1), ValueError);
  EXPECT_THROW(StratifiedKFold(1), ValueError);
  EXPECT_THROW(StratifiedKFold(3).split({0, 1}), ValueError);
  // No class has 3 members: scikit-learn refuses it too.
  EXPECT_THROW(StratifiedKFold(3).split({0, 0, 1, 1, 2, 2}), ValueError);
  try {
    KFold(5).split(4);
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("n_splits 5"), std::string::npos) << e.what();
  }
}

TEST(DataStratifiedKFold, DocumentedExample) {
  // scikit-learn's documented example: y = [0, 0, 1, 1], n_splits = 2.
  const std::vector<Fold> folds = StratifiedKFold(2).split({0, 0, 1, 1});
  EXPECT_EQ(folds[0].test, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(folds[0].train, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(folds[1].test, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(folds[1].train, (std::vector<int64_t>{0, 2}));
}

TEST(DataStratifiedKFold, ClassProportionsPerFold) {
  // 3 classes of 50, 30 and 7 members in a scrambled order; class labels need not be 0..C-1.
  std::vector<int64_t> y;
  for (int i = 0; i < 50; ++i) y.push_back(10);
  for (int i = 0; i < 30; ++i) y.push_back(-3);
  for (int i = 0; i < 7; ++i) y.push_back(4);
  for (size_t i = 0; i < y.size(); ++i) std::swap(y[i], y[(i * 37) % y.size()]);
  const int64_t n = static_cast<int64_t>(y.size()), k = 5;
  for (bool shuffled : {false, true}) {
    const std::vector<Fold> folds = StratifiedKFold(k, shuffled, 3).split(y);
    expect_partition(folds, n);
    // The round-robin deal of the sorted labels: every fold holds count / k members of each
    // class, rounded down or up, and the folds' sizes differ by at most one.
    std::map<int64_t, int64_t> total;
    for (int64_t v : y) ++total[v];
    size_t smallest = folds[0].test.size(), largest = smallest;
    for (const Fold& f : folds) {
      smallest = std::min(smallest, f.test.size());
      largest = std::max(largest, f.test.size());
      std::map<int64_t, int64_t> in_fold;
      for (int64_t i : f.test) ++in_fold[y[i]];
      for (const auto& entry : total) {
        EXPECT_GE(in_fold[entry.first], entry.second / k) << "class " << entry.first;
        EXPECT_LE(in_fold[entry.first], (entry.second + k - 1) / k) << "class " << entry.first;
      }
    }
    EXPECT_LE(largest - smallest, 1u);
  }
  // Unshuffled, a class's members go to the folds in index order (0 first, then 1, ...).
  const std::vector<Fold> folds = StratifiedKFold(k).split(y);
  std::vector<int64_t> fold_of(y.size());
  for (int64_t j = 0; j < k; ++j)
    for (int64_t i : folds[j].test) fold_of[i] = j;
  int64_t last = 0;
  for (size_t i = 0; i < y.size(); ++i)
    if (y[i] == 10) {
      EXPECT_GE(fold_of[i], last);
      last = fold_of[i];
    }
}

TEST(DataStratifiedKFold, SmallClassAllowedAndSeeded) {
  // A class of 1 member with n_splits 3 is allowed (scikit-learn only warns): it is in one fold.
  const std::vector<int64_t> y{0, 0, 0, 0, 0, 0, 1};
  const std::vector<Fold> folds = StratifiedKFold(3).split(y);
  expect_partition(folds, 7);
  const std::vector<Fold> a = StratifiedKFold(3, true, 1).split(y), b = StratifiedKFold(3, true, 1).split(y);
  for (size_t j = 0; j < a.size(); ++j) EXPECT_EQ(a[j].test, b[j].test);
}
