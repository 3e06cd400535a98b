// Lineage (docs/workflow.md, "Lineage"): a task's input dataset and model and its outputs are
// checked at submission and carried by its info and claims; a model or dataset version records
// the task and run that produced it. On SQLite and PostgreSQL.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/flow/agent.h>
#include <loom/flow/plans.h>
#include <loom/flow/tasks.h>
#include <loom/ops/creation.h>
#include <loom/store/datasets.h>
#include <loom/store/model_registry.h>
#include <loom/store/runs.h>
#include <loom/store/error.h>
#include <loom/store/store.h>

#include "unit/flow/flow_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::FreshStore;

class FlowLineage : public loom_test::FlowBackendTest {};
INSTANTIATE_STORE_BACKENDS(FlowLineage);

namespace {

Graph tiny_graph() { return loom_test::small_mlp(1); }

}  // namespace

TEST_P(FlowLineage, TasksCarryTheirLineageAndVersionsRecordTheirProducer) {
  FreshStore fs(url());
  store::DatasetWriter w = fs.store.datasets().create("images", {.fields = {"x"}});
  w.append({.tensors = {{"x", ones({4})}}});
  w.commit();
  fs.store.models().save("features", tiny_graph());
  flow::Tasks tasks(fs.store);

  const flow::Lineage lineage{.input_dataset = "images", .input_dataset_version = 1, .input_dataset_query = "label < 5",
                              .input_model = "features", .input_model_version = 1, .output_model = "head"};
  const int64_t id = tasks.submit("train", "{}", {.lineage = lineage});
  const flow::TaskInfo info = tasks.get(id);
  EXPECT_EQ(info.lineage.input_dataset, "images");
  EXPECT_EQ(info.lineage.input_dataset_version, 1);
  EXPECT_EQ(info.lineage.input_dataset_query, "label < 5");
  EXPECT_EQ(info.lineage.input_model_version, 1);
  EXPECT_EQ(info.lineage.output_model, "head");
  EXPECT_EQ(info.lineage.output_dataset, "");

  // an agent saves its output with the task and run that produced it
  flow::Agent agent(tasks, "a");
  int64_t run_id = 0;
  agent.register_kind("train", [&](const std::string&, flow::TaskContext& ctx) {
    EXPECT_EQ(ctx.claim().lineage.input_model, "features");
    run_id = fs.store.runs().start("lineage").id;
    const store::ModelInfo v = fs.store.models().save(ctx.claim().lineage.output_model, tiny_graph(), {}, "{}", {}, ctx.produced_by(run_id));
    return "{\"version\": " + std::to_string(v.version) + "}";
  });
  EXPECT_EQ(agent.run({.stop_when_idle = true}), 1);
  const store::ModelInfo head = fs.store.models().get("head", 1);
  EXPECT_EQ(head.produced_by.task_id, id);
  EXPECT_EQ(head.produced_by.run_id, run_id);
  EXPECT_EQ(fs.store.models().get("features", 1).produced_by.task_id, 0);

  store::DatasetWriter out = fs.store.datasets().create("scores", {.fields = {"x"}, .produced_by = {.task_id = id, .run_id = run_id}});
  out.append({.tensors = {{"x", ones({1})}}});
  EXPECT_EQ(out.commit().produced_by.task_id, id);
  EXPECT_EQ(fs.store.datasets().get("scores", 1).produced_by.run_id, run_id);

  // a producer that is not there, or not an id
  EXPECT_THROW(fs.store.models().save("head", tiny_graph(), {}, "{}", {}, {.run_id = run_id + 100}), store::NotFoundError);
  EXPECT_THROW(fs.store.models().save("head", tiny_graph(), {}, "{}", {}, {.task_id = -1}), ValueError);
  EXPECT_THROW(fs.store.datasets().create("scores", {.produced_by = {.run_id = run_id + 100}}), store::NotFoundError);
  EXPECT_EQ(fs.store.models().versions("head").size(), 1u);
}

TEST_P(FlowLineage, BadLineageWritesNothing) {
  FreshStore fs(url());
  fs.store.models().save("features", tiny_graph());
  flow::Tasks tasks(fs.store);
  EXPECT_TRUE(contains_all(error_message<store::NotFoundError>([&] {
                             tasks.submit("k", "{}", {.lineage = {.input_model = "features", .input_model_version = 7}});
                           }),
                           {"features", "7"}));
  EXPECT_THROW(tasks.submit("k", "{}", {.lineage = {.input_dataset = "images", .input_dataset_version = 2}}), store::NotFoundError);
  EXPECT_THROW(tasks.submit("k", "{}", {.lineage = {.input_model = "features", .input_model_version = -1}}), ValueError);
  EXPECT_THROW(tasks.submit("k", "{}", {.lineage = {.input_dataset_version = 3}}), ValueError);
  EXPECT_THROW(tasks.submit("k", "{}", {.lineage = {.input_dataset_query = "x > 1"}}), ValueError);
  EXPECT_THROW(tasks.submit("k", "{}", {.lineage = {.output_model = std::string("bad\x01name")}}), ValueError);
  flow::Plans plans(tasks);
  EXPECT_THROW(plans.submit({.name = "p", .tasks = {{.name = "a", .kind = "k"},
                                                    {.name = "b", .kind = "k", .options = {.lineage = {.output_dataset = std::string("\x7f")}}}}}),
               ValueError);
  EXPECT_TRUE(tasks.list().empty());
  // unpinned inputs may not exist yet: a dependency may produce them
  const int64_t id = tasks.submit("k", "{}", {.lineage = {.input_model = "made-upstream"}});
  EXPECT_EQ(tasks.get(id).lineage.input_model, "made-upstream");
  EXPECT_EQ(tasks.get(id).lineage.input_model_version, 0);
}
