// The model registry (docs/store.md): versions, metadata, queries, aliases, exact round trips of
// every zoo model, typed errors for damaged stores, atomic saves, blob deduplication and
// reference counts, concurrent writers; on both backends (tests/unit/store/store_test_util.h).
#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/graph/serialize.h>
#include <loom/io/model_file.h>
#include <loom/io/safetensors.h>
#include <loom/nn/activation.h>
#include <loom/nn/input.h>
#include <loom/nn/lambda.h>
#include <loom/nn/mode.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/store/catalog.h>
#include <loom/store/error.h>
#include <loom/store/model_registry.h>
#include <loom/store/store.h>
#include <loom/train/model.h>
#include <loom/train/optimizers.h>
#include <loom/train/train_step.h>
#include <loom/zoo/architectures.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "unit/common/core_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::same_bytes;
using loom_test::raw_sql;
using loom_test::small_mlp;
using loom_test::TempDir;
namespace fs = std::filesystem;

namespace {

// Every parameter and buffer equal bit for bit, and the same architecture.
void expect_same_model(const Graph& want, const Graph& got, const std::string& label) {
  EXPECT_EQ(graph_to_json(want), graph_to_json(got)) << label;
  const io::TensorMap a = io::graph_state(want), b = io::graph_state(got);
  ASSERT_EQ(a.size(), b.size()) << label;
  for (const auto& [k, t] : a) {
    ASSERT_TRUE(b.count(k)) << label << ": " << k;
    EXPECT_TRUE(same_bytes(t, b.at(k))) << label << ": " << k;
  }
}

std::vector<int64_t> versions_of(const std::vector<store::ModelInfo>& infos) {
  std::vector<int64_t> v;
  for (const auto& i : infos) v.push_back(i.version);
  return v;
}

class StoreModels : public loom_test::StoreBackendTest {};

}  // namespace

INSTANTIATE_STORE_BACKENDS(StoreModels);

TEST_P(StoreModels, SaveGetVersionsAndMetadata) {
  store::Store s = store::Store::open(url());
  store::Models models = s.models();
  const store::ModelInfo v1 = models.save("mlp", small_mlp(1), {{"accuracy", 0.8}, {"loss", 0.5}},
                                          R"({"lr": 0.01, "layers": [8, 3]})", {"baseline", "mnist", "mnist"});
  const store::ModelInfo v2 = models.save("mlp", small_mlp(2), {{"accuracy", 0.9}});
  const store::ModelInfo other = models.save("other", small_mlp(3));
  EXPECT_EQ(v1.version, 1);
  EXPECT_EQ(v2.version, 2);
  EXPECT_EQ(other.version, 1);
  EXPECT_GT(v1.created_ms, 1600000000000);
  EXPECT_LE(v1.created_ms, v2.created_ms);
  EXPECT_EQ(models.names(), (std::vector<std::string>{"mlp", "other"}));
  EXPECT_EQ(versions_of(models.versions("mlp")), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(models.versions("none").empty());
  const store::ModelInfo got = models.get("mlp", 1);
  EXPECT_EQ(got.metrics, (store::Metrics{{"accuracy", 0.8}, {"loss", 0.5}}));
  EXPECT_EQ(got.tags, (std::vector<std::string>{"baseline", "mnist"}));  // a set
  EXPECT_EQ(got.hyper_parameters, R"({"layers":[8,3],"lr":0.01})");
  EXPECT_EQ(got.weights_sha256, v1.weights_sha256);
  EXPECT_EQ(got.created_ms, v1.created_ms);
  EXPECT_EQ(models.get("mlp").version, 2);  // the latest
  EXPECT_EQ(models.get("mlp", "latest").version, 2);
  // Loads into a graph equal to the saved one, in a fresh Store object (another program).
  store::Store reopened = store::Store::open(url());
  expect_same_model(small_mlp(1), reopened.models().load("mlp", 1), "v1");
  expect_same_model(small_mlp(2), reopened.models().load(got.name, "latest"), "latest");
  // Not found names what exists.
  EXPECT_TRUE(contains_all(error_message<store::NotFoundError>([&] { models.get("mlp", 7); }), {"version 7", "from 1 to 2"}));
  EXPECT_TRUE(contains_all(error_message<store::NotFoundError>([&] { models.load("nope", 1); }), {"no model 'nope'"}));
  EXPECT_THROW(models.get("nope"), store::NotFoundError);
}

TEST_P(StoreModels, BadArgumentsAreValueErrors) {
  store::Models models = store::Store::open(url()).models();
  const Graph g = small_mlp(1);
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { models.save("", g); }), {"model name"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { models.save("a\nb", g); }), {"control characters"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { models.save("m", g, {{"acc", std::nan("")}}); }), {"'acc'", "NaN"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { models.save("m", g, {}, "[1, 2]"); }), {"JSON object"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { models.save("m", g, {}, "{bad"); }), {"JSON object"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { models.save("m", g, {}, "{}", {""}); }), {"tag"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { models.find({.metrics = {{"acc", "=>", 1}}}); }), {"'=>'", "valid"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { models.find_top("acc", store::Order::Max, 0); }), {"k is 0"}));
  // A graph that cannot be serialised is refused before anything is written.
  nn::Input x(4, Float32, "x");
  nn::Lambda lam({x}, [](const std::vector<Tensor>& t) { return t[0] * 2.0; }, Shape{-1, 4}, Float32, "lam");
  EXPECT_THROW(models.save("m", Graph::build({lam}, {x})), ValueError);
  EXPECT_TRUE(models.names().empty());
  EXPECT_EQ(raw_sql(url(), "SELECT COUNT(*) FROM blobs"), std::vector<std::string>{"0"});
  // infinities are metrics like any other
  EXPECT_EQ(models.save("m", g, {{"loss", INFINITY}}).metrics.at("loss"), INFINITY);
  EXPECT_EQ(models.get("m").metrics.at("loss"), INFINITY);
}

TEST_P(StoreModels, FindByNameTagsAndMetrics) {
  store::Models models = store::Store::open(url()).models();
  const Graph g = small_mlp(1);
  models.save("a", g, {{"acc", 0.70}, {"loss", 0.9}}, "{}", {"cnn"});
  models.save("a", g, {{"acc", 0.95}, {"loss", 0.2}}, "{}", {"cnn", "prod-candidate"});
  models.save("a", g, {{"acc", 0.90}}, "{}", {"cnn"});
  models.save("b", g, {{"acc", 0.95}, {"loss", 0.1}}, "{}", {"mlp"});
  models.save("b", g, {}, "{}", {});
  auto key = [](const std::vector<store::ModelInfo>& v) {
    std::vector<std::string> out;
    for (const auto& i : v) out.push_back(i.name + std::to_string(i.version));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(key(models.find()), (V{"a1", "a2", "a3", "b1", "b2"}));
  EXPECT_EQ(key(models.find({.name = "b"})), (V{"b1", "b2"}));
  EXPECT_EQ(key(models.find({.tags = {"cnn"}})), (V{"a1", "a2", "a3"}));
  EXPECT_EQ(key(models.find({.tags = {"cnn", "prod-candidate"}})), (V{"a2"}));
  EXPECT_EQ(key(models.find({.metrics = {{"acc", ">=", 0.9}}})), (V{"a2", "a3", "b1"}));
  EXPECT_EQ(key(models.find({.metrics = {{"acc", ">=", 0.9}, {"loss", "<", 0.5}}})), (V{"a2", "b1"}));
  EXPECT_EQ(key(models.find({.metrics = {{"acc", "==", 0.95}}})), (V{"a2", "b1"}));
  EXPECT_EQ(key(models.find({.metrics = {{"acc", "!=", 0.95}}})), (V{"a1", "a3"}));  // b2 has no acc
  EXPECT_EQ(key(models.find({.metrics = {{"acc", ">", 0.7}, {"acc", "<=", 0.9}}})), (V{"a3"}));
  EXPECT_EQ(key(models.find({.name = "a", .tags = {"mlp"}})), V{});
  // find_top: best first, ties to the older version, filters apply.
  EXPECT_EQ(key(models.find_top("acc", store::Order::Max, 2)), (V{"a2", "b1"}));
  EXPECT_EQ(key(models.find_top("acc", store::Order::Max, 10)), (V{"a2", "b1", "a3", "a1"}));
  EXPECT_EQ(key(models.find_top("loss", store::Order::Min)), (V{"b1"}));
  EXPECT_EQ(key(models.find_top("acc", store::Order::Max, 1, {.name = "a", .metrics = {{"loss", ">", 0.5}}})), (V{"a1"}));
  EXPECT_EQ(key(models.find_top("acc", store::Order::Min, 1, {.tags = {"cnn"}})), (V{"a1"}));
  EXPECT_TRUE(models.find_top("f1", store::Order::Max, 3).empty());
}

TEST_P(StoreModels, Aliases) {
  store::Models models = store::Store::open(url()).models();
  models.save("m", small_mlp(1));
  models.save("m", small_mlp(2));
  models.set_alias("m", "production", 1);
  models.set_alias("m", "production", 1);  // idempotent
  models.set_alias("m", "staging.v2", 2);
  EXPECT_EQ(models.get("m", "production").version, 1);
  EXPECT_EQ(models.get("m", 1).aliases, std::vector<std::string>{"production"});
  expect_same_model(small_mlp(1), models.load("m", "production"), "production");
  // A duplicate alias is a conflict unless moved explicitly.
  EXPECT_TRUE(contains_all(error_message<store::ConflictError>([&] { models.set_alias("m", "production", 2); }),
                           {"'production'", "version 1", "replace"}));
  EXPECT_EQ(models.get("m", "production").version, 1);
  models.set_alias("m", "production", 2, /*replace=*/true);
  EXPECT_EQ(models.get("m", "production").version, 2);
  EXPECT_EQ(models.get("m", 2).aliases, (std::vector<std::string>{"production", "staging.v2"}));
  // Bad aliases, unknown aliases and versions.
  for (const std::string& bad : std::vector<std::string>{"", "123", "latest", "has space", "a/b", std::string(65, 'a')})
    EXPECT_THROW(models.set_alias("m", bad, 1), ValueError) << bad;
  EXPECT_TRUE(contains_all(error_message<store::NotFoundError>([&] { models.get("m", "canary"); }),
                           {"no alias 'canary'", "production, staging.v2"}));
  EXPECT_THROW(models.load("m", "canary"), store::NotFoundError);
  EXPECT_THROW(models.set_alias("m", "x", 9), store::NotFoundError);
  EXPECT_THROW(models.set_alias("other", "x", 1), store::NotFoundError);
  // An aliased version cannot be deleted; after remove_alias it can.
  EXPECT_TRUE(contains_all(error_message<store::ConflictError>([&] { models.remove("m", 2); }), {"'production'", "'staging.v2'"}));
  models.remove_alias("m", "production");
  models.remove_alias("m", "staging.v2");
  EXPECT_THROW(models.remove_alias("m", "production"), store::NotFoundError);
  models.remove("m", 2);
  EXPECT_EQ(versions_of(models.versions("m")), std::vector<int64_t>{1});
}

TEST_P(StoreModels, EveryZooModelRoundTripsExactly) {
  store::Store s = store::Store::open(url());
  const std::vector<std::pair<zoo::Network, Tensor>> cases = {
      {zoo::mlp(12, {8, 8}, 3, nn::gelu, 0.3), uniform({2, 12})},
      {zoo::lenet(), uniform({2, 1, 28, 28})},
      {zoo::fashion_cnn(), uniform({2, 1, 28, 28})},
      {zoo::vgg({8, 0, 8, 0}, 5, true, 0.5, 3, 16, "vgg_tiny"), uniform({2, 3, 10, 10})},
      {zoo::resnet({1, 1, 1, 1}, 7, 3, "resnet_tiny"), uniform({2, 3, 32, 32})},
      {zoo::densenet(8, {2, 3}, 16, 2, 0.5, 4, 3, "densenet_tiny"), uniform({2, 3, 32, 32})},
      {zoo::unet(2, 3, 4, 2, true), uniform({1, 2, 8, 12})},
      {zoo::lstm_lm(30, 8, 12, 2, 0.1), randint(0, 30, {2, 5})},
      {zoo::transformer_classifier(40, 6, 16, 2, 32, 2, 3), randint(0, 40, {2, 6})},
  };
  for (const auto& [m, x] : cases) {
    // Non-default buffers too (batch-norm running statistics after a training step).
    {
      nn::ModeScope train(nn::Mode::Train);
      m.graph.compile()(x);
    }
    s.models().save(m.name, m.graph, {{"params", double(m.parameter_count())}});
  }
  store::Store other = store::Store::open(url());
  for (const auto& [m, x] : cases) {
    const Graph back = other.models().load(m.name, 1);
    expect_same_model(m.graph, back, m.name);
    EXPECT_TRUE(same_bytes(m.graph.compile()(x), back.compile()(x))) << m.name;
  }
}

TEST_P(StoreModels, SavesATrainModelsGraph) {
  store::Models models = store::Store::open(url()).models();
  const Graph g = small_mlp(4);
  train::Model model(g, [](const Tensor& y, const Tensor& t) { return mean(square(y - t)); },
                     std::make_shared<train::Adam>(g.parameters()));
  models.save("trained", model, {{"loss", 0.1}});
  expect_same_model(g, models.load("trained", 1), "train::Model");
}

TEST_P(StoreModels, SameWeightsShareOneBlobAndDeletionCountsReferences) {
  store::Store s = store::Store::open(url());
  store::Models models = s.models();
  const store::ModelInfo a = models.save("m", small_mlp(1));
  const store::ModelInfo b = models.save("m", small_mlp(1), {{"acc", 1}});  // same weights
  const store::ModelInfo c = models.save("n", small_mlp(1));                // same weights, other name
  const store::ModelInfo d = models.save("m", small_mlp(2));
  EXPECT_EQ(a.weights_sha256, b.weights_sha256);
  EXPECT_EQ(a.weights_sha256, c.weights_sha256);
  EXPECT_NE(a.weights_sha256, d.weights_sha256);
  EXPECT_EQ(loom_test::stored_blob_count(s), 2u);
  EXPECT_EQ(raw_sql(url(), "SELECT refcount FROM blobs WHERE sha256 = '" + a.weights_sha256 + "'"), std::vector<std::string>{"3"});
  models.remove("m", 1);
  EXPECT_TRUE(loom_test::blob_stored(s, a.weights_sha256));
  expect_same_model(small_mlp(1), models.load("m", 2), "kept");
  models.remove("m", 2);
  EXPECT_TRUE(loom_test::blob_stored(s, a.weights_sha256));
  expect_same_model(small_mlp(1), models.load("n", 1), "kept");
  models.remove("n", 1);
  EXPECT_FALSE(loom_test::blob_stored(s, a.weights_sha256));  // the last reference went
  EXPECT_EQ(raw_sql(url(), "SELECT COUNT(*) FROM blobs"), std::vector<std::string>{"1"});
  EXPECT_EQ(raw_sql(url(), "SELECT COUNT(*) FROM model_metrics"), std::vector<std::string>{"0"});
  EXPECT_THROW(models.remove("m", 1), store::NotFoundError);
  // Version numbers are never reused.
  models.remove("m", d.version);
  EXPECT_EQ(models.save("m", small_mlp(3)).version, 4);
  EXPECT_EQ(loom_test::stored_blob_count(s), 1u);
}

TEST_P(StoreModels, DamagedBlobsAreTypedErrorsNamingTheModel) {
  store::Store s = store::Store::open(url());
  store::Models models = s.models();
  const store::ModelInfo a = models.save("a", small_mlp(1));
  const store::ModelInfo b = models.save("b", small_mlp(2));
  // Valid zstd holding other bytes (b's blob under a's name): the hash does not match.
  const std::string a_bytes = loom_test::stored_blob(s, a.weights_sha256), b_bytes = loom_test::stored_blob(s, b.weights_sha256);
  loom_test::set_stored_blob(s, a.weights_sha256, b_bytes);
  raw_sql(url(), "UPDATE blobs SET stored_size = " + std::to_string(b_bytes.size()) + " WHERE sha256 = '" + a.weights_sha256 + "'");
  EXPECT_TRUE(contains_all(error_message<store::BlobError>([&] { models.load("a", 1); }), {"model 'a' version 1", a.weights_sha256, "hash to " + b.weights_sha256}));
  // Truncated: the size does not match the row.
  loom_test::set_stored_blob(s, a.weights_sha256, a_bytes.substr(0, 10));
  EXPECT_TRUE(contains_all(error_message<store::BlobError>([&] { models.load("a", 1); }), {"model 'a' version 1", "holds 10 bytes"}));
  // Missing.
  loom_test::remove_stored_blob(s, a.weights_sha256);
  EXPECT_TRUE(contains_all(error_message<store::BlobError>([&] { models.load("a", 1); }), {"model 'a' version 1", "cannot be read"}));
  // The metadata stays readable, other models load, and saving the same weights again repairs the file.
  EXPECT_EQ(models.get("a", 1).weights_sha256, a.weights_sha256);
  EXPECT_NO_THROW(models.load("b", 1));
  models.save("a", small_mlp(1));
  expect_same_model(small_mlp(1), models.load("a", 1), "repaired");
}

TEST_P(StoreModels, WeightsThatDoNotFitTheArchitectureAreRefused) {
  store::Models models = store::Store::open(url()).models();
  models.save("wide", small_mlp(1, 16));
  models.save("narrow", small_mlp(1, 8));
  // A damaged row: the narrow architecture with the wide weights.
  raw_sql(url(), "UPDATE models SET architecture = (SELECT architecture FROM models WHERE name = 'narrow') WHERE name = 'wide'");
  const std::string msg = error_message<Error>([&] { models.load("wide", 1); });
  EXPECT_TRUE(contains_all(msg, {"model 'wide' version 1", "l1/"})) << msg;
  // An architecture that is not a graph.
  raw_sql(url(), "UPDATE models SET architecture = '{\"layers\": 3}' WHERE name = 'narrow'");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { models.load("narrow", 1); }), {"model 'narrow' version 1"}));
}

TEST_P(StoreModels, AFailedSaveLeavesNoRowAndNoReferencedBlob) {
  const std::string db = url();
  store::Store s = store::Store::open(db);
  // Fail after the blob is stored and its row inserted, before the commit.
  if (pg())
    raw_sql(db, "CREATE FUNCTION fail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$;"
                "CREATE TRIGGER fail_tags BEFORE INSERT ON model_tags FOR EACH ROW EXECUTE FUNCTION fail()");
  else
    raw_sql(db, "CREATE TRIGGER fail_tags BEFORE INSERT ON model_tags BEGIN SELECT RAISE(ABORT, 'injected failure'); END");
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { s.models().save("m", small_mlp(1), {{"acc", 1}}, "{}", {"t"}); }),
                           {"injected failure"}));
  for (const char* table : {"models", "model_names", "model_metrics", "model_tags", "blobs", "blob_data"})
    EXPECT_EQ(raw_sql(db, std::string("SELECT COUNT(*) FROM ") + table), std::vector<std::string>{"0"}) << table;
  // SQLite: the file is durable but unreferenced, gc's to remove; PostgreSQL: rolled back with the row.
  EXPECT_EQ(loom_test::stored_blob_count(s), pg() ? 0u : 1u);
  EXPECT_EQ(s.gc().files_removed, pg() ? 0 : 1);
  EXPECT_EQ(loom_test::stored_blob_count(s), 0u);
  raw_sql(db, pg() ? "DROP TRIGGER fail_tags ON model_tags" : "DROP TRIGGER fail_tags");
  if (!pg()) {
    // Fail while writing the blob (a file where its directory should be).
    const store::ModelInfo probe = store::Store::open(url("probe")).models().save("m", small_mlp(1));
    fs::remove_all(s.blob_dir() + "/" + probe.weights_sha256.substr(0, 2));
    { std::ofstream f(s.blob_dir() + "/" + probe.weights_sha256.substr(0, 2)); }
    EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { s.models().save("m", small_mlp(1)); }), {"in the way"}));
    EXPECT_EQ(raw_sql(db, "SELECT COUNT(*) FROM models"), std::vector<std::string>{"0"});
    fs::remove(s.blob_dir() + "/" + probe.weights_sha256.substr(0, 2));
  }
  EXPECT_EQ(s.models().save("m", small_mlp(1)).version, 1);  // no version number was used up
  expect_same_model(small_mlp(1), s.models().load("m", 1), "after the failures");
}

TEST_P(StoreModels, ConcurrentWritersGetDistinctVersions) {
  store::Store::open(url());
  constexpr int kThreads = 3, kEach = 6;
  std::vector<std::vector<int64_t>> got(kThreads);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        store::Store s = store::Store::open(url());  // its own connection
        for (int i = 0; i < kEach; ++i) got[t].push_back(s.models().save("shared", small_mlp(t * 100 + i)).version);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  std::set<int64_t> all;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], "");
    EXPECT_TRUE(std::is_sorted(got[t].begin(), got[t].end()));
    all.insert(got[t].begin(), got[t].end());
  }
  EXPECT_EQ(all.size(), size_t(kThreads * kEach));
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kThreads * kEach);
  // One Store object shared by threads is serialised too.
  store::Store shared = store::Store::open(url());
  std::vector<std::thread> more;
  for (int t = 0; t < 2; ++t) more.emplace_back([&] { for (int i = 0; i < 3; ++i) shared.models().save("one", small_mlp(i)); });
  for (auto& th : more) th.join();
  EXPECT_EQ(versions_of(shared.models().versions("one")), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
}
