// Stream controllers (docs/workflow.md, "Stream controllers") and the lineage of named queries
// and version ranges: a batch triggers when its samples become significant (a count, a fraction
// of earlier batches, a time window; a named query counting only what it selects), exactly one
// task per batch with its versions in its hyper-parameters and lineage, two controllers racing
// never submit a version twice or lose one, run() wakes on dataset commits, bad specs are typed
// errors. On SQLite and PostgreSQL.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/flow/agent.h>
#include <loom/flow/controllers.h>
#include <loom/flow/plans.h>
#include <loom/flow/tasks.h>
#include <loom/ops/creation.h>
#include <loom/store/datasets.h>
#include <loom/store/error.h>
#include <loom/store/queries.h>
#include <loom/store/store.h>

#include <nlohmann/json.hpp>

#include <map>
#include <thread>

#include "unit/flow/flow_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using loom_test::error_message;
using loom_test::FreshStore;

class FlowControllers : public loom_test::FlowBackendTest {};
INSTANTIATE_STORE_BACKENDS(FlowControllers);

namespace {

// A version of `n` samples (metadata {"label": i % 2}); returns its number.
int64_t push(const store::Store& s, int64_t n, const std::string& name = "points") {
  store::DatasetWriter w = s.datasets().create(name, {.fields = {"x"}});
  for (int64_t i = 0; i < n; ++i) w.append({.tensors = {{"x", ones({2})}}, .metadata = "{\"label\": " + std::to_string(i % 2) + "}"});
  return w.commit().version;
}

std::vector<int64_t> stream_versions(const flow::TaskInfo& t) {
  return nlohmann::json::parse(t.hyper_parameters)["stream"]["versions"].get<std::vector<int64_t>>();
}

}  // namespace

TEST_P(FlowControllers, ACountTriggersOneTaskPerBatchNamingItsVersions) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  flow::Controllers controllers(tasks);
  controllers.create({.name = "retrain", .dataset = "points", .min_samples = 10, .kind = "train",
                      .hyper_parameters = R"({"lr": 0.1})", .output_model = "model"});
  EXPECT_FALSE(controllers.step("retrain")) << "no dataset yet";
  push(fs.store, 6);
  EXPECT_FALSE(controllers.step("retrain")) << "6 of 10 samples";
  EXPECT_EQ(controllers.get("retrain").pending_samples, 6);
  push(fs.store, 6);
  const std::optional<flow::BatchInfo> b = controllers.step("retrain");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->batch, 1);
  EXPECT_EQ(b->versions, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(b->samples, 12);
  EXPECT_FALSE(controllers.step("retrain")) << "a batch triggers once";

  const flow::TaskInfo t = tasks.get(b->task_id);
  EXPECT_EQ(t.kind, "train");
  const nlohmann::json hyper = nlohmann::json::parse(t.hyper_parameters);
  EXPECT_EQ(hyper["lr"], 0.1);
  EXPECT_EQ(hyper["stream"]["controller"], "retrain");
  EXPECT_EQ(hyper["stream"]["batch"], 1);
  EXPECT_EQ(hyper["stream"]["samples"], 12);
  EXPECT_EQ(stream_versions(t), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(t.lineage.input_dataset, "points");
  EXPECT_EQ(t.lineage.input_dataset_version, 1);
  EXPECT_EQ(t.lineage.input_dataset_last_version, 2);
  EXPECT_EQ(t.lineage.output_model, "model");

  push(fs.store, 12);
  const std::optional<flow::BatchInfo> b2 = controllers.step("retrain");
  ASSERT_TRUE(b2);
  EXPECT_EQ(b2->versions, std::vector<int64_t>{3});
  EXPECT_EQ(tasks.get(b2->task_id).lineage.input_dataset_last_version, 0) << "one version: no range";
  const std::vector<flow::BatchInfo> all = controllers.batches("retrain");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].versions, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(all[1].task_id, b2->task_id);
  const flow::ControllerInfo info = controllers.get("retrain");
  EXPECT_EQ(info.batches, 2);
  EXPECT_EQ(info.samples, 24);
  EXPECT_EQ(info.pending_versions, 0);
  // The task's data: exactly the batch's samples.
  EXPECT_EQ(fs.store.queries().open_versions("points", stream_versions(t))->size(), 12);
}

TEST_P(FlowControllers, AFractionOfEarlierBatchesAndATimeWindowTrigger) {
  FreshStore fs(url());
  loom_test::ManualClock clock;
  clock.now->store(flow::system_clock_ms());  // versions carry real commit times
  flow::Tasks tasks(fs.store, clock.clock());
  flow::Controllers controllers(tasks);
  controllers.create({.name = "half", .dataset = "points", .min_fraction = 0.5, .kind = "train"});
  controllers.create({.name = "window", .dataset = "points", .min_samples = 100, .max_wait_ms = 60'000, .kind = "train"});
  push(fs.store, 4);
  ASSERT_TRUE(controllers.step("half")) << "the first batch: any sample";
  push(fs.store, 1);
  EXPECT_FALSE(controllers.step("half")) << "1 < 0.5 * 4";
  push(fs.store, 1);
  const auto b = controllers.step("half");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->versions, (std::vector<int64_t>{2, 3}));

  EXPECT_FALSE(controllers.step("window")) << "6 of 100 samples, the window still open";
  clock.advance(61'000);
  const auto w = controllers.step("window");
  ASSERT_TRUE(w) << "the window closed";
  EXPECT_EQ(w->versions, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(w->samples, 6);
}

TEST_P(FlowControllers, ANamedQueryCountsOnlyWhatItSelects) {
  FreshStore fs(url());
  push(fs.store, 2);
  fs.store.queries().create({.name = "ones", .dataset = "points", .query = {.where = {{"label", "==", 1}}}});
  flow::Tasks tasks(fs.store);
  flow::Controllers controllers(tasks);
  controllers.create({.name = "c", .query = "ones", .min_samples = 3, .kind = "train"});
  EXPECT_EQ(controllers.get("c").spec.dataset, "points");
  push(fs.store, 2);  // 1 + 1 selected
  EXPECT_FALSE(controllers.step("c"));
  push(fs.store, 2);
  const auto b = controllers.step("c");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->samples, 3);
  EXPECT_EQ(b->versions, (std::vector<int64_t>{1, 2, 3}));
  const flow::TaskInfo t = tasks.get(b->task_id);
  EXPECT_EQ(t.lineage.input_query, "ones");
  EXPECT_EQ(nlohmann::json::parse(t.hyper_parameters)["stream"]["query"], "ones");
}

TEST_P(FlowControllers, TwoControllersRacingSubmitEveryVersionExactlyOnce) {
  FreshStore fs(url());
  {
    flow::Tasks tasks(fs.store);
    flow::Controllers(tasks).create({.name = "c", .dataset = "points", .min_samples = 3, .kind = "train"});
  }
  std::atomic<bool> done{false};
  std::vector<std::thread> racers;
  for (int k = 0; k < 2; ++k)
    racers.emplace_back([&] {
      flow::Tasks mine(store::Store::open(url()));  // a connection of its own
      flow::Controllers c(mine);
      while (!done.load())
        if (!c.step("c")) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      c.step("c");
    });
  int64_t pushed = 0;
  for (int v = 0; v < 30; ++v) {
    pushed += push(fs.store, 1 + v % 3) > 0 ? 1 + v % 3 : 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // lets the racers see batches form
  }
  done.store(true);
  for (std::thread& t : racers) t.join();
  flow::Tasks tasks(fs.store);
  flow::Controllers controllers(tasks);
  while (controllers.step("c")) {
  }
  std::map<int64_t, int> in_batches;
  int64_t samples = 0;
  const std::vector<flow::BatchInfo> batches = controllers.batches("c");
  for (const flow::BatchInfo& b : batches) {
    samples += b.samples;
    for (int64_t v : b.versions) ++in_batches[v];
    EXPECT_EQ(stream_versions(tasks.get(b.task_id)), b.versions);
  }
  EXPECT_EQ(tasks.list().size(), batches.size()) << "one task per batch";
  const int64_t left = controllers.get("c").pending_samples;
  EXPECT_EQ(samples + left, pushed) << "every sample in one batch or still pending";
  EXPECT_LT(left, 3);
  for (int64_t v = 1; v <= 30; ++v) EXPECT_LE(in_batches[v], 1) << "version " << v;
  EXPECT_GE(batches.size(), 5u);
}

TEST_P(FlowControllers, RunWakesOnDatasetCommits) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  flow::Controllers controllers(tasks);
  controllers.create({.name = "c", .dataset = "points", .kind = "train"});
  std::atomic<int64_t> submitted{0};
  std::thread runner([&] {
    flow::Tasks mine(store::Store::open(url()));
    flow::Controllers c(mine);
    // recheck_ms an hour: only the commits' notifications can wake it in time for the pushes
    submitted = c.run("c", [&] { return c.get("c").batches >= 3; }, 3'600'000);
  });
  for (int k = 0; k < 3; ++k) {
    push(fs.store, 2);
    while (controllers.get("c").batches < k + 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  runner.join();
  EXPECT_EQ(submitted.load(), 3);
  EXPECT_EQ(tasks.list().size(), 3u);
}

TEST_P(FlowControllers, BadSpecsAreTypedErrorsAndWriteNothing) {
  FreshStore fs(url());
  push(fs.store, 1);
  flow::Tasks tasks(fs.store);
  flow::Controllers controllers(tasks);
  EXPECT_THROW(controllers.create({.name = "bad name", .dataset = "points", .kind = "train"}), ValueError);
  EXPECT_THROW(controllers.create({.name = "c", .dataset = "points", .kind = ""}), ValueError);
  EXPECT_THROW(controllers.create({.name = "c", .dataset = "points", .kind = "t", .hyper_parameters = "[1]"}), ValueError);
  EXPECT_THROW(controllers.create({.name = "c", .dataset = "points", .min_samples = -1, .kind = "t"}), ValueError);
  EXPECT_THROW(controllers.create({.name = "c", .dataset = "points", .min_fraction = -0.5, .kind = "t"}), ValueError);
  EXPECT_THROW(controllers.create({.name = "c", .dataset = "points", .kind = "t", .max_attempts = 0}), ValueError);
  EXPECT_THROW(controllers.create({.name = "c", .kind = "t"}), ValueError);
  EXPECT_THROW(controllers.create({.name = "c", .query = "nope", .kind = "t"}), store::NotFoundError);
  fs.store.queries().create({.name = "q", .dataset = "points"});
  EXPECT_THROW(controllers.create({.name = "c", .dataset = "other", .query = "q", .kind = "t"}), ValueError);
  EXPECT_TRUE(controllers.list().empty());
  controllers.create({.name = "c", .dataset = "points", .kind = "t"});
  const std::string dup = error_message<store::ConflictError>([&] { controllers.create({.name = "c", .dataset = "points", .kind = "t"}); });
  EXPECT_NE(dup.find("already exists"), std::string::npos) << dup;
  EXPECT_THROW(controllers.step("x"), store::NotFoundError);
  EXPECT_THROW(controllers.get("x"), store::NotFoundError);
  EXPECT_THROW(controllers.remove("x"), store::NotFoundError);
  ASSERT_TRUE(controllers.step("c"));
  controllers.remove("c");
  EXPECT_TRUE(controllers.list().empty());
  EXPECT_EQ(tasks.list().size(), 1u) << "its tasks stay";
}

TEST_P(FlowControllers, LineageNamesQueriesAndVersionRanges) {
  FreshStore fs(url());
  push(fs.store, 1);
  push(fs.store, 1);
  push(fs.store, 1, "other");
  fs.store.queries().create({.name = "q", .dataset = "points"});
  flow::Tasks tasks(fs.store);
  flow::TaskOptions o;
  o.lineage = {.input_dataset = "points", .input_dataset_version = 1, .input_dataset_last_version = 2, .input_query = "q"};
  const flow::TaskInfo t = tasks.get(tasks.submit("train", "{}", o));
  EXPECT_EQ(t.lineage.input_dataset_last_version, 2);
  EXPECT_EQ(t.lineage.input_query, "q");
  flow::TaskOptions bad = o;
  bad.lineage.input_query = "nope";
  EXPECT_THROW(tasks.submit("train", "{}", bad), store::NotFoundError);
  bad = o;
  bad.lineage.input_dataset = "other";
  bad.lineage.input_dataset_version = 1;
  bad.lineage.input_dataset_last_version = 0;
  EXPECT_THROW(tasks.submit("train", "{}", bad), ValueError) << "the query is over another dataset";
  bad = o;
  bad.lineage.input_dataset_last_version = 3;
  EXPECT_THROW(tasks.submit("train", "{}", bad), store::NotFoundError);
  bad = o;
  bad.lineage.input_dataset_version = 2;
  bad.lineage.input_dataset_last_version = 1;
  EXPECT_THROW(tasks.submit("train", "{}", bad), ValueError);
  EXPECT_EQ(tasks.list().size(), 1u);
}

// The paper's two-stage plan per batch: a model trained on the batch, then a second one on its
// features, submitted with the batch in one transaction.
TEST_P(FlowControllers, APlanPerBatchReadsTheBatchInItsFirstStage) {
  FreshStore fs(url());
  push(fs.store, 2);
  fs.store.queries().create({.name = "labelled", .dataset = "points"});
  flow::Tasks tasks(fs.store);
  flow::Controllers controllers(tasks);
  flow::TaskGraph two_stage{.name = "cnn then rnn", .tasks = {}};
  two_stage.tasks.push_back({.name = "cnn", .kind = "train_cnn", .hyper_parameters = R"({"lr": 0.01})"});
  two_stage.tasks.back().options.lineage.output_model = "cnn";
  two_stage.tasks.push_back({.name = "rnn", .kind = "train_rnn", .depends_on = {"cnn"}});
  two_stage.tasks.back().options.lineage = {.input_model = "cnn", .output_model = "rnn"};
  two_stage.tasks.back().options.priority = 5;
  controllers.create({.name = "retrain", .query = "labelled", .min_samples = 4, .plan = two_stage});

  const flow::ControllerInfo info = controllers.get("retrain");
  EXPECT_EQ(info.spec.dataset, "points") << "the query's";
  EXPECT_EQ(info.spec.kind, "");
  ASSERT_EQ(info.spec.plan.tasks.size(), 2u) << "the plan is stored";
  EXPECT_EQ(info.spec.plan.name, "cnn then rnn");
  EXPECT_EQ(info.spec.plan.tasks[1].depends_on, std::vector<std::string>{"cnn"});
  EXPECT_EQ(info.spec.plan.tasks[1].options.priority, 5);
  EXPECT_EQ(info.spec.plan.tasks[1].options.lineage.input_model, "cnn");

  EXPECT_FALSE(controllers.step("retrain")) << "2 of 4 samples";
  push(fs.store, 3);
  const std::optional<flow::BatchInfo> b = controllers.step("retrain");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->task_id, 0);
  ASSERT_GT(b->plan_id, 0);
  EXPECT_FALSE(controllers.step("retrain")) << "a batch triggers once";
  ASSERT_EQ(controllers.batches("retrain").size(), 1u);
  EXPECT_EQ(controllers.batches("retrain")[0].plan_id, b->plan_id);

  const flow::PlanInfo p = flow::Plans(tasks).get(b->plan_id);
  EXPECT_EQ(p.name, "cnn then rnn: batch 1");
  ASSERT_EQ(p.tasks.size(), 2u);
  EXPECT_EQ(tasks.list().size(), 2u) << "only the plan's tasks";
  const flow::TaskInfo cnn = tasks.get(p.task_id("cnn")), rnn = tasks.get(p.task_id("rnn"));
  EXPECT_EQ(cnn.kind, "train_cnn");
  EXPECT_EQ(rnn.depends_on, std::vector<int64_t>{cnn.id});
  EXPECT_EQ(rnn.waiting, 1);
  EXPECT_EQ(rnn.priority, 5);
  for (const flow::TaskInfo& t : {cnn, rnn}) {
    SCOPED_TRACE(t.name);
    EXPECT_EQ(stream_versions(t), (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(nlohmann::json::parse(t.hyper_parameters)["stream"]["query"], "labelled");
  }
  EXPECT_EQ(nlohmann::json::parse(cnn.hyper_parameters)["lr"], 0.01);
  // The first stage reads the batch; the second reads the first's model.
  EXPECT_EQ(cnn.lineage.input_dataset, "points");
  EXPECT_EQ(cnn.lineage.input_dataset_version, 1);
  EXPECT_EQ(cnn.lineage.input_dataset_last_version, 2);
  EXPECT_EQ(cnn.lineage.input_query, "labelled");
  EXPECT_EQ(cnn.lineage.output_model, "cnn");
  EXPECT_EQ(rnn.lineage.input_dataset, "");
  EXPECT_EQ(rnn.lineage.input_model, "cnn");
  EXPECT_EQ(rnn.lineage.output_model, "rnn");

  // The dependent runs only after the first stage, and sees its result.
  flow::Agent agent(tasks, "a");
  std::vector<std::string> ran;
  agent.register_kind("train_cnn", [&](const std::string&, flow::TaskContext&) {
    ran.push_back("cnn");
    return std::string(R"({"features": 16})");
  });
  agent.register_kind("train_rnn", [&](const std::string&, flow::TaskContext& ctx) {
    ran.push_back("rnn");
    EXPECT_EQ(ctx.claim().dependencies.size(), 1u);
    return std::string("{}");
  });
  agent.run({.stop_when_idle = true});
  EXPECT_EQ(ran, (std::vector<std::string>{"cnn", "rnn"}));
  EXPECT_EQ(flow::Plans(tasks).get(b->plan_id).status, flow::Status::Finished);
}

TEST_P(FlowControllers, BadPlansAreTypedErrorsAtCreation) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  const int64_t outside = tasks.submit("t");
  flow::Controllers controllers(tasks);
  const auto plan = [](std::vector<flow::PlanTask> t) { return flow::TaskGraph{.name = "p", .tasks = std::move(t)}; };
  const auto create = [&](flow::ControllerSpec s) { return error_message<ValueError>([&] { controllers.create(s); }); };
  EXPECT_NE(create({.name = "c", .dataset = "points", .kind = "t", .plan = plan({{.name = "a", .kind = "t"}})}).find("both a plan"),
            std::string::npos);
  EXPECT_NE(create({.name = "c", .dataset = "points", .hyper_parameters = R"({"x": 1})", .plan = plan({{.name = "a", .kind = "t"}})})
                .find("hyper-parameters and a plan"),
            std::string::npos);
  EXPECT_NE(create({.name = "c", .dataset = "points", .plan = plan({})}).find("no tasks"), std::string::npos);
  EXPECT_NE(create({.name = "c", .dataset = "points",
                    .plan = plan({{.name = "a", .kind = "t", .depends_on = {"b"}}, {.name = "b", .kind = "t", .depends_on = {"a"}}})})
                .find("cycle"),
            std::string::npos);
  flow::PlanTask after{.name = "a", .kind = "t"};
  after.options.depends_on = {outside};
  EXPECT_NE(create({.name = "c", .dataset = "points", .plan = plan({after})}).find("outside"), std::string::npos);
  flow::TaskGraph long_name = plan({{.name = "a", .kind = "t"}});
  long_name.name = std::string(201, 'x');
  EXPECT_NE(create({.name = "c", .dataset = "points", .plan = long_name}).find("batch N"), std::string::npos);
  flow::PlanTask bad_lineage{.name = "a", .kind = "t"};
  bad_lineage.options.lineage.input_model = "m";
  bad_lineage.options.lineage.input_model_version = 3;
  EXPECT_THROW(controllers.create({.name = "c", .dataset = "points", .plan = plan({bad_lineage})}), store::NotFoundError);
  EXPECT_TRUE(controllers.list().empty()) << "nothing written";
}

TEST_P(FlowControllers, AControllerFromBeforePlansUpgradesAndKeepsWorking) {
  FreshStore fs(url());
  {
    flow::Tasks tasks(fs.store);
    flow::Controllers(tasks).create({.name = "old", .dataset = "points", .kind = "train"});
  }
  // The stream part as its migration 1 left it: no plan columns.
  loom_test::raw_sql(url(), "ALTER TABLE stream_controllers DROP COLUMN plan");
  loom_test::raw_sql(url(), "ALTER TABLE stream_batches DROP COLUMN plan_id");
  loom_test::raw_sql(url(), "UPDATE loom_schema_parts SET version = 1 WHERE part = 'loom.flow.stream'");
  push(fs.store, 3);
  store::Store reopened = store::Store::open(url());
  flow::Tasks tasks(reopened);
  flow::Controllers controllers(tasks);
  EXPECT_EQ(loom_test::raw_sql(url(), "SELECT version FROM loom_schema_parts WHERE part = 'loom.flow.stream'"),
            std::vector<std::string>{"2"});
  const flow::ControllerInfo c = controllers.get("old");
  EXPECT_EQ(c.spec.kind, "train");
  EXPECT_TRUE(c.spec.plan.tasks.empty());
  const std::optional<flow::BatchInfo> b = controllers.step("old");
  ASSERT_TRUE(b);
  EXPECT_GT(b->task_id, 0);
  EXPECT_EQ(b->plan_id, 0);
  EXPECT_EQ(controllers.batches("old").at(0).plan_id, 0);
}
