// Runs in the store (docs/store.md, "Runs"): StoreLogger on a real fit, queries by experiment,
// tags and metric predicates on the final or best epoch, comparison of curves, checkpoints as
// reference-counted blobs.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/core/tensor.h>
#include <loom/data/loader.h>
#include <loom/graph/graph.h>
#include <loom/nn/layer.h>
#include <loom/ops/losses.h>
#include <loom/store/error.h>
#include <loom/store/runs.h>
#include <loom/store/store.h>
#include <loom/train/callbacks.h>
#include <loom/train/history.h>
#include <loom/train/metrics.h>
#include <loom/train/model.h>
#include <loom/train/optimizers.h>
#include <loom/train/train_step.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "unit/common/core_test_util.h"
#include "unit/train/train_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using loom_test::raw_sql;
using loom_test::TempDir;

using loom_test::blobs;

namespace {

train::Model make_model(const Graph& graph) {
  std::vector<Tensor> params;
  for (const auto& l : graph.nodes())
    for (const Tensor& p : l.parameters()) params.push_back(p);
  return train::Model(graph, [](const Tensor& p, const Tensor& t) { return cross_entropy(p, t); },
                      std::make_shared<train::Adam>(params, train::AdamOptions{.lr = 0.01}), {std::make_shared<train::Accuracy>()});
}

std::vector<Tensor> weights(const Graph& g) {
  std::vector<Tensor> w;
  for (const auto& l : g.nodes())
    for (const Tensor& p : l.parameters()) w.push_back(p.contiguous());
  return w;
}

int64_t count(const std::string& db, const std::string& table) { return std::stoll(raw_sql(db, "SELECT COUNT(*) FROM " + table)[0]); }

}  // namespace

class StoreRuns : public loom_test::StoreBackendTest {};
INSTANTIATE_STORE_BACKENDS(StoreRuns);

TEST_P(StoreRuns, StoreLoggerRecordsATinyFit) {
  store::Store s = store::Store::open(url());
  Graph net = loom_test::small_mlp(4);
  train::Model model = make_model(net);
  data::DataLoader train(blobs(96, 1), {.batch_size = 32});
  data::DataLoader val(blobs(48, 2), {.batch_size = 48});
  auto logger = std::make_shared<store::StoreLogger>(s, "blobs", R"({"lr": 0.01, "epochs": 2})", std::vector<std::string>{"tiny"});
  const train::History h = model.fit(train, {.epochs = 2, .validation = &val, .callbacks = {logger}, .progress = false});
  ASSERT_GT(logger->run_id(), 0);
  const store::RunInfo run = s.runs().get(logger->run_id());
  EXPECT_EQ(run.experiment, "blobs");
  EXPECT_EQ(run.status, store::RunStatus::Finished);
  EXPECT_GT(run.ended_ms, 0);
  EXPECT_EQ(run.tags, std::vector<std::string>{"tiny"});
  EXPECT_EQ(nlohmann::json::parse(run.hyper_parameters)["epochs"], 2);
  for (const char* m : {"loss", "accuracy", "val_loss", "val_accuracy", "lr"}) {
    ASSERT_TRUE(run.metrics.count(m)) << m;
    EXPECT_EQ(run.metrics.at(m).epochs, (std::vector<int64_t>{0, 1})) << m;
    EXPECT_EQ(run.metrics.at(m).values, h[m]) << m;
  }
  // The checkpoint loads into a fresh model with the trained weights.
  ASSERT_FALSE(run.checkpoint_sha256.empty());
  s.runs().save_checkpoint_file(run.id, tmp / "ck.safetensors");
  Graph fresh_net = loom_test::small_mlp(99);
  train::Model fresh = make_model(fresh_net);
  fresh.load_checkpoint(tmp / "ck.safetensors");
  EXPECT_EQ(fresh.epochs_done(), 2);
  const auto a = weights(net), b = weights(fresh_net);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(std::memcmp(a[i].data_ptr(), b[i].data_ptr(), a[i].nbytes()), 0);
  // A second fit with the same logger is a new run.
  model.fit(train, {.epochs = 1, .callbacks = {logger}, .progress = false});  // one more: epoch 2
  EXPECT_NE(logger->run_id(), run.id);
  EXPECT_EQ(s.runs().get(logger->run_id()).metrics.at("loss").epochs, (std::vector<int64_t>{2}));
}

TEST_P(StoreRuns, AFitThatThrowsEndsFailedWhenTheLoggerGoes) {
  store::Store s = store::Store::open(url());
  Graph net = loom_test::small_mlp(4);
  train::Model model = make_model(net);
  data::DataLoader train(blobs(32, 1), {.batch_size = 32});
  int64_t id = 0;
  {
    auto logger = std::make_shared<store::StoreLogger>(s, "crash");
    auto boom = std::make_shared<train::LambdaCallback>();
    boom->epoch_end = [](train::Model&, int64_t e, const train::Logs&) {
      if (e == 1) throw ValueError("boom");
    };
    EXPECT_THROW(model.fit(train, {.epochs = 3, .callbacks = {logger, boom}, .progress = false}), ValueError);
    id = logger->run_id();
    EXPECT_EQ(s.runs().get(id).status, store::RunStatus::Running);
  }
  const store::RunInfo run = s.runs().get(id);
  EXPECT_EQ(run.status, store::RunStatus::Failed);
  EXPECT_FALSE(run.error.empty());
  EXPECT_EQ(run.metrics.at("loss").epochs.size(), 2u);
  EXPECT_TRUE(run.checkpoint_sha256.empty());
}

TEST_P(StoreRuns, QueriesByMetricsOnTheFinalOrBestEpochAndCompares) {
  store::Store s = store::Store::open(url());
  store::Runs runs = s.runs();
  // val_acc curves: a rises to 0.9; b peaks at 0.95 then falls to 0.7; c stays at 0.8.
  const std::vector<std::vector<double>> curves = {{0.5, 0.7, 0.9}, {0.6, 0.95, 0.7}, {0.8, 0.8}};
  std::vector<int64_t> ids;
  for (size_t r = 0; r < curves.size(); ++r) {
    const store::RunInfo info = runs.start(r < 2 ? "exp" : "other", "", "{}", r == 1 ? std::vector<std::string>{"x"} : std::vector<std::string>{});
    EXPECT_EQ(info.status, store::RunStatus::Running);
    EXPECT_EQ(info.name, info.experiment + "-" + std::to_string(info.id));
    for (size_t e = 0; e < curves[r].size(); ++e) runs.log_epoch(info.id, e, {{"val_acc", curves[r][e]}, {"loss", 1.0 / (e + 1)}});
    runs.finish(info.id);
    ids.push_back(info.id);
  }
  auto id_list = [](const std::vector<store::RunInfo>& v) {
    std::vector<int64_t> out;
    for (const auto& r : v) out.push_back(r.id);
    return out;
  };
  using store::At;
  EXPECT_EQ(id_list(runs.find({.experiment = "exp"})), (std::vector<int64_t>{ids[0], ids[1]}));
  EXPECT_EQ(id_list(runs.find({.tags = {"x"}})), (std::vector<int64_t>{ids[1]}));
  EXPECT_EQ(id_list(runs.find({.metrics = {{"val_acc", ">", 0.75, At::Final}}})), (std::vector<int64_t>{ids[0], ids[2]}));
  EXPECT_EQ(id_list(runs.find({.metrics = {{"val_acc", ">", 0.92, At::Max}}})), (std::vector<int64_t>{ids[1]}));
  EXPECT_EQ(id_list(runs.find({.metrics = {{"val_acc", "<=", 0.5, At::Min}}})), (std::vector<int64_t>{ids[0]}));
  EXPECT_TRUE(runs.find({.metrics = {{"nope", ">", 0}}}).empty());
  EXPECT_EQ(id_list(runs.find_top("val_acc", At::Max, 2)), (std::vector<int64_t>{ids[1], ids[0]}));
  EXPECT_EQ(id_list(runs.find_top("val_acc", At::Final, 1)), (std::vector<int64_t>{ids[0]}));
  EXPECT_EQ(id_list(runs.find_top("loss", At::Min, 1, {.experiment = "other"})), (std::vector<int64_t>{ids[2]}));
  const auto cmp = runs.compare({ids[2], ids[1]}, {"val_acc"});
  ASSERT_EQ(cmp.size(), 2u);
  EXPECT_EQ(cmp[0].metrics.size(), 1u);
  EXPECT_EQ(cmp[0].metrics.at("val_acc").values, curves[2]);
  EXPECT_EQ(cmp[1].metrics.at("val_acc").values, curves[1]);
  EXPECT_THROW(runs.compare({ids[0], 12345}), store::NotFoundError);
  EXPECT_THROW(runs.find({.metrics = {{"val_acc", "=>", 1}}}), ValueError);
  EXPECT_THROW(runs.log_epoch(ids[0], 5, {{"val_acc", 1}}), store::ConflictError);  // ended
  EXPECT_THROW(runs.finish(ids[0]), store::ConflictError);
  EXPECT_THROW(runs.start("e", "", "[1]"), ValueError);
  EXPECT_THROW(runs.finish(ids[0], store::RunStatus::Running), ValueError);  // not an end
}

TEST_P(StoreRuns, NaNMetricsRoundTripAndCheckpointsAreReferenceCounted) {
  store::Store s = store::Store::open(url());
  store::Runs runs = s.runs();
  const int64_t a = runs.start("e").id, b = runs.start("e").id;
  runs.log_epoch(a, 0, {{"loss", std::nan("")}});
  EXPECT_TRUE(std::isnan(runs.get(a).metrics.at("loss").values[0]));
  EXPECT_TRUE(runs.find({.metrics = {{"loss", "<", 1e300}}}).empty());
  runs.set_checkpoint(a, "same bytes");
  runs.set_checkpoint(b, "same bytes");
  EXPECT_EQ(count(url(), "blobs"), 1);
  EXPECT_EQ(runs.checkpoint(b), "same bytes");
  runs.set_checkpoint(b, "other bytes");  // replaces and releases
  EXPECT_EQ(count(url(), "blobs"), 2);
  runs.remove(a);
  EXPECT_EQ(count(url(), "blobs"), 1);
  EXPECT_EQ(runs.checkpoint(b), "other bytes");
  EXPECT_THROW(runs.get(a), store::NotFoundError);
  runs.remove(b);
  EXPECT_EQ(count(url(), "blobs"), 0);
  EXPECT_EQ(loom_test::stored_blob_count(s), 0u);
  EXPECT_EQ(count(url(), "run_metrics"), 0);
  EXPECT_EQ(s.gc().files_removed, 0);
}

TEST_P(StoreRuns, EpochsAreStampedWithTheTimeAndAnOlderStoreGainsTheColumn) {
  const std::string path = url();
  int64_t run = 0;
  {
    store::Store s = store::Store::open(path);
    run = s.runs().start("exp").id;
    s.runs().log_epoch(run, 0, {{"loss", 1.0}});
    s.runs().log_epoch(run, 0, {{"accuracy", 0.5}});
    s.runs().log_epoch(run, 1, {{"accuracy", 0.75}});
  }
  // Made into a store of schema version 6 (before per-epoch times), with one epoch logged then.
  raw_sql(path, "ALTER TABLE run_metrics DROP COLUMN time_ms");
  raw_sql(path, "DROP TABLE dataset_queries");  // nor named queries (migration 8)
  raw_sql(path, "DROP TABLE run_metric_summaries");  // nor summaries (migration 9)
  raw_sql(path, "UPDATE loom_schema SET version = 6");
  const auto before = std::chrono::system_clock::now();
  store::Store s = store::Store::open(path);  // migrates
  EXPECT_EQ(s.schema_version(), store::Store::library_schema_version());
  {  // the summaries of the epochs logged before, computed by the migration
    const auto summary = s.runs().summaries().at(0).metrics;
    ASSERT_EQ(summary.size(), 2u);
    EXPECT_EQ(summary.at("loss").epochs, 1);
    EXPECT_EQ(summary.at("loss").final, 1.0);
    EXPECT_EQ(summary.at("accuracy").epochs, 2);
    EXPECT_EQ(summary.at("accuracy").final, 0.75);
    EXPECT_EQ(summary.at("accuracy").min, 0.5);
  }
  s.runs().log_epoch(run, 1, {{"loss", 0.5}});
  s.runs().log_epoch(run, 2, {{"loss", 0.25}});
  const auto after = std::chrono::system_clock::now();
  auto ms = [](std::chrono::system_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  };
  const store::Curve c = s.runs().get(run).metrics.at("loss");
  EXPECT_EQ(c.values, (std::vector<double>{1.0, 0.5, 0.25}));
  ASSERT_EQ(c.times_ms.size(), 3u);
  EXPECT_EQ(c.times_ms[0], 0);  // logged before the store recorded times
  for (size_t e = 1; e < 3; ++e) {
    EXPECT_GE(c.times_ms[e], ms(before));
    EXPECT_LE(c.times_ms[e], ms(after));
  }
  EXPECT_LE(c.times_ms[1], c.times_ms[2]);
  const store::MetricSummary loss = s.runs().summaries().at(0).metrics.at("loss");
  EXPECT_EQ(loss.epochs, 3);
  EXPECT_EQ(loss.final, 0.25);
  EXPECT_EQ(loss.max, 1.0);
}

// summaries() reads what log_epoch keeps in brief; it must agree with the curves find() loads:
// the last epoch's value (NaN when it is NaN), min and max skipping NaN, the epoch count, over
// runs with and without tags, a metric missing from a run, epochs logged out of order, a value
// replaced.
TEST_P(StoreRuns, SummariesAgreeWithTheCurvesTheyReduce) {
  store::Store s = store::Store::open(url());
  store::Runs runs = s.runs();
  const double nan = std::nan("");
  const int64_t a = runs.start("exp", "a", R"({"lr": 0.1})", {"x", "y"}).id;
  const int64_t b = runs.start("exp", "b", "{}", {"y"}).id;
  const int64_t c = runs.start("other", "c").id;
  const int64_t empty = runs.start("exp", "no-metrics").id;
  for (int64_t e : {2, 0, 1}) runs.log_epoch(a, e, {{"loss", 1.0 / (e + 1)}, {"acc", e == 1 ? nan : 0.5 + 0.1 * e}});
  runs.log_epoch(b, 0, {{"loss", 0.2}});
  runs.log_epoch(b, 1, {{"loss", nan}});
  runs.log_epoch(b, 0, {{"loss", 0.7}});  // replaces the lowest value
  runs.log_epoch(c, 0, {{"acc", nan}});
  runs.finish(a);

  const std::vector<store::RunSummary> all = runs.summaries();
  const std::vector<store::RunInfo> full = runs.find();
  ASSERT_EQ(all.size(), 4u);
  ASSERT_EQ(full.size(), 4u);
  auto same = [](double x, double y) { return (std::isnan(x) && std::isnan(y)) || x == y; };
  for (size_t i = 0; i < all.size(); ++i) {
    const store::RunInfo& r = full[i];
    EXPECT_EQ(all[i].run.id, r.id);
    EXPECT_EQ(all[i].run.name, r.name);
    EXPECT_EQ(all[i].run.tags, r.tags);
    EXPECT_EQ(all[i].run.status, r.status);
    EXPECT_EQ(all[i].run.hyper_parameters, r.hyper_parameters);
    EXPECT_TRUE(all[i].run.metrics.empty());
    ASSERT_EQ(all[i].metrics.size(), r.metrics.size()) << r.name;
    for (const auto& [name, curve] : r.metrics) {
      const store::MetricSummary& m = all[i].metrics.at(name);
      double lo = nan, hi = nan;
      for (double v : curve.values)
        if (!std::isnan(v)) lo = std::isnan(lo) ? v : std::min(lo, v), hi = std::isnan(hi) ? v : std::max(hi, v);
      EXPECT_EQ(m.epochs, static_cast<int64_t>(curve.values.size())) << r.name << " " << name;
      EXPECT_TRUE(same(m.final, curve.values.back())) << r.name << " " << name;
      EXPECT_TRUE(same(m.min, lo)) << r.name << " " << name;
      EXPECT_TRUE(same(m.max, hi)) << r.name << " " << name;
    }
  }
  // by hand, to be sure the reference above is what it should be
  EXPECT_EQ(all[0].run.tags, (std::vector<std::string>{"x", "y"}));
  EXPECT_DOUBLE_EQ(all[0].metrics.at("loss").final, 1.0 / 3);
  EXPECT_DOUBLE_EQ(all[0].metrics.at("acc").min, 0.5);
  EXPECT_DOUBLE_EQ(all[0].metrics.at("acc").max, 0.7);
  EXPECT_TRUE(std::isnan(all[1].metrics.at("loss").final));
  EXPECT_DOUBLE_EQ(all[1].metrics.at("loss").max, 0.7);
  EXPECT_DOUBLE_EQ(all[1].metrics.at("loss").min, 0.7);  // not the replaced 0.2
  EXPECT_TRUE(std::isnan(all[2].metrics.at("acc").min));
  EXPECT_EQ(all[2].metrics.at("acc").epochs, 1);
  EXPECT_TRUE(all[3].metrics.empty());

  // the same filters as find(), and only the asked-for curves from find(query, metrics)
  const std::vector<store::RunSummary> tagged = runs.summaries({.experiment = "exp", .tags = {"y"}});
  ASSERT_EQ(tagged.size(), 2u);
  EXPECT_EQ(tagged[0].run.id, a);
  EXPECT_EQ(tagged[1].run.id, b);
  EXPECT_EQ(runs.summaries({.metrics = {{"loss", "<", 0.5, store::At::Final}}}).size(), 1u);
  const std::vector<store::RunInfo> only_loss = runs.find({.experiment = "exp"}, {"loss"});
  ASSERT_EQ(only_loss.size(), 3u);
  for (const auto& r : only_loss) EXPECT_EQ(r.metrics.size(), 1u) << r.name;  // an empty curve for a run without it
  EXPECT_EQ(only_loss[0].metrics.at("loss").epochs, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(only_loss[2].metrics.at("loss").values.empty());
  EXPECT_TRUE(runs.summaries({.experiment = "none"}).empty());
  EXPECT_THROW(runs.find({}, {"bad name\n"}), ValueError);
  // compare keeps the asked order, repeats included
  const std::vector<store::RunInfo> cmp = runs.compare({c, a, c});
  ASSERT_EQ(cmp.size(), 3u);
  EXPECT_EQ(cmp[0].id, c);
  EXPECT_EQ(cmp[1].id, a);
  EXPECT_EQ(cmp[2].id, c);
  EXPECT_EQ(cmp[1].tags, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(runs.compare({}).empty());
  // epoch by epoch over runs, NaN skipped; an epoch with only NaN, or an unknown run, adds nothing
  const store::EpochStatistics st = runs.epoch_statistics({a, b, c, empty, 9999}, "loss");
  EXPECT_EQ(st.epochs, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(st.count, (std::vector<int64_t>{2, 1, 1}));
  EXPECT_DOUBLE_EQ(st.mean[0], (1.0 + 0.7) / 2);
  EXPECT_DOUBLE_EQ(st.min[0], 0.7);
  EXPECT_DOUBLE_EQ(st.max[0], 1.0);
  EXPECT_DOUBLE_EQ(st.mean[1], 0.5);
  EXPECT_DOUBLE_EQ(st.mean[2], 1.0 / 3);
  EXPECT_TRUE(runs.epoch_statistics({c}, "acc").epochs.empty());
  EXPECT_TRUE(runs.epoch_statistics({}, "loss").epochs.empty());
  EXPECT_THROW(runs.epoch_statistics({a}, ""), ValueError);
}

// More runs than one statement can bind (PostgreSQL takes at most 65,535 parameters): compare
// and epoch_statistics read their ids in slices. 70,000 runs, written by SQL for speed: the loss
// of run i at epoch e is i + e; epoch 1 of the odd runs is NaN.
TEST_P(StoreRuns, ReadsOfThousandsOfRunsGoInSlices) {
  store::Store s = store::Store::open(url());
  store::Runs runs = s.runs();
  const int64_t first = runs.start("seed").id;
  const std::string numbers = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 70000) ";
  raw_sql(url(), "INSERT INTO runs (id, experiment, name, status, hyper_parameters, started_ms) " + numbers +
                     "SELECT i + " + std::to_string(first) + ", 'many', 'r' || i, 'finished', '{}', 0 FROM n");
  for (int e = 0; e < 2; ++e)
    raw_sql(url(), "INSERT INTO run_metrics (run_id, metric, epoch, value) " + numbers + "SELECT i + " + std::to_string(first) +
                       ", 'loss', " + std::to_string(e) + ", CASE WHEN " + std::to_string(e) + " = 1 AND i % 2 = 1 THEN NULL ELSE i + " +
                       std::to_string(e) + " END FROM n");
  std::vector<int64_t> ids;
  for (int64_t i = 70000; i >= 1; --i) ids.push_back(first + i);  // descending: the order kept
  ids.push_back(first + 7);                                       // and a repeat
  const std::vector<store::RunInfo> all = runs.compare(ids, {"loss"});
  ASSERT_EQ(all.size(), 70001u);
  EXPECT_EQ(all.front().name, "r70000");
  EXPECT_EQ(all[69999].name, "r1");
  EXPECT_EQ(all.back().name, "r7");
  EXPECT_EQ(all.front().metrics.at("loss").values, (std::vector<double>{70000, 70001}));
  const store::EpochStatistics st = runs.epoch_statistics(ids, "loss");
  ASSERT_EQ(st.epochs, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(st.count, (std::vector<int64_t>{70000, 35000}));  // each run once, repeats or not
  EXPECT_DOUBLE_EQ(st.mean[0], 35000.5);  // 1 ... 70000
  EXPECT_DOUBLE_EQ(st.mean[1], 35001 + 1.0);  // the even runs 2 ... 70000, plus 1
  EXPECT_EQ(st.min[0], 1);
  EXPECT_EQ(st.max[0], 70000);
  EXPECT_EQ(st.min[1], 3);
  EXPECT_EQ(st.max[1], 70001);
  EXPECT_THROW(runs.compare({first + 70001}), store::NotFoundError);
}
