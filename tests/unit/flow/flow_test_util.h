#pragma once
// Helpers of the workflow tests: a fresh store per test on the test's backend (they are TEST_Ps
// instantiated with INSTANTIATE_STORE_BACKENDS, as the store's) and a clock that tests move by hand.
#include <gtest/gtest.h>
#include <loom/flow/tasks.h>
#include <loom/store/store.h>

#include <atomic>
#include <memory>
#include <string>

#include "unit/common/core_test_util.h"
#include "unit/store/store_test_util.h"

namespace loom_test {

// The store of a workflow test: a new, empty one on the test's backend (a file in its temporary
// folder, or a database on the test server dropped at its end). `url` is StoreBackendTest::url().
struct FreshStore {
  explicit FreshStore(const std::string& u) : store(loom::store::Store::open(u)), url_(u) {}
  std::string url() const { return url_; }
  loom::store::Store store;

 private:
  std::string url_;
};

// A workflow test run on each backend: TEST_P(FlowXxx, ...) with INSTANTIATE_STORE_BACKENDS(FlowXxx).
using FlowBackendTest = StoreBackendTest;

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
