#pragma once
// Helpers of the workflow tests: a fresh store per test (the one place that picks the backend,
// so that the suite can later run on each) and a clock that tests move by hand.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <atomic>
#include <memory>
#include <string>

#include "unit/core_test_util.h"

namespace loom_test {

// A new, empty store in a temporary directory, removed with it.
struct FreshStore {
  TempDir dir;
  loom::store::Store store = loom::store::Store::open(dir / "flow.db");
  std::string url() const { return store.path(); }
};

// A clock that only moves when told: lease and timeout tests advance it instead of sleeping.
struct ManualClock {
  std::shared_ptr<std::atomic<int64_t>> now = std::make_shared<std::atomic<int64_t>>(1'700'000'000'000);
  loom::flow::Clock clock() const {
    return [n = now] { return n->load(); };
  }
  void advance(int64_t ms) { now->fetch_add(ms); }
  int64_t ms() const { return now->load(); }
};

}  // namespace loom_test
