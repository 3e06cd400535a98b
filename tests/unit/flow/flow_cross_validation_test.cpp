// Cross-validation as a plan (docs/workflow.md, "Cross-validation"), on SQLite and PostgreSQL:
// k fold tasks with their fold numbers and an aggregate that runs after all of them and
// summarizes their results (mean and numpy's std, computed here by hand).
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/data/kfold.h>
#include <loom/flow/agent.h>
#include <loom/flow/cross_validation.h>
#include <loom/flow/plans.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "unit/flow/flow_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using loom_test::FreshStore;

class FlowCrossValidation : public loom_test::FlowBackendTest {};
INSTANTIATE_STORE_BACKENDS(FlowCrossValidation);

TEST_P(FlowCrossValidation, FoldsThenAggregate) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  flow::Plans plans(tasks);
  const int64_t plan = flow::submit_cross_validation(
      plans, {.name = "cv", .fold_kind = "fold", .aggregate_kind = "mean", .n_splits = 3, .hyper_parameters = R"({"n": 10})"});
  flow::Agent agent(tasks);
  // A fold's "score": the mean of its test indices under KFold(3) of 10 samples.
  agent.register_kind("fold", [](const std::string& hyper, flow::TaskContext&) {
    const nlohmann::json h = nlohmann::json::parse(hyper);
    const data::Fold f = data::KFold(h["n_splits"].get<int64_t>()).split(h["n"].get<int64_t>())[h["fold"].get<size_t>()];
    double sum = 0;
    for (int64_t i : f.test) sum += static_cast<double>(i);
    return nlohmann::json{{"score", sum / static_cast<double>(f.test.size())}}.dump();
  });
  int64_t folds_seen = -1;
  agent.register_kind("mean", [&folds_seen](const std::string& hyper, flow::TaskContext& ctx) {
    EXPECT_EQ(nlohmann::json::parse(hyper)["n_splits"], 3);
    folds_seen = static_cast<int64_t>(ctx.claim().dependencies.size());
    return flow::summarize_folds(ctx.claim().dependencies, "score").to_json();
  });
  EXPECT_EQ(agent.run({.poll_ms = 5, .stop_when_idle = true}), 4);
  const flow::PlanInfo p = plans.get(plan);
  EXPECT_EQ(p.status, flow::Status::Finished);
  ASSERT_EQ(p.tasks.size(), 4u);
  EXPECT_EQ(nlohmann::json::parse(p.tasks[2].hyper_parameters)["fold"], 2);
  EXPECT_EQ(folds_seen, 3);
  const nlohmann::json r = nlohmann::json::parse(tasks.get(p.task_id("aggregate")).result);
  // Test folds {0..3}, {4..6}, {7..9}: means 1.5, 5 and 8.
  const double mean = (1.5 + 5 + 8) / 3;
  const double std = std::sqrt(((1.5 - mean) * (1.5 - mean) + (5 - mean) * (5 - mean) + (8 - mean) * (8 - mean)) / 3);
  EXPECT_EQ(r["folds"], (nlohmann::json{1.5, 5.0, 8.0}));
  EXPECT_NEAR(r["mean"].get<double>(), mean, 1e-12);
  EXPECT_NEAR(r["std"].get<double>(), std, 1e-12);
}

TEST_P(FlowCrossValidation, BadInputIsAValueErrorAndWritesNothing) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  flow::Plans plans(tasks);
  EXPECT_THROW(flow::submit_cross_validation(plans, {.fold_kind = "f", .aggregate_kind = "a", .n_splits = 1}), ValueError);
  EXPECT_THROW(flow::submit_cross_validation(plans, {.fold_kind = "f", .aggregate_kind = "a", .hyper_parameters = R"({"fold": 1})"}),
               ValueError);
  EXPECT_THROW(flow::submit_cross_validation(plans, {.fold_kind = "f", .aggregate_kind = "a", .hyper_parameters = "[]"}), ValueError);
  EXPECT_THROW(flow::submit_cross_validation(plans, {.fold_kind = "bad kind", .aggregate_kind = "a"}), ValueError);
  EXPECT_TRUE(tasks.list().empty());
  EXPECT_TRUE(plans.list().empty());
  EXPECT_THROW(flow::summarize_folds({}, "acc"), ValueError);
  EXPECT_THROW(flow::summarize_folds({{1, "fold-0", "k", R"({"loss": 1})"}}, "acc"), ValueError);
  EXPECT_THROW(flow::summarize_folds({{1, "fold-0", "k", ""}}, "acc"), ValueError);
  // Fold order by number: fold-10 after fold-9.
  std::vector<flow::DependencyResult> d;
  for (int i : {10, 9, 0}) d.push_back({i + 1, "fold-" + std::to_string(i), "k", "{\"acc\": " + std::to_string(i) + "}"});
  EXPECT_EQ(flow::summarize_folds(d, "acc").values, (std::vector<double>{0, 9, 10}));
}
