// A task, a stream controller and its batches, a task event, a trial's report, a plan and a
// search with its trials declared once
// (loom/store/record.h, docs/architecture.md "Records"): their columns, readers and JSON come
// from their fields(); each goes through the database and through JSON unchanged; a stored
// status or event that is no spelling is a BadStateError naming the valid ones. On SQLite and
// PostgreSQL.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/flow/controllers.h>
#include <loom/flow/events.h>
#include <loom/flow/plans.h>
#include <loom/flow/reports.h>
#include <loom/flow/search.h>
#include <loom/flow/tasks.h>
#include <loom/ops/creation.h>
#include <loom/store/datasets.h>
#include <loom/store/error.h>
#include <loom/store/record.h>
#include <loom/store/store.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <thread>

#include "unit/flow/flow_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::FreshStore;
using loom_test::raw_sql;
using ordered_json = nlohmann::ordered_json;

class FlowRecords : public loom_test::FlowBackendTest {};
INSTANTIATE_STORE_BACKENDS(FlowRecords);

namespace {

// The keys of `j`, in order, and a record's field names: one key set.
std::vector<std::string> keys_of(const ordered_json& j) {
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  return keys;
}

template <class R>
std::vector<std::string> field_names(const R& r) {
  std::vector<std::string> names;
  store::detail::visit_fields(r, [&](const char* key, const auto&, store::RecordField = {}) { names.emplace_back(key); });
  return names;
}

}  // namespace

TEST(FlowRecordsSpelling, TaskStatusesHaveOneSpellingEach) {
  EXPECT_EQ(store::state_names<flow::Status>(), (std::vector<std::string>{"pending", "running", "finished", "failed", "cancelled"}));
  for (const std::string& s : store::state_names<flow::Status>()) {
    EXPECT_EQ(flow::status_name(flow::parse_status(s)), s);
    EXPECT_STREQ(store::to_string(store::parse_state<flow::Status>(s)), s.c_str());
  }
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { flow::parse_status("done"); }),
                           {"unknown task status 'done'", "valid: pending, running, finished, failed, cancelled"}));
}

TEST(FlowRecordsSpelling, TheTaskColumnsAreTheTableWithItsLineageFlattened) {
  const std::vector<std::string> columns = store::column_names<flow::TaskInfo>();
  EXPECT_EQ(columns.front(), "id");
  EXPECT_EQ(columns.back(), "input_query");
  EXPECT_EQ(std::count(columns.begin(), columns.end(), "depends_on"), 0);  // task_dependencies' rows
  EXPECT_EQ(std::count(columns.begin(), columns.end(), "input_dataset"), 1);
}

TEST_P(FlowRecords, ATaskRoundTripsThroughTheDatabaseAndJson) {
  FreshStore fs(url());
  loom_test::ManualClock clock;
  flow::Tasks tasks(fs.store, clock.clock());
  const int64_t first = tasks.submit("prep", R"({"n": 1})");
  const int64_t id = tasks.submit("train", R"({"lr": 0.5, "opt": {"name": "sgd"}})",
                                  {.priority = 4, .max_attempts = 2, .timeout_ms = 5000, .depends_on = {first},
                                   .lineage = {.output_model = "head", .output_dataset = "preds"}});
  auto c = tasks.claim({"prep"}, "agent-a");
  ASSERT_TRUE(c);
  tasks.finish(*c, R"({"rows": 10})");
  clock.advance(7);
  auto t = tasks.claim({"train"}, "agent-b");
  ASSERT_TRUE(t);
  tasks.finish(*t, R"({"accuracy": 0.9, "notes": ["a", "b"]})");

  const flow::TaskInfo info = tasks.get(id);
  EXPECT_EQ(info.status, flow::Status::Finished);
  EXPECT_EQ(info.depends_on, std::vector<int64_t>{first});
  EXPECT_EQ(info.agent, "agent-b");
  EXPECT_EQ(info.lineage.output_model, "head");
  const ordered_json j = store::record_json<ordered_json>(info);
  // one key set: the record's fields, whoever prints it
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  std::vector<std::string> fields;
  store::detail::visit_fields(info, [&](const char* key, const auto&, store::RecordField = {}) { fields.emplace_back(key); });
  EXPECT_EQ(keys, fields);
  EXPECT_EQ(j["status"], "finished");
  EXPECT_EQ(j["hyper_parameters"]["opt"]["name"], "sgd");
  EXPECT_EQ(j["result"]["notes"], ordered_json({"a", "b"}));
  EXPECT_EQ(j["lineage"]["output_dataset"], "preds");
  EXPECT_EQ(j["depends_on"], ordered_json({first}));
  EXPECT_EQ(j["token"], 1);
  const flow::TaskInfo back = store::record_from_json<flow::TaskInfo>(nlohmann::json::parse(j.dump()), "task");
  EXPECT_EQ(store::record_json<ordered_json>(back).dump(), j.dump());
  EXPECT_EQ(back.hyper_parameters, info.hyper_parameters);
  EXPECT_EQ(back.result, info.result);
  EXPECT_EQ(back.started_ms, info.started_ms);

  // a pending task's empty result is null, and back
  const int64_t pending = tasks.submit("later");
  const ordered_json p = store::record_json<ordered_json>(tasks.get(pending));
  EXPECT_TRUE(p["result"].is_null());
  EXPECT_EQ(store::record_from_json<flow::TaskInfo>(p, "task").result, "");
}

TEST_P(FlowRecords, AStoredStatusThatIsNoSpellingIsABadStateError) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  const int64_t id = tasks.submit("train");
  // the table's CHECK keeps the library's own writes right: another program's are set aside
  if (loom_test::is_pg_url(url())) {
    raw_sql(url(), "ALTER TABLE tasks DROP CONSTRAINT tasks_status_check");
    raw_sql(url(), "UPDATE tasks SET status = 'paused' WHERE id = " + std::to_string(id));
  } else {
    raw_sql(url(), "PRAGMA ignore_check_constraints = ON; UPDATE tasks SET status = 'paused' WHERE id = " + std::to_string(id));
  }
  EXPECT_TRUE(contains_all(error_message<store::BadStateError>([&] { tasks.get(id); }),
                           {"column 'status'", "'paused'", "task status", "valid: pending, running, finished, failed, cancelled"}));
  EXPECT_THROW(tasks.list(), store::BadStateError);
}

TEST_P(FlowRecords, AStreamControllerRoundTripsThroughTheDatabaseAndJson) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  flow::Controllers controllers(tasks);
  controllers.create({.name = "retrain", .dataset = "points", .min_samples = 10, .min_fraction = 0.5, .kind = "train",
                      .hyper_parameters = R"({"lr": 0.1})", .priority = 2, .output_model = "model"});
  controllers.create({.name = "two-stage", .dataset = "points", .min_samples = 5,
                      .plan = {.name = "cnn then rnn",
                               .tasks = {{.name = "cnn", .kind = "train_cnn"}, {.name = "rnn", .kind = "train_rnn", .depends_on = {"cnn"}}}}});
  // its columns: the spec's, flat, then its progress (the pending counts are computed, not stored)
  EXPECT_EQ(store::column_list<flow::ControllerInfo>(),
            "name, dataset, query, min_samples, min_fraction, max_wait_ms, kind, hyper_parameters, priority, max_attempts, "
            "timeout_ms, lease_ms, output_model, plan, batches, samples, created_ms");

  // the JSON `loom controllers ... --json` prints: one flat object, the key set it always had
  const ordered_json j = store::record_json<ordered_json>(controllers.get("retrain"));
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"name", "dataset", "query", "min_samples", "min_fraction", "max_wait_ms", "kind",
                                            "hyper_parameters", "priority", "max_attempts", "timeout_ms", "lease_ms", "output_model",
                                            "plan", "batches", "samples", "pending_versions", "pending_samples", "created_ms"}));
  EXPECT_EQ(j["hyper_parameters"]["lr"], 0.1);
  EXPECT_EQ(j["query"], "");  // NULL: none
  EXPECT_TRUE(j["plan"].is_null());
  EXPECT_EQ(j["min_fraction"], 0.5);
  const flow::ControllerInfo back = store::record_from_json<flow::ControllerInfo>(j, "controller");
  EXPECT_EQ(store::record_json<ordered_json>(back).dump(), j.dump());
  EXPECT_TRUE(back.spec.plan.tasks.empty());

  const flow::ControllerInfo staged = controllers.get("two-stage");
  ASSERT_EQ(staged.spec.plan.tasks.size(), 2u);
  EXPECT_EQ(staged.spec.plan.tasks[1].depends_on, std::vector<std::string>{"cnn"});
  const ordered_json p = store::record_json<ordered_json>(staged);
  EXPECT_EQ(p["plan"]["name"], "cnn then rnn");
  EXPECT_EQ(p["plan"]["tasks"][1]["name"], "rnn");
  EXPECT_EQ(store::record_from_json<flow::ControllerInfo>(p, "controller").spec.plan.tasks.at(0).kind, "train_cnn");

  // a row whose plan is not one: a StoreError naming the controller and the column
  raw_sql(url(), "UPDATE stream_controllers SET plan = '{\"tasks\": 3}' WHERE name = 'two-stage'");
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { controllers.get("two-stage"); }),
                           {"stream controller 'two-stage'", "column 'plan'"}));
}

TEST_P(FlowRecords, ATaskEventRoundTripsThroughTheDatabaseAndJson) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  const int64_t id = tasks.submit("k", "{}", {.max_attempts = 1});
  tasks.fail(*tasks.claim({"k"}, "agent"), "out of memory");
  EXPECT_EQ(store::column_list<flow::TaskEvent>(), "id, task_id, plan_id, event, detail, created_ms");
  const std::vector<flow::TaskEvent> events = flow::read_events(tasks, 0);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].task_id, id);
  EXPECT_EQ(events[0].kind, flow::EventKind::Failed);

  // the JSON `loom tasks events --json` prints: the key set it always had, the kind by its spelling
  const ordered_json j = store::record_json<ordered_json>(events[0]);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"id", "task_id", "plan_id", "event", "detail", "created_ms"}));
  EXPECT_EQ(j["event"], "failed");
  EXPECT_EQ(j["detail"], "out of memory");
  EXPECT_EQ(j["plan_id"], 0);  // NULL: in no plan
  EXPECT_EQ(store::record_json<ordered_json>(store::record_from_json<flow::TaskEvent>(j, "event")).dump(), j.dump());
  EXPECT_EQ(store::state_names<flow::EventKind>(), (std::vector<std::string>{"finished", "failed", "cancelled", "replayed"}));
  EXPECT_STREQ(flow::event_name(flow::EventKind::Cancelled), "cancelled");

  // a stored event that is no spelling: the table's CHECK refuses one, so only a database written
  // around it holds one (SQLite can be told to skip the check; PostgreSQL cannot)
  if (loom_test::is_pg_url(url())) return;
  raw_sql(url(), "PRAGMA ignore_check_constraints = ON; UPDATE task_events SET event = 'exploded'");
  EXPECT_TRUE(contains_all(error_message<store::BadStateError>([&] { flow::read_events(tasks, 0); }),
                           {"column 'event'", "'exploded'", "task event", "valid: finished, failed, cancelled, replayed"}));
}

TEST_P(FlowRecords, ATrialReportRoundTripsThroughTheDatabaseAndJson) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  flow::Reports reports(fs.store);
  const int64_t id = tasks.submit("k");
  const std::optional<flow::Claim> claim = tasks.claim({"k"}, "agent");
  ASSERT_TRUE(claim);
  reports.report(*claim, 2, 0.25);
  reports.report(*claim, 1, 0.5);
  EXPECT_EQ(store::column_list<flow::Report>(), "task_id, step, value, token, created_ms");
  const std::vector<flow::Report> got = reports.list(id);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].step, 1);  // in step order
  EXPECT_EQ(got[1].value, 0.25);
  EXPECT_EQ(got[1].token, claim->token);
  const ordered_json j = store::record_json<ordered_json>(got[1]);
  EXPECT_EQ(j, ordered_json({{"task_id", id}, {"step", 2}, {"value", 0.25}, {"token", claim->token}, {"created_ms", got[1].created_ms}}));
  EXPECT_EQ(store::record_json<ordered_json>(store::record_from_json<flow::Report>(j, "report")).dump(), j.dump());
}

TEST_P(FlowRecords, AStreamBatchRoundTripsThroughTheDatabaseAndJson) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  flow::Controllers controllers(tasks);
  controllers.create({.name = "retrain", .dataset = "points", .min_samples = 2, .kind = "train"});
  for (int v = 0; v < 2; ++v) {
    store::DatasetWriter w = fs.store.datasets().create("points", {.fields = {"x"}});
    w.append({.tensors = {{"x", ones({2})}}});
    w.append({.tensors = {{"x", ones({2})}}});
    w.commit();
  }
  ASSERT_TRUE(controllers.step("retrain"));
  // its columns of stream_batches: the versions are another table's rows
  EXPECT_EQ(store::column_list<flow::BatchInfo>(), "batch, samples, task_id, plan_id, created_ms");
  const std::vector<flow::BatchInfo> batches = controllers.batches("retrain");
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].controller, "retrain");
  EXPECT_EQ(batches[0].versions, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(batches[0].plan_id, 0);  // NULL: a task's batch

  // the JSON of `loom controllers show --json`'s batch_list: the key set it always had
  const ordered_json j = store::record_json<ordered_json>(batches[0]);
  EXPECT_EQ(keys_of(j), field_names(batches[0]));
  EXPECT_EQ(keys_of(j), (std::vector<std::string>{"batch", "versions", "samples", "task_id", "plan_id", "created_ms"}));
  EXPECT_EQ(j["versions"], ordered_json({1, 2}));
  EXPECT_EQ(j["samples"], 4);
  EXPECT_EQ(store::record_json<ordered_json>(store::record_from_json<flow::BatchInfo>(j, "batch")).dump(), j.dump());
}

TEST_P(FlowRecords, APlanRoundTripsThroughTheDatabaseAndJson) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  flow::Plans plans(tasks);
  const int64_t id =
      plans.submit({.name = "cv", .tasks = {{.name = "fold", .kind = "train"}, {.name = "mean", .kind = "mean", .depends_on = {"fold"}}}});
  tasks.finish(*tasks.claim({"train"}, "agent"), R"({"accuracy": 0.5})");
  EXPECT_EQ(store::column_list<flow::PlanInfo>(), "id, name, created_ms");  // the status is its tasks'
  const flow::PlanInfo p = plans.get(id);
  EXPECT_EQ(p.name, "cv");
  EXPECT_EQ(p.status, flow::Status::Pending);

  // one key set: the record's fields, each task its TaskInfo's JSON
  const ordered_json j = store::record_json<ordered_json>(p);
  EXPECT_EQ(keys_of(j), field_names(p));
  EXPECT_EQ(keys_of(j), (std::vector<std::string>{"id", "name", "status", "created_ms", "tasks"}));
  EXPECT_EQ(j["status"], "pending");
  ASSERT_EQ(j["tasks"].size(), 2u);
  EXPECT_EQ(j["tasks"][0].dump(), store::record_json<ordered_json>(tasks.get(p.task_id("fold"))).dump());
  EXPECT_EQ(j["tasks"][0]["result"]["accuracy"], 0.5);
  const flow::PlanInfo back = store::record_from_json<flow::PlanInfo>(nlohmann::json::parse(j.dump()), "plan");
  EXPECT_EQ(store::record_json<ordered_json>(back).dump(), j.dump());
  EXPECT_EQ(back.task_id("mean"), p.task_id("mean"));
}

TEST_P(FlowRecords, ASearchAndItsTrialsRoundTripThroughTheDatabaseAndJson) {
  FreshStore fs(url());
  flow::Tasks tasks(fs.store);
  flow::SearchSpace space;
  space.categorical("q", {"0", "1"});
  flow::GridSampler grid;
  flow::SearchInfo done;
  std::thread driver([&] {
    done = flow::search(tasks, space, grid,
                        {.kind = "trial", .metric = "accuracy", .mode = flow::Mode::Maximize, .n_trials = 2, .max_concurrent_trials = 2,
                         .asha = flow::Asha{.min_resource = 1, .max_resource = 4, .reduction_factor = 2},
                         .task_options = {.max_attempts = 1}, .poll_ms = 5});
  });
  int ended = 0;
  while (ended < 2) {
    if (auto claim = tasks.claim({"trial"}, "agent")) {
      if (nlohmann::json::parse(claim->hyper_parameters)["q"] == 0) tasks.finish(*claim, R"({"accuracy": 0.75})");
      else tasks.fail(*claim, "diverged");
      ++ended;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  driver.join();
  // its columns of searches (ASHA's read beside them); the trials are other tables' rows
  EXPECT_EQ(store::column_list<flow::SearchInfo>(), "id, name, kind, sampler, metric, mode, created_ms");
  EXPECT_EQ(store::column_list<flow::Asha>(), "min_resource, max_resource, reduction_factor");
  const flow::SearchInfo s = flow::get_search(tasks, done.id);
  EXPECT_EQ(s.mode, flow::Mode::Maximize);
  ASSERT_TRUE(s.asha);
  EXPECT_EQ(s.asha->max_resource, 4);
  ASSERT_EQ(s.trials.size(), 2u);
  EXPECT_EQ(s.trials[0].state, flow::TrialState::Completed);
  ASSERT_TRUE(s.trials[0].value);
  EXPECT_EQ(*s.trials[0].value, 0.75);
  EXPECT_EQ(nlohmann::json::parse(s.trials[0].result)["accuracy"], 0.75);  // the task's, not a key of the trial's JSON
  EXPECT_EQ(s.trials[1].state, flow::TrialState::Failed);
  EXPECT_EQ(s.trials[1].error, "diverged");

  // one key set each: the search's fields and its trials' (the key sets `loom searches show
  // --json` always printed, around which it adds best_trial and total_steps)
  const ordered_json j = store::record_json<ordered_json>(s);
  EXPECT_EQ(keys_of(j), field_names(s));
  EXPECT_EQ(keys_of(j), (std::vector<std::string>{"id", "name", "kind", "sampler", "metric", "mode", "asha", "created_ms", "trials"}));
  EXPECT_EQ(j["mode"], "max");
  EXPECT_EQ(j["asha"], ordered_json({{"min_resource", 1}, {"max_resource", 4}, {"reduction_factor", 2}}));
  EXPECT_EQ(keys_of(j["trials"][0]), field_names(s.trials[0]));
  EXPECT_EQ(keys_of(j["trials"][0]), (std::vector<std::string>{"number", "task_id", "state", "value", "steps", "params", "error"}));
  EXPECT_EQ(j["trials"][0]["params"], ordered_json({{"q", 0}}));
  EXPECT_EQ(j["trials"][0]["state"], "completed");
  EXPECT_EQ(j["trials"][1]["state"], "failed");
  EXPECT_TRUE(j["trials"][1]["value"].is_null());
  const flow::SearchInfo back = store::record_from_json<flow::SearchInfo>(nlohmann::json::parse(j.dump()), "search");
  EXPECT_EQ(store::record_json<ordered_json>(back).dump(), j.dump());
  ASSERT_TRUE(back.trials[0].value);
  EXPECT_EQ(*back.trials[0].value, 0.75);

  // a search without ASHA: null, and back
  flow::SearchInfo plain = s;
  plain.asha.reset();
  const ordered_json p = store::record_json<ordered_json>(plain);
  EXPECT_TRUE(p["asha"].is_null());
  EXPECT_FALSE(store::record_from_json<flow::SearchInfo>(p, "search").asha.has_value());
  EXPECT_EQ(store::state_names<flow::TrialState>(),
            (std::vector<std::string>{"pending", "running", "completed", "stopped", "failed", "cancelled"}));
  EXPECT_STREQ(flow::trial_state_name(flow::TrialState::Stopped), "stopped");
}
