// The `loom` command line (tools/cli, docs/cli.md) on stores of both backends, run as a child
// process: tables, --json, exit codes and messages; tasks, plans and searches submitted,
// cancelled and run by `loom agent`; `loom serve` ending on SIGTERM.
#include <loom/core/tensor.h>
#include <loom/flow/agent.h>
#include <loom/flow/plans.h>
#include <loom/flow/search.h>
#include <loom/flow/tasks.h>
#include <loom/graph/graph.h>
#include <loom/ops/creation.h>
#include <loom/store/datasets.h>
#include <loom/store/model_registry.h>
#include <loom/store/runs.h>
#include <loom/store/store.h>

#include <cctype>

#include "unit/serve/raw_http.h"
#include "unit/tools/cli_runner.h"

using namespace loom;
using namespace loom_test;
using nlohmann::json;

class CliStore : public loom_test::StoreBackendTest {};

TEST_P(CliStore, ModelsListShowTopAndAliases) {
  const std::string u = url();
  {
    store::Store s = store::Store::open(u);
    s.models().save("mlp", loom_test::small_mlp(1), {{"accuracy", 0.8}}, R"({"lr": 0.1})", {"a"});
    s.models().save("mlp", loom_test::small_mlp(2), {{"accuracy", 0.9}, {"loss", 0.25}}, R"({"lr": 0.01})", {"a", "b"});
    s.models().save("other-model", loom_test::small_mlp(3), {{"accuracy", 0.5}});
    s.models().set_alias("mlp", "production", 1);
  }
  Cli loom(tmp.dir.string());

  CliResult r = loom({"models", "list", "--store", u});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(lines(r.out).size(), 4u) << r.out;
  EXPECT_EQ(lines(r.out)[0].rfind("NAME", 0), 0u) << r.out;
  for (const char* column : {"VERSION", "CREATED", "METRICS", "TAGS"}) expect_aligned(r.out, column);
  const auto mlp = rows_starting(r.out, "mlp");
  ASSERT_EQ(mlp.size(), 2u) << r.out;
  EXPECT_TRUE(contains(mlp[0], "accuracy=0.8") && contains(mlp[0], "production")) << mlp[0];
  EXPECT_TRUE(contains(mlp[1], "accuracy=0.9 loss=0.25") && contains(mlp[1], "a,b")) << mlp[1];

  // --json before the command too; filters by tag and metric
  json j = parse(loom({"--json", "--store", u, "models", "list", "--tag", "b"}));
  ASSERT_EQ(j.size(), 1u) << j;
  EXPECT_EQ(j[0]["name"], "mlp");
  EXPECT_EQ(j[0]["version"], 2);
  EXPECT_EQ(j[0]["metrics"]["accuracy"], 0.9);
  EXPECT_EQ(j[0]["hyper_parameters"]["lr"], 0.01);
  EXPECT_EQ(j[0]["tags"], json({"a", "b"}));
  j = parse(loom({"models", "list", "--store", u, "--json", "--where", "accuracy >= 0.6"}));
  ASSERT_EQ(j.size(), 2u) << j;
  j = parse(loom({"models", "--json", "list", "--store", u, "--name", "other-model"}));
  ASSERT_EQ(j.size(), 1u) << j;
  EXPECT_EQ(j[0]["name"], "other-model");

  EXPECT_EQ(parse(loom({"models", "show", "mlp@production", "--store", u, "--json"}))["version"], 1);
  EXPECT_EQ(parse(loom({"models", "show", "mlp:2", "--store", u, "--json"}))["version"], 2);
  EXPECT_EQ(parse(loom({"models", "show", "mlp", "--store", u, "--json"}))["version"], 2);
  r = loom({"models", "show", "mlp:1", "--store", u});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(rows_starting(r.out, "version:").at(0).substr(rows_starting(r.out, "version:").at(0).find_last_of(' ')), " 1") << r.out;
  EXPECT_TRUE(contains(r.out, R"({"lr":0.1})")) << r.out;

  j = parse(loom({"models", "top", "--metric", "accuracy", "-n", "2", "--store", u, "--json"}));
  ASSERT_EQ(j.size(), 2u) << j;
  EXPECT_EQ(j[0]["version"], 2);
  EXPECT_EQ(j[1]["version"], 1);
  j = parse(loom({"models", "top", "--metric", "accuracy", "--min", "--store", u, "--json"}));
  ASSERT_EQ(j.size(), 1u) << j;
  EXPECT_EQ(j[0]["name"], "other-model");
  j = parse(loom({"models", "top", "mlp", "--metric", "accuracy", "--min", "--store", u, "--json"}));
  EXPECT_EQ(j[0]["version"], 1) << j;

  // aliases set and deleted through the command line, seen by the library
  ASSERT_EQ(loom({"models", "alias", "set", "mlp", "best", "2", "--store", u}).code, 0);
  EXPECT_EQ(store::Store::open(u).models().get("mlp", "best").version, 2);
  r = loom({"models", "alias", "set", "mlp", "production", "2", "--store", u});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("loom: error: ", 0), 0u) << r.err;
  EXPECT_TRUE(contains(r.err, "'production'") && contains(r.err, "--replace")) << r.err;
  ASSERT_EQ(loom({"models", "alias", "set", "mlp", "production", "2", "--replace", "--store", u}).code, 0);
  EXPECT_EQ(parse(loom({"models", "show", "mlp@production", "--store", u, "--json"}))["version"], 2);
  ASSERT_EQ(loom({"models", "alias", "delete", "mlp", "best", "--store", u}).code, 0);

  // not found: exit code 3 and the library's message naming what was asked
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"models", "show", "nosuch"}, {"models", "show", "mlp@best"}, {"models", "show", "mlp:7"}}) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--store", u});
    r = loom(a);
    EXPECT_EQ(r.code, 3) << args[2] << ": " << r.err;
    EXPECT_EQ(r.err.rfind("loom: error: ", 0), 0u) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  EXPECT_TRUE(contains(loom({"models", "show", "nosuch", "--store", u}).err, "nosuch"));

  // usage errors: exit code 2, naming what is valid
  r = loom({"models", "top", "--store", u});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "missing --metric")) << r.err;
  r = loom({"models", "list", "--where", "accuracy ~ 3", "--store", u});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "< <= == != >= >")) << r.err;
  r = loom({"models", "top", "--metric", "accuracy", "-n", "zero", "--store", u});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "-n must be an integer, not 'zero'")) << r.err;
}

TEST_P(CliStore, DatasetsAndRuns) {
  const std::string u = url();
  int64_t run1 = 0, run2 = 0;
  {
    store::Store s = store::Store::open(u);
    store::DatasetWriter w = s.datasets().create("points", {.fields = {"x", "y"}, .tags = {"toy"}});
    for (int i = 0; i < 3; ++i) w.append({.tensors = {{"x", zeros({2}, Float32)}, {"y", zeros({}, Int64)}}});
    w.commit();
    run1 = s.runs().start("exp", "first", R"({"lr": 0.5})", {"t"}).id;
    s.runs().log_epoch(run1, 0, {{"loss", 2.0}});
    s.runs().log_epoch(run1, 1, {{"loss", 1.5}});
    s.runs().finish(run1);
    run2 = s.runs().start("exp", "second").id;
    s.runs().log_epoch(run2, 0, {{"loss", 1.0}});
  }
  Cli loom(tmp.dir.string());

  json j = parse(loom({"datasets", "list", "--store", u, "--json"}));
  ASSERT_EQ(j.size(), 1u) << j;
  EXPECT_EQ(j[0]["name"], "points");
  EXPECT_EQ(j[0]["samples"], 3);
  EXPECT_EQ(j[0]["fields"][0]["name"], "x");
  EXPECT_EQ(j[0]["fields"][0]["dtype"], "float32");
  EXPECT_EQ(j[0]["fields"][0]["shape"], json({2}));
  EXPECT_EQ(j[0]["tags"], json({"toy"}));
  CliResult r = loom({"datasets", "show", "points:1", "--store", u});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(rows_starting(r.out, "x").size(), 1u) << r.out;
  EXPECT_TRUE(contains(rows_starting(r.out, "x")[0], "float32")) << r.out;
  EXPECT_EQ(loom({"datasets", "show", "points:2", "--store", u}).code, 3);
  EXPECT_EQ(parse(loom({"datasets", "list", "--tag", "other", "--store", u, "--json"})).size(), 0u);

  r = loom({"runs", "list", "--store", u});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(rows_starting(r.out, std::to_string(run1)).size(), 1u) << r.out;
  EXPECT_TRUE(contains(rows_starting(r.out, std::to_string(run1))[0], "finished")) << r.out;
  EXPECT_TRUE(contains(rows_starting(r.out, std::to_string(run1))[0], "loss=1.5")) << r.out;
  j = parse(loom({"runs", "list", "--status", "running", "--store", u, "--json"}));
  ASSERT_EQ(j.size(), 1u) << j;
  EXPECT_EQ(j[0]["id"], run2);
  r = loom({"runs", "list", "--status", "done", "--store", u});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "running, finished, failed")) << r.err;

  j = parse(loom({"runs", "show", std::to_string(run1), "--store", u, "--json"}));
  EXPECT_EQ(j["metrics"]["loss"]["values"], json({2.0, 1.5}));
  EXPECT_EQ(j["hyper_parameters"]["lr"], 0.5);
  r = loom({"runs", "show", std::to_string(run1), "--store", u});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(rows_starting(r.out, "1").size(), 1u) << r.out;  // epoch 1's row of the curve
  EXPECT_TRUE(contains(r.out, "EPOCH  loss")) << r.out;
  EXPECT_EQ(loom({"runs", "show", "12345", "--store", u}).code, 3);

  j = parse(loom({"runs", "top", "--metric", "loss", "--at", "min", "--store", u, "--json"}));
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["id"], run2);
  r = loom({"runs", "compare", std::to_string(run1), std::to_string(run2), "--metric", "loss", "--store", u});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(lines(r.out)[0], std::to_string(run1) + ":loss")) << r.out;
  EXPECT_EQ(lines(r.out).size(), 3u) << r.out;  // header, epochs 0 and 1

  // a name that is not UTF-8 (Latin-1 "café"): the store refuses it, but a SQLite store written
  // before that rule may hold one, and --json shows it with U+FFFD instead of failing
  EXPECT_THROW(store::Store::open(u).runs().start("caf\xe9"), ValueError);
  if (!pg()) {
    const int64_t id = store::Store::open(u).runs().start("cafe").id;
    loom_test::raw_sql(u, "UPDATE runs SET experiment = CAST(X'636166E9' AS TEXT) WHERE id = " + std::to_string(id));
    j = parse(loom({"runs", "list", "--experiment", "caf\xe9", "--store", u, "--json"}));
    ASSERT_EQ(j.size(), 1u) << j;
    EXPECT_EQ(j[0]["experiment"], "caf\xef\xbf\xbd");
  }
}

// Named queries and stream controllers (docs/cli.md): created, listed, shown, run and deleted;
// typed errors as exit codes.
TEST_P(CliStore, QueriesAndControllers) {
  const std::string u = url();
  const auto push = [&](int n) {
    store::Store s = store::Store::open(u);
    store::DatasetWriter w = s.datasets().create("points", {.fields = {"x"}});
    for (int i = 0; i < n; ++i) w.append({.tensors = {{"x", zeros({2}, Float32)}}, .metadata = "{\"label\": " + std::to_string(i % 2) + "}"});
    w.commit();
  };
  push(4);
  Cli loom(tmp.dir.string());
  CliResult r = loom({"queries", "create", "ones", "--dataset", "points", "--where", "label == 1", "--store", u});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(loom({"queries", "create", "ones", "--dataset", "points", "--store", u}).code, 1) << "a name taken";
  EXPECT_EQ(loom({"queries", "create", "x", "--dataset", "nope", "--store", u}).code, 3) << "an unknown dataset";
  EXPECT_EQ(loom({"queries", "create", "x", "--dataset", "points", "--where", "label =~ 1", "--store", u}).code, 2);
  EXPECT_EQ(loom({"queries", "create", "x", "--dataset", "points", "--where", "label < 'a'", "--store", u}).code, 1);
  json j = parse(loom({"queries", "show", "ones", "--store", u, "--json"}));
  EXPECT_EQ(j["dataset"], "points");
  EXPECT_EQ(j["samples_now"], 2);
  EXPECT_EQ(j["query"]["where"][0]["op"], "==");
  r = loom({"queries", "list", "--store", u});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(rows_starting(r.out, "ones").size(), 1u) << r.out;
  EXPECT_TRUE(contains(rows_starting(r.out, "ones")[0], "label == 1")) << r.out;

  r = loom({"controllers", "create", "c", "--query", "ones", "--kind", "train", "--min-samples", "3", "--store", u});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(loom({"controllers", "create", "d", "--query", "nope", "--kind", "train", "--store", u}).code, 3);
  j = parse(loom({"controllers", "run", "c", "--once", "--store", u, "--json"}));
  EXPECT_EQ(j["submitted"], 0) << "2 of 3 selected samples";
  push(2);
  r = loom({"controllers", "run", "c", "--once", "--store", u});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "batch 1: versions 1,2, 3 samples")) << r.out;
  j = parse(loom({"controllers", "show", "c", "--store", u, "--json"}));
  EXPECT_EQ(j["batches"], 1);
  ASSERT_EQ(j["batch_list"].size(), 1u) << j;
  EXPECT_EQ(j["batch_list"][0]["versions"], json({1, 2}));
  EXPECT_EQ(keys_of(j["batch_list"][0]), (std::vector<std::string>{"batch", "created_ms", "plan_id", "samples", "task_id", "versions"}));
  j = parse(loom({"tasks", "show", std::to_string(j["batch_list"][0]["task_id"].get<int64_t>()), "--store", u, "--json"}));
  EXPECT_EQ(j["kind"], "train");
  EXPECT_EQ(j["hyper_parameters"]["stream"]["versions"], json({1, 2}));
  r = loom({"controllers", "list", "--store", u});
  ASSERT_EQ(rows_starting(r.out, "c").size(), 1u) << r.out;
  EXPECT_TRUE(contains(rows_starting(r.out, "c")[0], "3 samples")) << r.out;
  EXPECT_EQ(loom({"controllers", "delete", "c", "--store", u}).code, 0);
  EXPECT_EQ(loom({"controllers", "show", "c", "--store", u}).code, 3);

  // A controller submitting a plan per batch: the file 'loom plans submit' reads.
  const std::string plan_file = (tmp.dir / "two-stage.json").string();
  std::ofstream(plan_file) << R"({"name": "two stages", "tasks": [{"name": "cnn", "kind": "train", "lineage": {"output_model": "cnn"}},
      {"name": "rnn", "kind": "decode", "depends_on": ["cnn"], "lineage": {"input_model": "cnn"}}]})";
  EXPECT_EQ(loom({"controllers", "create", "p", "--dataset", "points", "--kind", "t", "--plan", plan_file, "--store", u}).code, 2)
      << "--kind and --plan";
  r = loom({"controllers", "create", "p", "--dataset", "points", "--plan", (tmp.dir / "none.json").string(), "--store", u});
  EXPECT_EQ(r.code, 3) << r.err;
  r = loom({"controllers", "create", "p", "--dataset", "points", "--plan", plan_file, "--store", u});
  ASSERT_EQ(r.code, 0) << r.err;
  r = loom({"controllers", "run", "p", "--once", "--store", u});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "batch 1: versions 1,2, 6 samples -> plan 1")) << r.out;
  j = parse(loom({"controllers", "show", "p", "--store", u, "--json"}));
  EXPECT_EQ(j["plan"]["tasks"][1]["depends_on"], json({"cnn"}));
  EXPECT_EQ(j["batch_list"][0]["plan_id"], 1);
  j = parse(loom({"plans", "show", "1", "--store", u, "--json"}));
  EXPECT_EQ(j["name"], "two stages: batch 1");
  ASSERT_EQ(j["tasks"].size(), 2u) << j;
  EXPECT_EQ(j["tasks"][1]["hyper_parameters"]["stream"]["versions"], json({1, 2}));
  r = loom({"controllers", "list", "--store", u});
  ASSERT_EQ(rows_starting(r.out, "p").size(), 1u) << r.out;
  EXPECT_TRUE(contains(rows_starting(r.out, "p")[0], "plan 'two stages'")) << r.out;
  EXPECT_EQ(loom({"controllers", "delete", "p", "--store", u}).code, 0);
  EXPECT_EQ(loom({"queries", "delete", "ones", "--store", u}).code, 0);
  EXPECT_EQ(parse(loom({"queries", "list", "--store", u, "--json"})).size(), 0u);
}

TEST_P(CliStore, TasksSubmitListCancel) {
  const std::string u = url();
  store::Store::open(u);  // the command line opens existing stores only
  Cli loom(tmp.dir.string(), u);  // the store from $LOOM_STORE

  CliResult r = loom({"tasks", "submit", "train", "--hyper", R"({"lr": 0.5})", "--priority", "3", "--max-attempts", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  const int64_t id = std::stoll(r.out);
  EXPECT_EQ(r.out, std::to_string(id) + "\n");
  const json submitted = parse(loom({"tasks", "submit", "eval", "--json"}));
  const int64_t eval = submitted["id"];

  json j = parse(loom({"tasks", "list", "--json"}));
  ASSERT_EQ(j.size(), 2u) << j;
  EXPECT_EQ(j[0]["id"], id);
  EXPECT_EQ(j[0]["kind"], "train");
  EXPECT_EQ(j[0]["status"], "pending");
  EXPECT_EQ(j[0]["priority"], 3);
  EXPECT_EQ(j[0]["max_attempts"], 2);
  EXPECT_EQ(j[0]["hyper_parameters"]["lr"], 0.5);
  EXPECT_EQ(j[1]["id"], eval);
  EXPECT_EQ(parse(loom({"tasks", "list", "--kind", "eval", "--json"})).size(), 1u);
  EXPECT_EQ(parse(loom({"tasks", "list", "--limit", "1", "--json"})).size(), 1u);
  r = loom({"tasks", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(rows_starting(r.out, std::to_string(id)).size(), 1u) << r.out;
  EXPECT_TRUE(contains(rows_starting(r.out, std::to_string(id))[0], "train")) << r.out;
  expect_aligned(r.out, "STATUS");

  r = loom({"tasks", "cancel", std::to_string(id)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "cancelled task " + std::to_string(id) + "\n");
  EXPECT_EQ(flow::Tasks(store::Store::open(u)).get(id).status, flow::Status::Cancelled);
  j = parse(loom({"tasks", "cancel", std::to_string(id), "--json"}));
  EXPECT_EQ(j["cancelled"], false);
  EXPECT_EQ(j["status"], "cancelled");
  EXPECT_EQ(parse(loom({"tasks", "show", std::to_string(id), "--json"}))["status"], "cancelled");
  j = parse(loom({"tasks", "list", "--status", "pending", "--json"}));
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["id"], eval);

  // errors: malformed JSON (the library's ValueError, exit 1), unknown status and bad
  // integers (the command line, exit 2), an unknown task (exit 3); nothing submitted
  r = loom({"tasks", "submit", "train", "--hyper", R"({"lr": )"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind("loom: error: ", 0), 0u) << r.err;
  EXPECT_TRUE(contains(r.err, "JSON")) << r.err;
  r = loom({"tasks", "submit", "train", "--hyper", "[1]"});
  EXPECT_EQ(r.code, 1) << r.err;
  r = loom({"tasks", "list", "--status", "done"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "pending, running, finished, failed, cancelled")) << r.err;
  r = loom({"tasks", "submit", "train", "--priority", "high"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "--priority must be an integer, not 'high'")) << r.err;
  r = loom({"tasks", "show", "999999"});
  EXPECT_EQ(r.code, 3);
  EXPECT_TRUE(contains(r.err, "999999")) << r.err;
  EXPECT_EQ(loom({"tasks", "submit"}).code, 2);
  EXPECT_EQ(parse(loom({"tasks", "list", "--json"})).size(), 2u);
}

TEST_P(CliStore, PlansSubmitShowCancelReplayAndEvents) {
  const std::string u = url();
  store::Store::open(u);
  Cli loom(tmp.dir.string(), u);
  const std::string file = (tmp.dir / "plan.json").string();
  std::ofstream(file) << R"({"name": "cv", "tasks": [
      {"name": "fold-0", "kind": "train", "hyper_parameters": {"fold": 0}, "max_attempts": 1},
      {"name": "fold-1", "kind": "train", "hyper_parameters": {"fold": 1}},
      {"name": "mean", "kind": "aggregate", "depends_on": ["fold-0", "fold-1"]}]})";
  CliResult r = loom({"plans", "submit", file, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = parse(r);
  const int64_t plan = j["id"];
  const int64_t fold0 = j["tasks"]["fold-0"], mean = j["tasks"]["mean"];

  j = parse(loom({"plans", "show", std::to_string(plan), "--json"}));
  EXPECT_EQ(keys_of(j), (std::vector<std::string>{"created_ms", "finished", "id", "name", "status", "tasks", "total"}));
  EXPECT_EQ(j["finished"], 0);
  EXPECT_EQ(j["total"], 3);
  EXPECT_EQ(keys_of(parse(loom({"plans", "list", "--json"}))[0]),
            (std::vector<std::string>{"created_ms", "finished", "id", "name", "status", "total"}));
  EXPECT_EQ(j["name"], "cv");
  EXPECT_EQ(j["status"], "pending");
  ASSERT_EQ(j["tasks"].size(), 3u);
  EXPECT_EQ(j["tasks"][2]["depends_on"].size(), 2u);
  EXPECT_EQ(j["tasks"][2]["waiting"], 2);
  r = loom({"plans", "show", std::to_string(plan)});
  EXPECT_TRUE(loom_test::contains_all(r.out, {"cv", "fold-0", "mean", "DEPENDS-ON", "WAITING"})) << r.out;
  r = loom({"plans", "list"});
  EXPECT_TRUE(loom_test::contains_all(r.out, {"cv", "pending", "0/3"})) << r.out;

  // the first fold fails for good: the aggregate is cancelled, saying why
  flow::Tasks tasks(store::Store::open(u));
  auto c = tasks.claim({"train"}, "x");
  ASSERT_EQ(c->task_id, fold0);
  tasks.fail(*c, "diverged");
  j = parse(loom({"tasks", "show", std::to_string(mean), "--json"}));
  EXPECT_EQ(j["status"], "cancelled");
  EXPECT_EQ(j["error"], "dependency " + std::to_string(fold0) + " failed: diverged");
  j = parse(loom({"tasks", "events", "--json"}));
  ASSERT_EQ(j.size(), 2u) << j;
  EXPECT_EQ(j[0]["event"], "failed");
  EXPECT_EQ(j[1]["event"], "cancelled");
  EXPECT_EQ(j[1]["plan_id"], plan);
  EXPECT_EQ(parse(loom({"tasks", "events", "--after", std::to_string(int64_t(j[0]["id"])), "--json"})).size(), 1u);
  EXPECT_EQ(parse(loom({"tasks", "events", "--after", std::to_string(int64_t(j[1]["id"])), "--wait-ms", "10", "--json"})).size(), 0u);

  j = parse(loom({"plans", "replay", std::to_string(plan), "--json"}));
  EXPECT_EQ(j["reopened"], (json{fold0, mean}));
  EXPECT_EQ(parse(loom({"plans", "show", std::to_string(plan), "--json"}))["status"], "pending");
  r = loom({"plans", "cancel", std::to_string(plan)});
  EXPECT_EQ(r.out, "cancelled 3 tasks of plan " + std::to_string(plan) + "\n") << r.err;
  r = loom({"tasks", "replay", std::to_string(mean)});
  EXPECT_EQ(r.code, 1) << "its dependencies were cancelled";
  EXPECT_TRUE(loom_test::contains_all(r.err, {"depends on task", "cancelled"})) << r.err;

  // a task submitted after another
  r = loom({"tasks", "submit", "eval", "--after", std::to_string(fold0)});
  EXPECT_EQ(r.code, 1) << "fold-0 is cancelled: a task after it could never run";
  EXPECT_TRUE(loom_test::contains_all(r.err, {"replay it first"})) << r.err;
  r = loom({"tasks", "submit", "eval", "--after", "99999"});
  EXPECT_EQ(r.code, 3) << r.err;

  // bad plan files: named, nothing written
  std::ofstream(file) << R"({"name": "bad", "tasks": [{"name": "a", "kind": "k", "depends_on": ["b"]},
      {"name": "b", "kind": "k", "depends_on": ["a"]}]})";
  r = loom({"plans", "submit", file});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(loom_test::contains_all(r.err, {"cycle", "'a'", "'b'"})) << r.err;
  std::ofstream(file) << R"({"name": "bad", "tasks": [{"name": "a", "kind": "k", "retries": 3}]})";
  r = loom({"plans", "submit", file});
  EXPECT_TRUE(loom_test::contains_all(r.err, {"tasks[0]", "unknown key \"retries\""})) << r.err;
  std::ofstream(file) << "{";
  EXPECT_TRUE(loom_test::contains_all(loom({"plans", "submit", file}).err, {"not valid JSON"}));
  EXPECT_EQ(loom({"plans", "submit", (tmp.dir / "missing.json").string()}).code, 3);
  EXPECT_EQ(loom({"plans", "show", "999"}).code, 3);
  EXPECT_EQ(parse(loom({"plans", "list", "--json"})).size(), 1u);

  // lineage: given on submit, shown by tasks show; the version a task saves names it in models show
  r = loom({"tasks", "submit", "train", "--input-model", "nosuch:2"});
  EXPECT_EQ(r.code, 3) << "a pinned input that does not exist";
  j = parse(loom({"tasks", "submit", "train", "--input-dataset", "images", "--input-query", "label < 5", "--output-model", "head",
                  "--json"}));
  const int64_t producer = j["id"];
  j = parse(loom({"tasks", "show", std::to_string(producer), "--json"}));
  EXPECT_EQ(j["lineage"]["input_dataset"], "images");
  EXPECT_EQ(j["lineage"]["input_dataset_query"], "label < 5");
  EXPECT_EQ(j["lineage"]["output_model"], "head");
  r = loom({"tasks", "show", std::to_string(producer)});
  EXPECT_TRUE(loom_test::contains_all(r.out, {"images (latest) where label < 5", "head"})) << r.out;
  const int64_t run = store::Store::open(u).runs().start("lineage").id;
  store::Store::open(u).models().save("head", loom_test::small_mlp(1), {}, "{}", {}, {.task_id = producer, .run_id = run});
  r = loom({"models", "show", "head"});
  EXPECT_TRUE(loom_test::contains_all(r.out, {"produced by", "task " + std::to_string(producer) + ", run " + std::to_string(run)}))
      << r.out;
  j = parse(loom({"models", "show", "head", "--json"}));
  EXPECT_EQ(j["produced_by"]["task_id"], producer);
  EXPECT_EQ(j["produced_by"]["run_id"], run);
}

TEST_P(CliStore, AgentRunsCommandKinds) {
  const std::string u = url();
  flow::Tasks tasks(store::Store::open(u));
  const int64_t echo = tasks.submit("echo", R"({"lr": 0.25})");
  const int64_t fixed = tasks.submit("fixed");
  const int64_t other = tasks.submit("other");
  Cli loom(tmp.dir.string());

  json j = parse(loom({"agent", "--store", u, "--command", "echo=/bin/sh -c cat", "--command",
                       R"(fixed=/bin/sh -c 'echo {\"ok\":1}')", "--stop-when-idle", "--json"}));
  EXPECT_EQ(j["tasks"], 2);
  EXPECT_EQ(tasks.get(echo).status, flow::Status::Finished);
  EXPECT_EQ(tasks.get(echo).result, R"({"lr":0.25})");
  EXPECT_EQ(tasks.get(fixed).result, R"({"ok":1})");
  EXPECT_EQ(tasks.get(other).status, flow::Status::Pending);
  EXPECT_EQ(parse(loom({"tasks", "show", std::to_string(fixed), "--store", u, "--json"}))["result"]["ok"], 1);

  // --kinds limits what it claims; --max-tasks how many
  tasks.submit("echo", R"({"n": 1})");
  CliResult r = loom({"agent", "--store", u, "--kinds", "echo", "--command", "echo=cat", "--command", "other=cat",
                      "--max-tasks", "1", "--name", "cli-agent"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "loom agent cli-agent: ran 1 task\n");
  EXPECT_EQ(tasks.get(other).status, flow::Status::Pending);

  r = loom({"agent", "--store", u, "--kinds", "nope", "--command", "echo=cat", "--stop-when-idle"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, "unknown task kind 'nope'")) << r.err;
  r = loom({"agent", "--store", u, "--stop-when-idle"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "missing --command KIND=PROGRAM")) << r.err;
  r = loom({"agent", "--store", u, "--command", "echo=sh -c 'cat"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "unterminated '")) << r.err;
}

TEST_P(CliStore, AgentStopsOnSigterm) {
  const std::string u = url();
  flow::Tasks tasks(store::Store::open(u));
  const int64_t id = tasks.submit("echo", R"({"a": 1})");
  Cli loom(tmp.dir.string());
  const pid_t pid = loom.spawn({"agent", "--store", u, "--command", "echo=cat", "--poll-ms", "50"});
  // the task finished: the agent is in its loop, its handlers installed
  const auto t = tasks.wait({id}, 30000, 20);
  ASSERT_EQ(t[0].status, flow::Status::Finished) << t[0].error;
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  const CliResult r = loom.wait(pid, std::chrono::seconds(20));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, ": ran 1 task\n")) << r.out << r.err << tasks.get(id).attempts << " " << tasks.list().size();
}

// Issue 46: on SIGTERM, `loom serve` closed the requests it had accepted but not yet given a
// thread. Two idle connections held its 2 threads there; here 8 inference requests are received,
// each batch waiting 400 ms for more (so most wait for a worker when the signal comes): SIGTERM
// answers all 8, then exits 0.
TEST_P(CliStore, ServeAnswersEveryReceivedRequestOnSigterm) {
  const std::string u = url();
  store::Store::open(u).models().save("mlp", loom_test::small_mlp(1), {{"accuracy", 0.8}});
  Cli loom(tmp.dir.string());
  const pid_t pid = loom.spawn({"serve", "mlp", "--store", u, "--port", "0", "--threads", "2", "--reload-ms", "0",
                                 "--max-wait-us", "400000"});
  int port = 0;
  for (int i = 0; i < 300 && port == 0; ++i) {  // "serving mlp (version 1) on http://127.0.0.1:PORT/v2"
    const std::string out = loom.output_so_far();
    const size_t at = out.find("127.0.0.1:");
    if (at != std::string::npos && out.find("/v2", at) != std::string::npos) port = std::atoi(out.c_str() + at + 10);
    else std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GT(port, 0) << loom.output_so_far();
  loom_test::RawConnection idle1(port), idle2(port);
  std::vector<std::unique_ptr<loom_test::RawConnection>> clients;
  std::vector<std::string> answers(8);
  std::vector<std::thread> readers;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(std::make_unique<loom_test::RawConnection>(port));
    const std::string body = R"({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]})";
    clients.back()->send("POST /v2/models/mlp/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + std::to_string(body.size()) +
                         "\r\n\r\n" + body);
    // (the connection itself, not clients[i]: the next push_back may move the vector while this runs)
    readers.emplace_back([&answers, c = clients.back().get(), i] { answers[i] = c->read_all(std::chrono::seconds(15)); });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  for (auto& r : readers) r.join();
  const CliResult r = loom.wait(pid, std::chrono::seconds(30));
  EXPECT_EQ(r.code, 0) << r.err;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(loom_test::status_of(answers[i]), 200) << "request " << i << ": " << answers[i].substr(0, 200);
}

// Text from the store is shown escaped wherever it goes to a terminal: an ESC ] 0 ; ... BEL
// would retitle the operator's terminal and ESC [ 2 J clear it; a C1 CSI (U+009B, or a raw 0x9B
// byte, which only a tampered SQLite row can hold) is ESC [ to many terminals. Every listing,
// show and message stays terminal-safe and shows the text escaped; --json gives it back exactly.
TEST_P(CliStore, StoredControlCharactersAreEscaped) {
  const std::string u = url();
  const std::string title = "\x1b]0;pwned\x07", clear = "\x1b[2J", csi = "\xc2\x9b" "31m";
  const std::string hostile = "a" + title + "b" + clear + "c" + csi + "d\x7f" "e";
  const std::string hostile_json = "a\\u001b]0;pwned\\u0007b\\u001b[2Jc\xc2\x9b" "31md\x7f" "e";  // the same, as JSON text
  const std::string hyper = R"({"note": ")" + hostile_json + R"("})";
  const std::vector<std::string> escaped = {"\\x1b]0;pwned\\x07", "\\x1b[2J", "\\u{9b}31m", "\\x7f"};
  int64_t run = 0, task = 0;
  {
    store::Store s = store::Store::open(u);
    s.models().save("m", loom_test::small_mlp(1), {{"acc", 0.5}}, hyper, {"t"});
    store::DatasetWriter w = s.datasets().create("d", {.fields = {"x"}, .tags = {"t"}});
    w.append({.tensors = {{"x", zeros({2}, Float32)}}});
    w.commit();
    run = s.runs().start("exp", "r", hyper, {"t"}).id;
    s.runs().log_epoch(run, 0, {{"loss", 1.0}, {"other", 2.0}});
    s.runs().finish(run, store::RunStatus::Failed, hostile);
    flow::Tasks tasks(s);
    task = tasks.submit("train", hyper, {.max_attempts = 1});
    const auto claim = tasks.claim({"train"}, "agent" + title);
    ASSERT_TRUE(claim);
    tasks.fail(*claim, hostile);
  }
  // names and tags are labels without control characters; a store written otherwise (by hand,
  // by an older version) may hold them anyway
  loom_test::raw_sql(u, "UPDATE model_tags SET tag = '" + hostile + "'");
  loom_test::raw_sql(u, "INSERT INTO model_aliases (name, alias, model_id) SELECT name, '" + hostile + "', id FROM models");
  loom_test::raw_sql(u, "UPDATE dataset_tags SET tag = '" + hostile + "'");
  loom_test::raw_sql(u, "UPDATE run_tags SET tag = '" + hostile + "'");
  loom_test::raw_sql(u, "UPDATE run_metrics SET metric = '" + hostile + "' WHERE metric = 'other'");
  std::string task_error = hostile;
  if (!pg()) {  // a raw 0x9B byte: SQLite keeps what it is given, PostgreSQL's text cannot hold it
    loom_test::raw_sql(u, "UPDATE tasks SET error = error || CAST(X'9b' AS TEXT)");
    task_error += "\xef\xbf\xbd";  // --json shows a byte that is not UTF-8 as U+FFFD (docs/cli.md)
  }
  Cli loom(tmp.dir.string(), u);

  const std::string id = std::to_string(run), tid = std::to_string(task);
  const std::vector<std::vector<std::string>> commands = {
      {"models", "list"}, {"models", "show", "m"}, {"models", "top", "--metric", "acc"}, {"datasets", "list"},
      {"datasets", "show", "d"}, {"runs", "list"}, {"runs", "show", id}, {"runs", "top", "--metric", "loss"},
      {"runs", "compare", id, id}, {"tasks", "list"}, {"tasks", "show", tid}};
  for (const auto& args : commands) {
    SCOPED_TRACE(args[0] + " " + args[1]);
    const CliResult r = loom(args);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(terminal_safe(r.out));
    EXPECT_TRUE(terminal_safe(r.err));
    EXPECT_TRUE(contains(r.out, "\\x1b]0;pwned\\x07") || contains(r.out, "\\u001b]0;pwned\\u0007")) << r.out;
    auto with_json = args;
    with_json.push_back("--json");
    const CliResult j = loom(with_json);
    EXPECT_TRUE(terminal_safe(j.out));
    EXPECT_FALSE(parse(j).is_null());
  }
  // the escaped text is there to read, every kind of it
  const CliResult shown = loom({"runs", "show", id});
  for (const std::string& e : escaped) EXPECT_TRUE(contains(shown.out, e)) << e << " in:\n" << shown.out;
  const CliResult task_shown = loom({"tasks", "show", tid});
  for (const std::string& e : escaped) EXPECT_TRUE(contains(task_shown.out, e)) << e << " in:\n" << task_shown.out;
  if (!pg()) EXPECT_TRUE(contains(task_shown.out, "e\\x9b\n")) << task_shown.out;
  EXPECT_TRUE(contains(loom({"models", "show", "m"}).out, "\\u{9b}31md\\x7fe")) << "the hyper-parameters' C1 and DEL";

  // --json: the exact text back
  json j = parse(loom({"tasks", "show", tid, "--json"}));
  EXPECT_EQ(j["error"], task_error);
  EXPECT_EQ(j["agent"], "agent" + title);
  EXPECT_EQ(j["hyper_parameters"]["note"], hostile);
  j = parse(loom({"runs", "show", id, "--json"}));
  EXPECT_EQ(j["error"], hostile);
  EXPECT_EQ(j["tags"], json({hostile}));
  EXPECT_TRUE(j["metrics"].contains(hostile)) << j;
  EXPECT_EQ(j["hyper_parameters"]["note"], hostile);
  j = parse(loom({"models", "show", "m", "--json"}));
  EXPECT_EQ(j["tags"], json({hostile}));
  EXPECT_EQ(j["aliases"], json({hostile}));
  EXPECT_EQ(j["hyper_parameters"]["note"], hostile);
  EXPECT_EQ(parse(loom({"datasets", "show", "d", "--json"}))["tags"], json({hostile}));

  // messages that quote stored text: the aliases a missing one is told apart from
  CliResult r = loom({"models", "show", "m@nope"});
  EXPECT_EQ(r.code, 3);
  EXPECT_TRUE(terminal_safe(r.err));
  EXPECT_TRUE(contains(r.err, "\\x1b]0;pwned\\x07")) << r.err;
  // and arguments: an unknown option
  r = loom({"tasks", "list", "--x" + clear});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(terminal_safe(r.err));
  EXPECT_TRUE(contains(r.err, "--x\\x1b[2J")) << r.err;

  // a command's stderr, through `loom agent`, and the agent's name
  const int64_t hostile_task = flow::Tasks(store::Store::open(u)).submit("hostile", "{}", {.max_attempts = 1});
  r = loom({"agent", "--command", R"(hostile=/bin/sh -c 'printf "\033]0;pwned\007\033[2J\302\233" >&2; exit 3')", "--name",
            "ag" + clear, "--stop-when-idle"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(terminal_safe(r.out));
  EXPECT_TRUE(terminal_safe(r.err));
  EXPECT_EQ(r.out, "loom agent ag\\x1b[2J: ran 1 task\n");
  r = loom({"tasks", "show", std::to_string(hostile_task)});
  EXPECT_TRUE(terminal_safe(r.out));
  EXPECT_TRUE(contains(r.out, "stderr: \\x1b]0;pwned\\x07\\x1b[2J\\u{9b}")) << r.out;
  EXPECT_TRUE(contains(parse(loom({"tasks", "show", std::to_string(hostile_task), "--json"}))["error"].get<std::string>(),
                       "stderr: " + title + clear + "\xc2\x9b"));
}

TEST_P(CliStore, SearchesListAndShow) {
  const std::string u = url();
  flow::Tasks tasks(store::Store::open(u));
  flow::Agent agent(tasks);
  agent.register_kind("trial", [](const std::string& hyper, flow::TaskContext& ctx) {
    const double x = json::parse(hyper)["x"].get<double>();
    ctx.report(1, x * x);
    return json{{"loss", x * x}}.dump();
  });
  std::thread runner([&agent] { agent.run({.poll_ms = 5}); });
  flow::SearchSpace space;
  space.categorical("x", {"2", "-1", "3"});
  flow::GridSampler grid;
  const flow::SearchInfo s = flow::search(tasks, space, grid, {.name = "xs", .kind = "trial", .metric = "loss", .n_trials = 3, .poll_ms = 5});
  agent.stop();
  runner.join();
  Cli loom(tmp.dir.string(), u);
  CliResult r = loom({"searches", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(loom_test::contains_all(r.out, {"xs", "trial", "grid", "loss (min)", "SAMPLER"})) << r.out;
  json j = parse(loom({"searches", "show", std::to_string(s.id), "--json"}));
  EXPECT_EQ(keys_of(j), (std::vector<std::string>{"asha", "best_trial", "created_ms", "id", "kind", "metric", "mode", "name", "sampler",
                                                  "total_steps", "trials"}));
  EXPECT_EQ(keys_of(j["trials"][0]), (std::vector<std::string>{"error", "number", "params", "state", "steps", "task_id", "value"}));
  EXPECT_EQ(j["mode"], "min");
  EXPECT_TRUE(j["asha"].is_null());
  EXPECT_EQ(j["sampler"], "grid");
  EXPECT_EQ(j["best_trial"], 1);
  ASSERT_EQ(j["trials"].size(), 3u);
  EXPECT_EQ(j["trials"][1]["params"]["x"], -1);
  EXPECT_EQ(j["trials"][1]["value"], 1.0);
  EXPECT_EQ(j["trials"][2]["state"], "completed");
  EXPECT_EQ(j["trials"][2]["task_id"], s.trials[2].task_id);
  r = loom({"searches", "show", std::to_string(s.id)});
  EXPECT_TRUE(loom_test::contains_all(r.out, {"trial 1: 1 {\"x\":-1}", "completed", "1 *"})) << r.out;
  EXPECT_EQ(loom({"searches", "show", "999"}).code, 3);
  EXPECT_EQ(loom({"searches", "drop"}).code, 2);
}

// `loom searches start` runs a search whose trials agents run (an agent thread of this test
// here; `loom agent` with a command kind elsewhere), and shows it as `show` does.
TEST_P(CliStore, SearchesStartRunsASearchToItsEnd) {
  const std::string u = url();
  flow::Tasks tasks(store::Store::open(u));
  flow::Agent agent(tasks);
  agent.register_kind("trial", [](const std::string& hyper, flow::TaskContext& ctx) {
    const json h = json::parse(hyper);
    const double x = h["x"].get<double>(), base = (x - 0.3) * (x - 0.3) + (h["act"] == "gelu" ? 0.0 : 0.5);
    int64_t step = 1;
    for (; step <= 9; ++step)
      if (ctx.report(step, base + 1.0 / static_cast<double>(step)) == flow::Decision::Stop) break;
    return json{{"loss", base + 1.0 / static_cast<double>(std::min<int64_t>(step, 9))}, {"fixed", h["fixed"]}}.dump();
  });
  std::thread runner([&agent] { agent.run({.poll_ms = 5}); });
  Cli loom(tmp.dir.string(), u);
  json j = parse(loom({"searches", "start", "--kind", "trial", "--metric", "loss", "--trials", "8", "--param", "x=uniform:-1:1",
                       "--param", "act=choice:relu,gelu", "--sampler", "tpe", "--seed", "3", "--concurrent", "1", "--asha", "9",
                       "--hyper-parameters", R"({"fixed": 7})", "--name", "from the shell", "--json"}));
  agent.stop();
  runner.join();
  EXPECT_EQ(j["name"], "from the shell");
  EXPECT_EQ(j["sampler"], "tpe");
  EXPECT_EQ(j["asha"]["max_resource"], 9);
  ASSERT_EQ(j["trials"].size(), 8u);
  int stopped = 0;
  double best = 1e300;
  for (const json& t : j["trials"]) {
    ASSERT_TRUE(t["state"] == "completed" || t["state"] == "stopped") << t.dump();
    stopped += t["state"] == "stopped";
    const double x = t["params"]["x"].get<double>();
    EXPECT_GE(x, -1.0);
    EXPECT_LE(x, 1.0);
    EXPECT_TRUE(t["params"]["act"] == "relu" || t["params"]["act"] == "gelu") << t.dump();
    if (t["state"] == "completed") {
      const double expect = (x - 0.3) * (x - 0.3) + (t["params"]["act"] == "gelu" ? 0.0 : 0.5) + 1.0 / 9;
      EXPECT_NEAR(t["value"].get<double>(), expect, 1e-9) << t.dump();
      best = std::min(best, expect);
    }
  }
  EXPECT_GT(stopped, 0);  // ASHA stopped the poorer ones, sequential trials: deterministic
  EXPECT_LT(j["total_steps"].get<int64_t>(), 8 * 9);
  EXPECT_NEAR(j["trials"][j["best_trial"].get<size_t>()]["value"].get<double>(), best, 1e-9);
  // the fixed hyper-parameters reached every trial
  const flow::TaskInfo first = tasks.get(j["trials"][0]["task_id"].get<int64_t>());
  EXPECT_EQ(json::parse(first.hyper_parameters)["fixed"], 7);
  EXPECT_TRUE(loom_test::contains_all(loom({"searches", "show", std::to_string(j["id"].get<int64_t>())}).out, {"from the shell", "tpe"}));

  // bad command lines: usage errors naming what is valid, nothing started
  CliResult r = loom({"searches", "start", "--metric", "loss", "--trials", "2", "--param", "x=uniform:0:1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "missing --kind")) << r.err;
  r = loom({"searches", "start", "--kind", "trial", "--metric", "loss", "--trials", "2", "--param", "x=normal:0:1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "NAME=log_uniform:LOW:HIGH")) << r.err;
  r = loom({"searches", "start", "--kind", "trial", "--metric", "loss", "--trials", "2", "--param", "x=uniform:0:one"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "'one' is not a finite number")) << r.err;
  r = loom({"searches", "start", "--kind", "trial", "--metric", "loss", "--trials", "2", "--param", "x=uniform:0:1", "--sampler", "bayes"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "valid: random, tpe, grid")) << r.err;
  r = loom({"searches", "start", "--kind", "trial", "--metric", "loss", "--trials", "2", "--param", "x=uniform:1:0"});
  EXPECT_EQ(r.code, 1);  // the space's own ValueError
  EXPECT_EQ(flow::list_searches(tasks).size(), 1u);
}

INSTANTIATE_STORE_BACKENDS(CliStore);
