#include "loom/data/kfold.h"

#include <algorithm>
#include <map>
#include <random>
#include <string>

#include "loom/core/error.h"

namespace loom::data {

namespace {

void check_n_splits(const char* who, int64_t n_splits) {
  if (n_splits < 2)
    throw ValueError(std::string(who) + ": n_splits " + std::to_string(n_splits) + " is too small (valid: 2 or more)");
}

void check_samples(const char* who, int64_t n_splits, int64_t n) {
  if (n < 0) throw ValueError(std::string(who) + ": " + std::to_string(n) + " samples (valid: 0 or more)");
  if (n_splits > n)
    throw ValueError(std::string(who) + ": n_splits " + std::to_string(n_splits) + " is more than the " + std::to_string(n) +
                     " samples (valid: 2 to the number of samples)");
}

// An integer in [0, bound) without modulo bias, from a generator whose output is the same on
// every platform (std::uniform_int_distribution's is not).
uint64_t below(std::mt19937_64& gen, uint64_t bound) {
  const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % bound);
  for (;;)
    if (const uint64_t x = gen(); x < limit) return x % bound;
}

template <class T>
void shuffle(std::vector<T>& v, std::mt19937_64& gen) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(gen, i)]);
}

// Folds from each sample's test fold number.
std::vector<Fold> folds_of(const std::vector<int64_t>& test_fold, int64_t n_splits) {
  std::vector<Fold> out(static_cast<size_t>(n_splits));
  for (int64_t k = 0; k < n_splits; ++k)
    for (size_t i = 0; i < test_fold.size(); ++i)
      (test_fold[i] == k ? out[k].test : out[k].train).push_back(static_cast<int64_t>(i));
  return out;
}

}  // namespace

KFold::KFold(int64_t n_splits, bool shuffle, uint64_t seed) : n_splits_(n_splits), shuffle_(shuffle), seed_(seed) {
  check_n_splits("KFold", n_splits);
}

std::vector<Fold> KFold::split(int64_t n) const {
  check_samples("KFold::split", n_splits_, n);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  if (shuffle_) {
    std::mt19937_64 gen(seed_);
    shuffle(order, gen);
  }
  std::vector<int64_t> test_fold(static_cast<size_t>(n));
  int64_t at = 0;
  for (int64_t k = 0; k < n_splits_; ++k) {
    const int64_t size = n / n_splits_ + (k < n % n_splits_ ? 1 : 0);
    for (int64_t j = 0; j < size; ++j) test_fold[order[at++]] = k;
  }
  return folds_of(test_fold, n_splits_);
}

StratifiedKFold::StratifiedKFold(int64_t n_splits, bool shuffle, uint64_t seed)
    : n_splits_(n_splits), shuffle_(shuffle), seed_(seed) {
  check_n_splits("StratifiedKFold", n_splits);
}

std::vector<Fold> StratifiedKFold::split(const std::vector<int64_t>& y) const {
  const int64_t n = static_cast<int64_t>(y.size());
  check_samples("StratifiedKFold::split", n_splits_, n);
  // Classes numbered in order of first appearance.
  std::map<int64_t, int64_t> number;
  std::vector<int64_t> encoded(y.size());
  for (size_t i = 0; i < y.size(); ++i) encoded[i] = number.emplace(y[i], static_cast<int64_t>(number.size())).first->second;
  const int64_t n_classes = static_cast<int64_t>(number.size());
  std::vector<int64_t> counts(static_cast<size_t>(n_classes), 0);
  for (int64_t c : encoded) ++counts[c];
  if (*std::max_element(counts.begin(), counts.end()) < n_splits_)
    throw ValueError("StratifiedKFold::split: n_splits " + std::to_string(n_splits_) + " is more than the members of every class (the " +
                     "largest has " + std::to_string(*std::max_element(counts.begin(), counts.end())) + "; valid: 2 to that)");
  // The sorted labels dealt round robin: fold k receives the labels at positions k, k + n_splits, ...
  std::vector<int64_t> sorted = encoded;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::vector<int64_t>> allocation(static_cast<size_t>(n_splits_), std::vector<int64_t>(n_classes, 0));
  for (int64_t i = 0; i < n; ++i) ++allocation[i % n_splits_][sorted[i]];
  std::mt19937_64 gen(seed_);
  std::vector<int64_t> test_fold(y.size());
  for (int64_t c = 0; c < n_classes; ++c) {
    std::vector<int64_t> folds_for_class;  // 0 repeated allocation[0][c] times, then 1, ...
    for (int64_t k = 0; k < n_splits_; ++k) folds_for_class.insert(folds_for_class.end(), allocation[k][c], k);
    if (shuffle_) shuffle(folds_for_class, gen);
    size_t next = 0;
    for (size_t i = 0; i < y.size(); ++i)
      if (encoded[i] == c) test_fold[i] = folds_for_class[next++];
  }
  return folds_of(test_fold, n_splits_);
}

}  // namespace loom::data
