// The dashboard's handlers (docs/ui.md) without sockets: the runs table's summaries, curves
// and their downsampling and smoothing, comparison and groups, models, datasets (query, PNG
// previews), tasks with their polling cursor; and the safety paths: 403 without --allow-writes,
// 401 without the token, the Content-Security-Policy on every answer, every bad parameter a
// JSON error naming what is valid.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sqlite3.h>
#include <loom/data/image.h>
#include <loom/flow/tasks.h>
#include <loom/graph/graph.h>
#include <loom/store/model_registry.h>
#include <loom/store/runs.h>
#include <loom/store/store.h>
#include <loom/ui/dashboard.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>
#include <thread>

#include "unit/common/core_test_util.h"
#include "unit/serve/raw_http.h"
#include "unit/ui/ui_test_store.h"

using namespace loom;
using loom_test::contains_all;
using nlohmann::json;

namespace {

class Ui : public ::testing::Test {
 protected:
  loom_test::TempDir tmp;
  store::Store store = store::Store::open((tmp.dir / "ui.db").string());
  loom_test::UiStore filled = loom_test::fill_ui_store(store);

  static ui::Request get(const std::string& path, std::map<std::string, std::string> query = {}) {
    return {"GET", path, std::move(query), "", "", ""};
  }
  // The answer's JSON, after checking its status.
  static json body(const ui::Response& r, int status = 200) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_EQ(r.content_type, "application/json");
    return json::parse(r.body);
  }
  static size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
    return n;
  }
};

TEST_F(Ui, RunsTableHasEachMetricsFinalBestAndWorst) {
  ui::Dashboard d(store);
  const json j = body(d.handle(get("/api/runs")));
  EXPECT_EQ(j["total"], 3);
  EXPECT_EQ(j["metrics"], json({"loss", "val_accuracy"}));
  ASSERT_EQ(j["runs"].size(), 3u);
  for (size_t r = 0; r < 3; ++r) {
    const json& run = j["runs"][r];
    EXPECT_EQ(run["id"], filled.runs[r]);
    std::vector<double> loss, acc;
    for (size_t e = 0; e < loom_test::kUiEpochs; ++e) loss.push_back(loom_test::ui_loss(r, e)), acc.push_back(loom_test::ui_accuracy(r, e));
    // each summary is MetricSummary's JSON, the record's one key set (which of min and max is
    // the best, the page says: tests/ui)
    for (const loom::store::RunSummary& s : store.runs().summaries())
      if (s.run.id == filled.runs[r]) EXPECT_EQ(run["summaries"]["loss"], loom::store::record_json<json>(s.metrics.at("loss")));
    for (const char* metric : {"loss", "val_accuracy"}) {
      std::vector<std::string> keys;
      for (const auto& [key, value] : run["summaries"][metric].items()) keys.push_back(key);
      EXPECT_EQ(keys, (std::vector<std::string>{"epochs", "final", "max", "min"})) << metric;
    }
    EXPECT_DOUBLE_EQ(run["summaries"]["loss"]["final"], loss.back());
    EXPECT_DOUBLE_EQ(run["summaries"]["loss"]["min"], *std::min_element(loss.begin(), loss.end()));
    EXPECT_DOUBLE_EQ(run["summaries"]["loss"]["max"], *std::max_element(loss.begin(), loss.end()));
    EXPECT_DOUBLE_EQ(run["summaries"]["val_accuracy"]["max"], *std::max_element(acc.begin(), acc.end()));
    EXPECT_DOUBLE_EQ(run["summaries"]["val_accuracy"]["min"], *std::min_element(acc.begin(), acc.end()));
    EXPECT_EQ(run["summaries"]["loss"]["epochs"], loom_test::kUiEpochs);
  }
  EXPECT_EQ(j["runs"][0]["hyper_parameters"]["lr"], 0.1);
}

TEST_F(Ui, RunsFilterSortAndPage) {
  ui::Dashboard d(store);
  auto ids = [](const json& j) {
    std::vector<int64_t> v;
    for (const auto& r : j["runs"]) v.push_back(r["id"]);
    return v;
  };
  const auto& r = filled.runs;
  EXPECT_EQ(ids(body(d.handle(get("/api/runs", {{"filter", "baseline"}})))), (std::vector<int64_t>{r[2]}));  // a tag
  EXPECT_EQ(ids(body(d.handle(get("/api/runs", {{"filter", "lr=0.01"}})))), (std::vector<int64_t>{r[1], r[2]}));  // key=value
  EXPECT_EQ(ids(body(d.handle(get("/api/runs", {{"filter", "batch=64"}})))), (std::vector<int64_t>{r[2]}));
  // final loss: run 0 0.2, run 1 0.4, run 2 0.6
  EXPECT_EQ(ids(body(d.handle(get("/api/runs", {{"sort", "loss"}, {"order", "desc"}})))), (std::vector<int64_t>{r[2], r[1], r[0]}));
  EXPECT_EQ(ids(body(d.handle(get("/api/runs", {{"sort", "name"}})))), (std::vector<int64_t>{r[1], r[2], r[0]}));
  const json page1 = body(d.handle(get("/api/runs", {{"limit", "2"}})));
  EXPECT_EQ(ids(page1), (std::vector<int64_t>{r[0], r[1]}));
  EXPECT_EQ(page1["next_offset"], 2);
  const json page2 = body(d.handle(get("/api/runs", {{"limit", "2"}, {"offset", "2"}})));
  EXPECT_EQ(ids(page2), (std::vector<int64_t>{r[2]}));
  EXPECT_TRUE(page2["next_offset"].is_null());
  // bad parameters: a JSON error naming what is valid
  EXPECT_TRUE(contains_all(body(d.handle(get("/api/runs", {{"sort", "nope"}})), 400)["error"], {"sort", "loss", "val_accuracy", "name"}));
  EXPECT_TRUE(contains_all(body(d.handle(get("/api/runs", {{"limit", "0"}})), 400)["error"], {"limit", "1 to 1000"}));
  EXPECT_TRUE(contains_all(body(d.handle(get("/api/runs", {{"limit", "1e3"}})), 400)["error"], {"integer"}));
  EXPECT_TRUE(contains_all(body(d.handle(get("/api/runs", {{"order", "up"}})), 400)["error"], {"asc, desc"}));
  EXPECT_TRUE(contains_all(body(d.handle(get("/api/runs", {{"colour", "red"}})), 400)["error"], {"colour", "filter, sort, order, limit, offset"}));
}

TEST_F(Ui, CurvesOverlayOnePathPerRunWithFullNames) {
  ui::Dashboard d(store);
  const auto& r = filled.runs;
  const ui::Response svg = d.handle(get("/api/runs/curves", {{"runs", std::to_string(r[0]) + "," + std::to_string(r[2])}, {"metric", "loss"}}));
  ASSERT_EQ(svg.status, 200) << svg.body;
  EXPECT_EQ(svg.content_type, "image/svg+xml");
  EXPECT_EQ(count(svg.body, "<path class=\"curve\""), 2u);
  EXPECT_TRUE(contains_all(svg.body, {"lr-0.1 (" + std::to_string(r[0]) + ", mnist)", "lr-0.01-b64 (" + std::to_string(r[2]) + ", mnist)", ">epoch<"}));
  // the values, as JSON: exactly the logged ones (few points: nothing dropped)
  const json j = body(d.handle(get("/api/runs/curves", {{"runs", std::to_string(r[1])}, {"metric", "val_accuracy"}, {"format", "json"}})));
  ASSERT_EQ(j["series"].size(), 1u);
  for (size_t e = 0; e < loom_test::kUiEpochs; ++e) {
    EXPECT_EQ(j["series"][0]["x"][e], e);
    EXPECT_DOUBLE_EQ(j["series"][0]["y"][e], loom_test::ui_accuracy(1, e));
  }
  // over wall-clock time: seconds since the run started, from the epochs' timestamps
  const json t = body(d.handle(get("/api/runs/curves", {{"runs", std::to_string(r[1])}, {"x", "time"}, {"format", "json"}})));
  const store::RunInfo info = store.runs().get(r[1]);
  ASSERT_EQ(t["series"][0]["x"].size(), loom_test::kUiEpochs);
  for (size_t e = 0; e < loom_test::kUiEpochs; ++e)
    EXPECT_DOUBLE_EQ(t["series"][0]["x"][e], (info.metrics.at("loss").times_ms[e] - info.started_ms) / 1000.0);
  // without a metric: "loss" when the runs have it, else their first metric by name
  EXPECT_EQ(t["metric"], "loss");
  const int64_t no_loss = store.runs().start("other", "no-loss").id;
  store.runs().log_epoch(no_loss, 0, {{"top5", 0.5}, {"recall", 0.25}});
  const json first = body(d.handle(get("/api/runs/curves", {{"runs", std::to_string(no_loss)}, {"format", "json"}})));
  EXPECT_EQ(first["metric"], "recall");
  ASSERT_EQ(first["series"].size(), 1u);
  EXPECT_DOUBLE_EQ(first["series"][0]["y"][0], 0.25);
  const json mixed = body(d.handle(get("/api/runs/curves", {{"runs", std::to_string(no_loss) + "," + std::to_string(r[1])}, {"format", "json"}})));
  EXPECT_EQ(mixed["metric"], "loss");
  EXPECT_EQ(mixed["series"][0]["y"].size(), 0u);  // the run without loss: an empty curve
  EXPECT_EQ(mixed["series"][1]["y"].size(), loom_test::kUiEpochs);
  EXPECT_EQ(body(d.handle(get("/api/runs/curves", {{"runs", "99999"}})), 404)["error"], "store: no run 99999");
  EXPECT_TRUE(contains_all(body(d.handle(get("/api/runs/curves", {{"runs", "1,x"}})), 400)["error"], {"positive integers"}));
  EXPECT_TRUE(contains_all(body(d.handle(get("/api/runs/curves", {{"runs", std::to_string(r[0])}, {"metric", "acc"}})), 400)["error"],
                           {"loss, val_accuracy"}));
  EXPECT_TRUE(contains_all(body(d.handle(get("/api/runs/curves", {{"runs", std::to_string(r[0])}, {"smoothing", "1"}})), 400)["error"],
                           {"smoothing", "0 to 0.99"}));
  EXPECT_TRUE(contains_all(body(d.handle(get("/api/runs/curves", {{"runs", std::to_string(r[0])}, {"x", "wall"}})), 400)["error"], {"step, time"}));
}

TEST_F(Ui, LongCurvesAreDownsampledKeepingExtremesAndSmoothedAsTensorBoardDoes) {
  const int64_t id = store.runs().start("long", "long").id;
  std::vector<double> values;
  for (int64_t e = 0; e < 400; ++e) {
    values.push_back(std::sin(e * 0.01) + (e == 123 ? 5.0 : 0.0));  // one spike
    store.runs().log_epoch(id, e, {{"loss", values.back()}});
  }
  store.runs().finish(id);
  ui::Dashboard d(store);
  const json j = body(d.handle(get("/api/runs/curves", {{"runs", std::to_string(id)}, {"width", "200"}, {"format", "json"}})));
  const json& s = j["series"][0];
  const size_t columns = 200 - 90;
  EXPECT_LE(s["x"].size(), 3 * columns);  // at most first, lowest and highest per pixel column
  EXPECT_GE(s["x"].size(), columns);
  std::vector<double> ys = s["y"].get<std::vector<double>>();
  EXPECT_DOUBLE_EQ(*std::max_element(ys.begin(), ys.end()), *std::max_element(values.begin(), values.end()));  // the spike survives
  EXPECT_DOUBLE_EQ(*std::min_element(ys.begin(), ys.end()), *std::min_element(values.begin(), values.end()));
  EXPECT_EQ(s["x"][0], 0);
  EXPECT_EQ(s["x"].back(), 399);
  EXPECT_LT(s["x"].size(), values.size());
  // smoothing: TensorBoard's debiased exponential moving average, computed here as reference
  const json sm = body(d.handle(get("/api/runs/curves", {{"runs", std::to_string(id)}, {"width", "4000"}, {"smoothing", "0.6"}, {"format", "json"}})));
  double last = 0;
  std::vector<double> ref;
  for (size_t i = 0; i < values.size(); ++i) {
    last = last * 0.6 + 0.4 * values[i];
    ref.push_back(last / (1 - std::pow(0.6, static_cast<double>(i + 1))));
  }
  const json& xs = sm["series"][0]["x"];
  ASSERT_GT(xs.size(), 100u);
  for (size_t k = 0; k < xs.size(); ++k) EXPECT_NEAR(sm["series"][0]["y"][k].get<double>(), ref[xs[k].get<size_t>()], 1e-12);
}

TEST_F(Ui, CompareShowsHyperParametersWithDifferencesOnly) {
  ui::Dashboard d(store);
  const auto& r = filled.runs;
  const std::string two = std::to_string(r[1]) + "," + std::to_string(r[2]);
  const json all = body(d.handle(get("/api/runs/compare", {{"runs", two}})));
  ASSERT_EQ(all["hyper_parameters"].size(), 3u);  // batch, lr, optimizer
  EXPECT_EQ(all["hyper_parameters"][0], json({{"key", "batch"}, {"values", {32, 64}}, {"differs", true}}));
  EXPECT_EQ(all["hyper_parameters"][1]["differs"], false);
  const json diff = body(d.handle(get("/api/runs/compare", {{"runs", two}, {"differences", "1"}})));
  ASSERT_EQ(diff["hyper_parameters"].size(), 1u);
  EXPECT_EQ(diff["hyper_parameters"][0]["key"], "batch");
  EXPECT_EQ(diff["runs"][1]["name"], "lr-0.01-b64");
}

TEST_F(Ui, GroupByAHyperParameterGivesMeanAndBand) {
  ui::Dashboard d(store);
  const json j = body(d.handle(get("/api/runs/group", {{"by", "lr"}, {"metric", "loss"}, {"format", "json"}})));
  ASSERT_EQ(j["groups"].size(), 2u);
  const json& g = j["groups"][0];  // "0.01": runs 1 and 2
  EXPECT_EQ(g["value"], "0.01");
  EXPECT_EQ(g["runs"], json({filled.runs[1], filled.runs[2]}));
  for (size_t e = 0; e < loom_test::kUiEpochs; ++e) {
    EXPECT_DOUBLE_EQ(g["mean"][e], (loom_test::ui_loss(1, e) + loom_test::ui_loss(2, e)) / 2);
    EXPECT_DOUBLE_EQ(g["min"][e], loom_test::ui_loss(1, e));
    EXPECT_DOUBLE_EQ(g["max"][e], loom_test::ui_loss(2, e));
  }
  const ui::Response svg = d.handle(get("/api/runs/group", {{"by", "lr"}}));
  EXPECT_EQ(count(svg.body, "<path class=\"band\""), 2u);
  EXPECT_EQ(count(svg.body, "<path class=\"curve\""), 2u);
  EXPECT_TRUE(contains_all(svg.body, {"lr = 0.01 (2 runs)"}));
  EXPECT_TRUE(contains_all(body(d.handle(get("/api/runs/group")), 400)["error"], {"by", "hyper-parameter"}));
}

TEST_F(Ui, ModelsShowVersionsAliasesLineageAndArchitecture) {
  ui::Dashboard d(store);
  const json list = body(d.handle(get("/api/models")));
  EXPECT_EQ(list["models"], json::parse(R"([{"name": "mlp", "versions": 2, "latest": 2, "aliases": {"production": 1}}])"));
  const json m = body(d.handle(get("/api/models/mlp")));
  ASSERT_EQ(m["versions"].size(), 2u);
  EXPECT_EQ(m["versions"][0]["aliases"], json({"production"}));
  EXPECT_EQ(m["versions"][0]["tags"], json({"small"}));
  EXPECT_EQ(m["versions"][1]["produced_by"]["run_id"], filled.runs[1]);
  EXPECT_EQ(m["versions"][1]["produced_by"]["run"]["name"], "lr-0.01");
  // the producing run as /api/runs lists it: the run record's JSON, one key set
  loom::store::RunInfo producer = store.runs().get(filled.runs[1]);
  producer.metrics.clear();
  EXPECT_EQ(m["versions"][1]["produced_by"]["run"], loom::store::record_json<json>(producer));
  EXPECT_DOUBLE_EQ(m["versions"][1]["metrics"]["accuracy"], 0.9);
  const ui::Response summary = d.handle(get("/api/models/mlp/2/architecture"));
  EXPECT_EQ(summary.status, 200);
  EXPECT_EQ(summary.body, store.models().load("mlp", 2).summary());
  EXPECT_EQ(d.handle(get("/api/models/mlp/2/architecture", {{"format", "dot"}})).body, store.models().load("mlp", 2).to_dot());
  EXPECT_TRUE(contains_all(body(d.handle(get("/api/models/nope")), 404)["error"], {"no model 'nope'"}));
  EXPECT_EQ(body(d.handle(get("/api/models/mlp/9/architecture")), 404)["error"].get<std::string>().find("9") != std::string::npos, true);
  EXPECT_TRUE(contains_all(body(d.handle(get("/api/models/mlp/x/architecture")), 400)["error"], {"1, 2, ..."}));
  EXPECT_TRUE(contains_all(body(d.handle(get("/api/models/mlp/2/architecture", {{"format", "png"}})), 400)["error"], {"summary, dot, svg"}));
}

TEST_F(Ui, ArchitectureAsSvgWhenGraphvizIsInstalled) {
  ui::Dashboard d(store);
  const ui::Response svg = d.handle(get("/api/models/mlp/2/architecture", {{"format", "svg"}}));
  if (svg.status == 404) {
    EXPECT_TRUE(contains_all(body(svg, 404)["error"], {"graphviz"}));
    GTEST_SKIP() << "Graphviz's dot is not installed";
  }
  ASSERT_EQ(svg.status, 200) << svg.body;
  EXPECT_EQ(svg.content_type, "image/svg+xml");
  EXPECT_TRUE(contains_all(svg.body, {"<svg", ">l1", ">l2", "</svg>"}));
}

TEST_F(Ui, DatasetsQueryInTheStoresLanguageAndImagePreviews) {
  ui::Dashboard d(store);
  EXPECT_EQ(body(d.handle(get("/api/datasets")))["datasets"], json::parse(R"([{"name": "digits", "versions": 1, "latest": 1}])"));
  const json v = body(d.handle(get("/api/datasets/digits")));
  EXPECT_EQ(v["versions"][0]["samples"], 6);
  EXPECT_EQ(v["versions"][0]["fields"][0], json::parse(R"({"name": "image", "dtype": "uint8", "shape": [1, 8, 8], "image": true})"));
  EXPECT_EQ(v["versions"][0]["fields"][1]["image"], false);
  auto indices = [&](const std::string& query) {
    std::vector<int64_t> out;
    const json j = body(d.handle(get("/api/datasets/digits/1/samples", {{"query", query}})));
    for (const auto& s : j["samples"]) out.push_back(s["index"]);
    return out;
  };
  EXPECT_EQ(indices(""), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(indices("label >= 1 and split == \"train\""), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(indices("#hard"), (std::vector<int64_t>{5}));
  EXPECT_EQ(indices("label != 0 order by label desc"), (std::vector<int64_t>{2, 5, 1, 4}));
  // the same as the store's own query
  store::SampleQuery q;
  q.where = {{"label", ">=", 1}, {"split", "==", "train"}};
  const auto view = store.datasets().query("digits", 1, q);
  ASSERT_EQ(view->size(), 2);
  EXPECT_EQ(view->index(0), 1);
  EXPECT_EQ(view->index(1), 2);
  for (const char* bad : {"label >", "label ~ 3", "order label", "label == 3 or split == \"x\"", "split == \"open"})
    EXPECT_TRUE(contains_all(body(d.handle(get("/api/datasets/digits/1/samples", {{"query", bad}})), 400)["error"], {"valid: clauses joined by 'and'"}))
        << bad;
  // the preview decodes to the sample's pixels
  const ui::Response png = d.handle(get("/api/datasets/digits/1/samples/4/image.png"));
  ASSERT_EQ(png.status, 200) << png.body;
  EXPECT_EQ(png.content_type, "image/png");
  const Tensor img = data::decode_image(png.body.data(), png.body.size(), {.mode = data::ImageMode::Gray});
  ASSERT_EQ(img.shape(), (Shape{1, 8, 8}));
  const auto px = img.contiguous().to_vector<uint8_t>();
  for (int64_t y = 0; y < 8; ++y)
    for (int64_t x = 0; x < 8; ++x) ASSERT_EQ(px[y * 8 + x], loom_test::ui_pixel(4, y, x));
  EXPECT_TRUE(contains_all(body(d.handle(get("/api/datasets/digits/1/samples/4/label.png")), 404)["error"], {"valid: image"}));
  EXPECT_TRUE(contains_all(body(d.handle(get("/api/datasets/digits/1/samples/6/image.png")), 404)["error"], {"0 to 5"}));
  EXPECT_EQ(d.handle(get("/api/datasets/digits/7/samples")).status, 404);
  EXPECT_EQ(d.handle(get("/api/datasets/nope")).status, 404);
}

TEST_F(Ui, TasksPollWithACursorAndCancelNeedsWritesAndTheToken) {
  ui::Dashboard read_only(store);
  const json first = body(read_only.handle(get("/api/tasks")));
  EXPECT_EQ(first["changed"], true);
  EXPECT_EQ(first["counts"]["pending"], 2);
  EXPECT_EQ(first["counts"]["running"], 1);
  ASSERT_EQ(first["tasks"].size(), 3u);
  EXPECT_EQ(first["tasks"][0]["kind"], "train");
  EXPECT_EQ(first["tasks"][2]["agent"], "agent-1");
  EXPECT_EQ(first["tasks"][2]["attempts"], 1);
  EXPECT_GT(first["tasks"][2]["lease_expires_ms"], 0);
  ASSERT_EQ(first["agents"].size(), 1u);
  EXPECT_EQ(first["agents"][0]["name"], "agent-1");
  EXPECT_EQ(first["agents"][0]["running"], json({filled.tasks[2]}));
  const std::string cursor = first["cursor"];
  const json again = body(read_only.handle(get("/api/tasks", {{"cursor", cursor}})));
  EXPECT_EQ(again, json({{"cursor", cursor}, {"changed", false}}));
  const std::string cancel = "/api/tasks/" + std::to_string(filled.tasks[0]) + "/cancel";
  // read-only: 403 whatever the token
  EXPECT_TRUE(contains_all(body(read_only.handle({"POST", cancel, {}, "", "x", ""}), 403)["error"], {"--allow-writes"}));
  ui::Dashboard writes(store, {.allow_writes = true});
  ASSERT_EQ(writes.token().size(), 32u);
  EXPECT_TRUE(contains_all(body(writes.handle({"POST", cancel, {}, "", "", ""}), 401)["error"], {"X-Loom-Token", "none was given"}));
  std::string wrong = writes.token();
  wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
  EXPECT_TRUE(contains_all(body(writes.handle({"POST", cancel, {}, "", wrong, ""}), 401)["error"], {"not it"}));
  EXPECT_EQ(flow::Tasks(store).get(filled.tasks[0]).status, flow::Status::Pending);  // nothing done
  EXPECT_EQ(body(writes.handle({"POST", cancel, {}, "", writes.token(), ""}))["status"], "cancelled");
  EXPECT_EQ(flow::Tasks(store).get(filled.tasks[0]).status, flow::Status::Cancelled);
  EXPECT_TRUE(contains_all(body(writes.handle({"POST", cancel, {}, "", writes.token(), ""}), 409)["error"], {"already ended", "cancelled"}));
  const json after = body(read_only.handle(get("/api/tasks", {{"cursor", cursor}})));
  EXPECT_EQ(after["changed"], true);  // the cursor moved
  EXPECT_EQ(after["tasks"][0]["status"], "cancelled");
  EXPECT_EQ(body(read_only.handle(get("/api/tasks", {{"status", "cancelled"}})))["tasks"].size(), 1u);
  EXPECT_TRUE(contains_all(body(read_only.handle(get("/api/tasks", {{"status", "done"}})), 400)["error"], {"pending, running"}));
  EXPECT_EQ(writes.handle({"POST", "/api/tasks/999/cancel", {}, "", writes.token(), ""}).status, 404);
  EXPECT_EQ(writes.handle({"GET", cancel, {}, "", "", ""}).status, 405);
}

TEST_F(Ui, MovingAnAliasNeedsWritesAndTheToken) {
  const ui::Request move{"POST", "/api/models/mlp/aliases/production", {}, R"({"version": 2})", "", ""};
  ui::Dashboard read_only(store);
  EXPECT_EQ(read_only.handle(move).status, 403);
  EXPECT_EQ(read_only.token(), "");
  ui::Dashboard writes(store, {.allow_writes = true, .token = "0123456789abcdef0123"});
  EXPECT_EQ(writes.handle(move).status, 401);
  EXPECT_EQ(store.models().get("mlp", "production").version, 1);
  ui::Request with_token = move;
  with_token.token = "0123456789abcdef0123";
  EXPECT_EQ(body(writes.handle(with_token))["version"], 2);
  EXPECT_EQ(store.models().get("mlp", "production").version, 2);
  with_token.body = R"({"version": 7})";
  EXPECT_EQ(writes.handle(with_token).status, 404);
  with_token.body = R"({"version": "2"})";
  EXPECT_TRUE(contains_all(body(writes.handle(with_token), 400)["error"], {"{\"version\": N}"}));
  with_token.body = "not json";
  EXPECT_EQ(writes.handle(with_token).status, 400);
  EXPECT_EQ(store.models().get("mlp", "production").version, 2);
  EXPECT_THROW(ui::Dashboard(store, {.allow_writes = true, .token = "short"}), ValueError);
}

TEST_F(Ui, EveryAnswerCarriesTheContentSecurityPolicy) {
  ui::Dashboard d(store);
  const ui::Response page = d.handle(get("/"));
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_TRUE(contains_all(page.body, {"<script src=\"/app.js\"", "href=\"/app.css\"", "id=\"runs-table\""}));
  // the page refers to nothing outside the dashboard: no scheme or protocol-relative address
  EXPECT_FALSE(std::regex_search(page.body, std::regex("(src|href)=\"(https?:)?//")));
  const ui::Response js = d.handle(get("/app.js"));
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_FALSE(std::regex_search(js.body, std::regex("https?://")));
  EXPECT_EQ(d.handle(get("/app.css")).content_type, "text/css; charset=utf-8");
  for (const ui::Request& r : {get("/"), get("/api/runs"), get("/nope"), get("/api/nope"), ui::Request{"POST", "/api/tasks/1/cancel", {}, "", "", ""},
                               ui::Request{"DELETE", "/", {}, "", "", ""}, get("relative")}) {
    const ui::Response a = d.handle(r);
    EXPECT_EQ(a.headers.at("Content-Security-Policy"),
              "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; "
              "form-action 'none'; frame-ancestors 'none'")
        << r.path;
    EXPECT_EQ(a.headers.at("X-Content-Type-Options"), "nosniff");
    if (a.status != 200) EXPECT_TRUE(json::parse(a.body).contains("error")) << r.path;
  }
  EXPECT_EQ(d.handle(get("/nope")).status, 404);
  EXPECT_EQ(d.handle({"PUT", "/api/runs", {}, "", "", ""}).status, 405);
  EXPECT_EQ(d.handle(get("relative")).status, 400);
  // DNS rebinding: another site's name resolving to 127.0.0.1 is refused
  for (const char* host : {"127.0.0.1:8080", "localhost:8080", "[::1]:8080", "localhost"}) {
    ui::Request r = get("/api/runs");
    r.host = host;
    EXPECT_EQ(d.handle(r).status, 200) << host;
  }
  ui::Request rebound = get("/api/runs");
  rebound.host = "evil.example:8080";
  EXPECT_TRUE(contains_all(body(d.handle(rebound), 403)["error"], {"'evil.example:8080'", "127.0.0.1 or localhost"}));
}

// The store accepts names with '/' ("team/mlp"); the page encodes names in paths
// (encodeURIComponent: "team%2Fmlp"), and each segment is decoded after the path is split.
TEST_F(Ui, NamesWithASlashAreReachableEncoded) {
  store.models().save("team/mlp", loom_test::small_mlp(3));
  store::DatasetWriter w = store.datasets().create("team/digits", {.fields = {"label"}});
  w.append({.tensors = {{"label", scalar_tensor(1.0, Int64)}}, .metadata = R"({"label": 1})"});
  w.commit();
  ui::Dashboard d(store, {.port = 0});
  const json models = body(d.handle(get("/api/models/team%2Fmlp")));
  EXPECT_EQ(models["versions"].size(), 1u);
  EXPECT_EQ(d.handle(get("/api/models/team%2Fmlp/1/architecture")).status, 200);
  EXPECT_EQ(body(d.handle(get("/api/datasets/team%2Fdigits")))["versions"].size(), 1u);
  EXPECT_EQ(body(d.handle(get("/api/datasets/team%2Fdigits/1/samples")))["samples"].size(), 1u);
  EXPECT_EQ(d.handle(get("/api/models/team%2Fother")).status, 404);
  // over HTTP, where cpp-httplib decodes the path before routing (the raw one is routed)
  d.start();
  httplib::Client c("127.0.0.1", d.port());
  c.set_url_encode(false);
  for (const char* path : {"/api/models/team%2Fmlp", "/api/models/team%2Fmlp/1/architecture", "/api/datasets/team%2Fdigits"}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
  }
}

// Read-only means no write of any kind: the tasks page on a store without flow's tables showed
// an empty queue after creating them (21 to 29 tables).
TEST(UiReadOnly, ADashboardWritesNothingToTheStore) {
  loom_test::TempDir tmp;
  const std::string path = (tmp.dir / "plain.db").string();
  store::Store s = store::Store::open(path);
  const int64_t run = s.runs().start("mnist", "r1", "{}").id;
  s.runs().log_epoch(run, 0, {{"loss", 1.0}});
  s.runs().finish(run);
  s.models().save("mlp", loom_test::small_mlp(1));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  auto integer = [&](const char* sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, nullptr), SQLITE_OK) << sql;
    EXPECT_EQ(sqlite3_step(st), SQLITE_ROW) << sql;
    const int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
  };
  const int64_t tables = integer("SELECT count(*) FROM sqlite_master WHERE type = 'table'");
  const int64_t data_version = integer("PRAGMA data_version");  // moves when another connection commits
  ui::Dashboard d(s);
  const json tasks = json::parse(d.handle({"GET", "/api/tasks", {}, "", "", ""}).body);
  EXPECT_EQ(tasks["changed"], true);
  EXPECT_EQ(tasks["tasks"], json::array());
  EXPECT_EQ(tasks["counts"]["pending"], 0);
  EXPECT_EQ(json::parse(d.handle({"GET", "/api/tasks", {{"cursor", tasks["cursor"]}}, "", "", ""}).body)["changed"], false);
  for (const char* route : {"/", "/api/runs", "/api/runs/curves", "/api/models", "/api/models/mlp", "/api/models/mlp/1/architecture",
                            "/api/datasets"}) {
    ui::Request r{"GET", route, {}, "", "", ""};
    if (std::string(route) == "/api/runs/curves") r.query = {{"runs", std::to_string(run)}};
    EXPECT_EQ(d.handle(r).status, 200) << route;
  }
  EXPECT_EQ(integer("SELECT count(*) FROM sqlite_master WHERE type = 'table'"), tables);
  EXPECT_EQ(integer("PRAGMA data_version"), data_version);
  sqlite3_close(db);
  // with writes allowed, cancelling on a store without a queue is a missing task, still no write
  ui::Dashboard writes(s, {.allow_writes = true});
  EXPECT_EQ(writes.handle({"POST", "/api/tasks/1/cancel", {}, "", writes.token(), ""}).status, 404);
  EXPECT_FALSE(flow::Tasks::ready(s));
  flow::Tasks queue(s);  // made by a program that uses the queue
  EXPECT_TRUE(flow::Tasks::ready(s));
}

// Refusals made before a request reaches the handlers (a body past 1 MiB, chunked or of a
// declared length, a malformed request) carry every header the other answers carry.
TEST_F(Ui, RefusalsOverHttpCarryTheSecurityHeaders) {
  ui::Dashboard d(store, {.port = 0, .allow_writes = true});
  d.start();
  const char* policy = "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
  auto check = [&](const std::string& request, const std::string& more, int status) {
    loom_test::RawConnection c(d.port());
    ASSERT_TRUE(c.connected());
    std::string answer;
    std::thread reader([&] { answer = c.read_all(std::chrono::seconds(10)); });
    c.send(request);
    for (int i = 0; i < 8 && !more.empty(); ++i)
      if (c.send(more) < more.size()) break;
    reader.join();
    EXPECT_EQ(loom_test::status_of(answer), status) << answer.substr(0, 400);
    for (const std::string line : {std::string(policy), std::string("X-Content-Type-Options: nosniff"), std::string("X-Frame-Options: DENY"),
                                   std::string("Referrer-Policy: no-referrer"), std::string("Cache-Control: no-store")})
      EXPECT_TRUE(loom_test::has_header_line(answer, line)) << line << "\n" << answer.substr(0, 600);
  };
  const std::string post = "POST /api/tasks/1/cancel HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Loom-Token: " + d.token() + "\r\n";
  check(post + "Content-Length: 100000000000\r\n\r\n{", "", 413);
  check(post + "Transfer-Encoding: chunked\r\n\r\n", "100000\r\n" + std::string(1 << 20, 'x') + "\r\n", 413);
  check("NOT AN HTTP REQUEST\r\n\r\n", "", 400);
  // and the ordinary answers over HTTP carry each header once
  auto r = httplib::Client("127.0.0.1", d.port()).Get("/api/runs");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->headers.count("Content-Security-Policy"), 1u);
  EXPECT_EQ(r->headers.count("X-Frame-Options"), 1u);
}

// Issue 46: the dashboard stopped answering once 8 connections (its threads) sent their headers
// a byte every 2 s. With 64 such clients and 200 idle connections held it answers at once, and
// stop() answers the requests it received without waiting for the slow headers' deadline.
TEST_F(Ui, SlowAndIdleClientsHoldNoThread) {
  ASSERT_GE(loom_test::raise_open_files(), 1000u);
  ui::Dashboard d(store, {.port = 0});
  d.start();
  int failed = 0;
  const std::vector<int> slow = loom_test::connect_many(d.port(), 64, std::chrono::milliseconds(5000), &failed);
  const std::vector<int> idle = loom_test::connect_many(d.port(), 200, std::chrono::milliseconds(5000), &failed);
  ASSERT_EQ(failed, 0);
  for (int fd : slow) ::send(fd, "G", 1, MSG_NOSIGNAL);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int fd : slow) ::send(fd, "E", 1, MSG_NOSIGNAL);
  const std::string get = "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  for (int i = 0; i < 10; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string answer = loom_test::exchange(d.port(), get, std::chrono::milliseconds(3000));
    EXPECT_EQ(loom_test::status_of(answer), 200) << answer.substr(0, 300);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  }
  // requests received when stop() begins are answered, then closed
  std::vector<std::unique_ptr<loom_test::RawConnection>> last;
  std::vector<std::string> answers(8);
  std::vector<std::thread> readers;
  for (int i = 0; i < 8; ++i) {
    last.push_back(std::make_unique<loom_test::RawConnection>(d.port()));
    last.back()->send("GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    // (the connection itself, not last[i]: the next push_back may move the vector while this runs)
    readers.emplace_back([&answers, c = last.back().get(), i] { answers[i] = c->read_all(std::chrono::seconds(10)); });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = std::chrono::steady_clock::now();
  d.stop();  // the slow clients' headers get 1 s more, not the rest of their 10 s
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
  for (auto& r : readers) r.join();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(loom_test::status_of(answers[i]), 200) << i << ": " << answers[i].substr(0, 300);
  for (int fd : slow) ::close(fd);
  for (int fd : idle) ::close(fd);
}

TEST(UiToken, RandomTokensAreLongAndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string t = ui::random_token();
    ASSERT_EQ(t.size(), 32u);
    ASSERT_TRUE(std::all_of(t.begin(), t.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }));
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 100u);
}

}  // namespace
