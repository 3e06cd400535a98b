// The dataset store (docs/store.md, "Datasets"): bit-exact round trips, immutable versions,
// IDX/NPY/CSV import, queries against an in-memory filter, the lazy view through the loader
// with workers, lazy shard reads, blob reference counts on removal, damaged shards and bad input.
#include <gtest/gtest.h>
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/file.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/data/dataset.h>
#include <loom/data/idx.h>
#include <loom/data/loader.h>
#include <loom/data/npy.h>
#include <loom/ops/creation.h>
#include <loom/ops/random.h>
#include <loom/store/catalog.h>
#include <loom/store/datasets.h>
#include <loom/store/error.h>
#include <loom/store/store.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "unit/common/core_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using loom_test::error_message;
using loom_test::raw_sql;
using loom_test::same_bytes;
using loom_test::TempDir;
namespace fs = std::filesystem;

namespace {

int64_t count(const std::string& db, const std::string& table) { return std::stoll(raw_sql(db, "SELECT COUNT(*) FROM " + table)[0]); }

// Sample i of a synthetic dataset: x (3, 2) float32 with special values, y int64, metadata and tags.
store::Sample synthetic(int64_t i) {
  Generator g(100 + i);
  Tensor x = normal({3, 2}, 0, 1, Float32, Device::cpu(), &g);
  float* p = static_cast<float*>(x.data_ptr());
  if (i % 5 == 0) p[0] = -0.0f;
  if (i % 7 == 0) p[1] = std::nanf("");
  const double score = std::round(static_cast<const float*>(x.data_ptr())[2] * 1000) / 1000;
  store::Sample s;
  s.tensors = {{"x", x}, {"y", full({}, i % 10, Int64, Device::cpu())}};
  s.metadata = nlohmann::json{{"label", i % 10}, {"score", score}, {"name", i % 3 ? "b" : "a"}, {"even", i % 2 == 0}}.dump();
  if (i % 4 == 0) s.tags.push_back("four");
  if (i % 6 == 0) s.tags.push_back("six");
  return s;
}

store::DatasetInfo write_synthetic(store::Store& s, const std::string& name, int64_t n, int64_t shard_samples) {
  store::DatasetWriter w = s.datasets().create(name, {.fields = {"x", "y"}, .tags = {"synthetic"}, .shard_samples = shard_samples});
  for (int64_t i = 0; i < n; ++i) w.append(synthetic(i));
  return w.commit();
}

std::vector<int64_t> indices_of(const store::DatasetView& v) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < v.size(); ++i) out.push_back(v.index(i));
  return out;
}

}  // namespace

class StoreDatasets : public loom_test::StoreBackendTest {};
INSTANTIATE_STORE_BACKENDS(StoreDatasets);

TEST_P(StoreDatasets, RoundTripIsBitExactWithMetadataAndTags) {
  store::Store s = store::Store::open(url());
  const store::DatasetInfo info = write_synthetic(s, "syn", 10, 4);
  EXPECT_EQ(info.version, 1);
  EXPECT_EQ(info.samples, 10);
  EXPECT_EQ(info.shards, 3);
  ASSERT_EQ(info.schema.size(), 2u);
  EXPECT_EQ(info.schema[0].name, "x");
  EXPECT_EQ(info.schema[0].shape, (Shape{3, 2}));
  EXPECT_EQ(info.schema[1].dtype, Int64);
  EXPECT_EQ(s.datasets().get("syn").tags, std::vector<std::string>{"synthetic"});
  auto view = s.datasets().query("syn", 1);
  ASSERT_EQ(view->size(), 10);
  for (int64_t i = 0; i < 10; ++i) {
    const store::Sample want = synthetic(i);
    const store::Sample got = view->sample(i);
    EXPECT_TRUE(same_bytes(got.tensors.at("x"), want.tensors.at("x"))) << i;
    EXPECT_TRUE(same_bytes(got.tensors.at("y"), want.tensors.at("y"))) << i;
    EXPECT_EQ(nlohmann::json::parse(got.metadata), nlohmann::json::parse(want.metadata));
    EXPECT_EQ(got.tags, want.tags);
  }
  // get_batch gathers the same bytes.
  const data::Batch b = view->get_batch({9, 0, 4});
  EXPECT_TRUE(same_bytes(b[0][0], synthetic(9).tensors.at("x")));
  EXPECT_TRUE(same_bytes(b[0][2], synthetic(4).tensors.at("x")));
  EXPECT_EQ(b[1].shape(), (Shape{3}));
  EXPECT_THROW(view->get(10), IndexError);
}

TEST_P(StoreDatasets, CommittedVersionsAreImmutableAndDraftsInvisible) {
  store::Store s = store::Store::open(url());
  store::DatasetWriter w1 = s.datasets().create("d", {.shard_samples = 2});
  for (int64_t i = 0; i < 5; ++i) w1.append(synthetic(i));
  w1.commit();
  EXPECT_THROW(w1.append(synthetic(5)), ValueError);
  EXPECT_THROW(w1.commit(), ValueError);
  store::DatasetWriter w2 = s.datasets().create("d", {.shard_samples = 2});
  for (int64_t i = 0; i < 4; ++i) w2.append(synthetic(i));  // two shards written, not committed
  EXPECT_EQ(s.datasets().versions("d").size(), 1u);
  EXPECT_THROW(s.datasets().query("d", 2), store::NotFoundError);
  for (int64_t i = 10; i < 13; ++i) w2.append(synthetic(i));
  w2.commit();
  const auto versions = s.datasets().versions("d");
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0].samples, 5);
  EXPECT_EQ(versions[1].samples, 7);
  // Version 1 still holds exactly its samples.
  auto v1 = s.datasets().query("d", 1);
  ASSERT_EQ(v1->size(), 5);
  for (int64_t i = 0; i < 5; ++i) EXPECT_TRUE(same_bytes(v1->get(i)[0], synthetic(i).tensors.at("x")));
  EXPECT_EQ(s.datasets().names(), std::vector<std::string>{"d"});
  // find / find_top by name and tags.
  write_synthetic(s, "e", 3, 0);
  EXPECT_EQ(s.datasets().find({.tags = {"synthetic"}}).size(), 1u);
  EXPECT_EQ(s.datasets().find({.name = "d"}).size(), 2u);
  // The catalog's find_top, as for models: ranked by a version's number, ties to the older one.
  EXPECT_EQ(s.datasets().find_top("version", store::Order::Max, 1, {.name = "d"})[0].version, 2);
  EXPECT_EQ(s.datasets().find_top("samples", store::Order::Min)[0].name, "e");          // 3 < 5 < 7
  const auto by_samples = s.datasets().find_top("samples", store::Order::Max, 2);
  ASSERT_EQ(by_samples.size(), 2u);
  EXPECT_EQ(by_samples[0].samples, 7);
  EXPECT_EQ(by_samples[1].samples, 5);
  EXPECT_EQ(s.datasets().find({.metrics = {{"samples", ">=", 5}}}).size(), 2u);
  EXPECT_EQ(s.datasets().find({.name = "d", .metrics = {{"shards", "==", 99}}}).size(), 0u);
  EXPECT_THROW(s.datasets().find_top("accuracy", store::Order::Max), ValueError);
  EXPECT_THROW(s.datasets().find({.metrics = {{"samples", "=~", 1}}}), ValueError);
  EXPECT_THROW(s.datasets().find_top("samples", store::Order::Max, 0), ValueError);
}

TEST_P(StoreDatasets, ImportsIdxNpyAndCsv) {
  store::Store s = store::Store::open(url());
  // IDX: 5 images of 2x3 uint8 and 5 labels, written byte by byte (big-endian dims).
  std::string images = std::string("\0\0\x08\x03", 4) + std::string("\0\0\0\x05\0\0\0\x02\0\0\0\x03", 12);
  std::string labels = std::string("\0\0\x08\x01", 4) + std::string("\0\0\0\x05", 4);
  for (int i = 0; i < 30; ++i) images += static_cast<char>(i * 7);
  for (int i = 0; i < 5; ++i) labels += static_cast<char>(4 - i);
  write_file_atomic(tmp / "img.idx", images);
  write_file_atomic(tmp / "lab.idx", labels);
  const store::DatasetInfo idx = s.datasets().import_idx("idx", tmp / "img.idx", tmp / "lab.idx", {.shard_samples = 2});
  EXPECT_EQ(idx.samples, 5);
  auto view = s.datasets().query("idx", 1);
  const Tensor want_x = data::read_idx(tmp / "img.idx"), want_y = data::read_idx(tmp / "lab.idx");
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_TRUE(same_bytes(view->get(i)[0], want_x[i]));
    EXPECT_TRUE(same_bytes(view->get(i)[1], want_y[i]));
    EXPECT_EQ(nlohmann::json::parse(view->metadata(i))["label"], 4 - i);
  }
  EXPECT_EQ(s.datasets().query("idx", 1, {.where = {{"label", "==", 3}}})->size(), 1);

  // NPY: one file per field.
  Generator g(3);
  const Tensor a = normal({6, 4}, 0, 1, Float64, Device::cpu(), &g);
  const Tensor b = from_vector<int32_t>({1, 2, 3, 1, 2, 3}, {6});
  data::save_npy(tmp / "a.npy", a);
  data::save_npy(tmp / "b.npy", b);
  s.datasets().import_npy("npy", {{"a", tmp / "a.npy"}, {"b", tmp / "b.npy"}}, {.metadata = {{"b", "cls"}}});
  auto nv = s.datasets().query("npy", 1, {.where = {{"cls", ">=", 2}}});
  EXPECT_EQ(indices_of(*nv), (std::vector<int64_t>{1, 2, 4, 5}));
  for (int64_t i = 0; i < nv->size(); ++i) EXPECT_TRUE(same_bytes(nv->get(i)[0], a[nv->index(i)]));

  // CSV: columns grouped into fields.
  write_file_atomic(tmp / "t.csv", "f1,f2,label\n1.5,2,0\n-3,4.25,1\n5,6,1\n");
  s.datasets().import_csv("csv", tmp / "t.csv", {{"x", {"f1", "f2"}}, {"y", {"label"}}}, {.metadata = {{"y", "label"}}});
  auto cv = s.datasets().query("csv", 1, {.where = {{"label", "==", 1}}});
  ASSERT_EQ(cv->size(), 2);
  EXPECT_TRUE(same_bytes(cv->get(0)[0], from_vector<float>({-3, 4.25f}, {2})));
  EXPECT_TRUE(same_bytes(cv->get(1)[1], full({}, 1, Float32, Device::cpu())));
  // A reader's error is its IOError; nothing is written.
  const int64_t rows = count(url(), "datasets");
  EXPECT_THROW(s.datasets().import_npy("bad", {{"a", tmp / "missing.npy"}}), IOError);
  EXPECT_EQ(count(url(), "datasets"), rows);
}

TEST_P(StoreDatasets, QueriesMatchAnInMemoryFilter) {
  store::Store s = store::Store::open(url());
  const int64_t n = 120;
  write_synthetic(s, "q", n, 16);
  std::vector<nlohmann::json> meta;
  std::vector<std::vector<std::string>> tags;
  for (int64_t i = 0; i < n; ++i) {
    meta.push_back(nlohmann::json::parse(synthetic(i).metadata));
    tags.push_back(synthetic(i).tags);
  }
  struct Case {
    store::SampleQuery query;
    std::function<bool(int64_t)> keep;
    std::function<bool(int64_t, int64_t)> before;  // empty: by index
  };
  auto has = [&](int64_t i, const char* t) { return std::find(tags[i].begin(), tags[i].end(), t) != tags[i].end(); };
  const std::vector<Case> cases = {
      {{.where = {{"label", "==", 3}}}, [&](int64_t i) { return meta[i]["label"] == 3; }, {}},
      {{.where = {{"label", "!=", 3}, {"label", "<", 6}}}, [&](int64_t i) { return meta[i]["label"] != 3 && meta[i]["label"] < 6; }, {}},
      {{.where = {{"score", ">", 0.25}, {"label", ">=", 2}, {"label", "<=", 7}}},
       [&](int64_t i) { return meta[i]["score"] > 0.25 && meta[i]["label"] >= 2 && meta[i]["label"] <= 7; }, {}},
      {{.where = {{"name", "==", "a"}}}, [&](int64_t i) { return meta[i]["name"] == "a"; }, {}},
      {{.where = {{"name", "!=", "a"}, {"even", "==", 1}}}, [&](int64_t i) { return meta[i]["name"] != "a" && meta[i]["even"] == true; }, {}},
      {{.tags = {"four", "six"}}, [&](int64_t i) { return has(i, "four") && has(i, "six"); }, {}},
      {{.tags = {"four"}, .where = {{"label", ">", 4}}}, [&](int64_t i) { return has(i, "four") && meta[i]["label"] > 4; }, {}},
      {{.order_by = "score"}, [](int64_t) { return true; },
       [&](int64_t a, int64_t b) { return meta[a]["score"] != meta[b]["score"] ? meta[a]["score"] < meta[b]["score"] : a < b; }},
      {{.order_by = "score", .descending = true, .offset = 5, .limit = 17}, [](int64_t) { return true; },
       [&](int64_t a, int64_t b) { return meta[a]["score"] != meta[b]["score"] ? meta[a]["score"] > meta[b]["score"] : a < b; }},
      {{.where = {{"label", "<", 5}}, .order_by = "label", .limit = 9}, [&](int64_t i) { return meta[i]["label"] < 5; },
       [&](int64_t a, int64_t b) { return meta[a]["label"] != meta[b]["label"] ? meta[a]["label"] < meta[b]["label"] : a < b; }},
      {{.descending = true, .offset = 100}, [](int64_t) { return true; }, [](int64_t a, int64_t b) { return a > b; }},
      {{.where = {{"missing", "==", 1}}}, [](int64_t) { return false; }, {}},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    std::vector<int64_t> want;
    for (int64_t i = 0; i < n; ++i)
      if (cases[c].keep(i)) want.push_back(i);
    if (cases[c].before) std::stable_sort(want.begin(), want.end(), cases[c].before);
    const int64_t off = std::min<int64_t>(cases[c].query.offset, static_cast<int64_t>(want.size()));
    want.erase(want.begin(), want.begin() + off);
    if (cases[c].query.limit >= 0 && static_cast<int64_t>(want.size()) > cases[c].query.limit) want.resize(cases[c].query.limit);
    auto view = s.datasets().query("q", 1, cases[c].query);
    EXPECT_EQ(indices_of(*view), want) << "case " << c;
    EXPECT_FALSE(c < 10 && want.empty()) << "case " << c << " selects nothing: a weak case";
  }
}

TEST_P(StoreDatasets, LazyViewThroughTheLoaderWithTwoWorkersGivesExactlyTheQuery) {
  store::Store s = store::Store::open(url());
  write_synthetic(s, "l", 90, 8);
  auto view = s.datasets().query("l", 1, {.where = {{"label", "<", 7}}, .order_by = "score", .fields = {"y", "x"}, .cache_shards = 3});
  ASSERT_GT(view->size(), 40);
  data::DataLoader loader(view, {.batch_size = 7, .n_jobs = 2, .prefetch = 4});
  int64_t seen = 0;
  for (const data::Batch& b : loader) {
    ASSERT_EQ(b.size(), 2u);
    for (int64_t k = 0; k < b[0].shape()[0]; ++k, ++seen) {
      const store::Sample want = synthetic(view->index(seen));
      EXPECT_TRUE(same_bytes(b[0][k], want.tensors.at("y")));
      EXPECT_TRUE(same_bytes(b[1][k], want.tensors.at("x")));
    }
  }
  EXPECT_EQ(seen, view->size());
}

TEST_P(StoreDatasets, ShardsAreReadLazilyAndCached) {
  store::Store s = store::Store::open(url());
  write_synthetic(s, "z", 40, 10);  // 4 shards
  auto one = s.datasets().query("z", 1, {.offset = 25, .limit = 1});
  EXPECT_EQ(one->shard_reads(), 0);  // a query reads no shard
  one->get(0);
  EXPECT_EQ(one->shard_reads(), 1);
  auto shard1 = s.datasets().query("z", 1, {.offset = 10, .limit = 10});
  for (int64_t i = 0; i < shard1->size(); ++i) shard1->get(i);
  shard1->get_batch({0, 5, 9});
  EXPECT_EQ(shard1->shard_reads(), 1);
  auto all = s.datasets().query("z", 1, {.cache_shards = 1});
  all->get(0);
  all->get(15);
  all->get(1);  // shard 0 was evicted by shard 1 (cache of one)
  EXPECT_EQ(all->shard_reads(), 3);
}

TEST_P(StoreDatasets, RemovalKeepsBlobsInUseAndFreesTheRest) {
  store::Store s = store::Store::open(url());
  write_synthetic(s, "r", 12, 4);                          // shards: [0,4) [4,8) [8,12)
  store::DatasetWriter w = s.datasets().create("r", {.fields = {"x", "y"}, .shard_samples = 4});
  for (int64_t i = 0; i < 8; ++i) w.append(synthetic(i));   // the same first two shards
  for (int64_t i = 50; i < 52; ++i) w.append(synthetic(i));
  w.commit();
  EXPECT_EQ(count(url(), "blobs"), 4);                  // deduplicated: 3 + 1 new
  EXPECT_EQ(loom_test::stored_blob_count(s), 4);
  s.datasets().remove("r", 1);
  EXPECT_EQ(count(url(), "blobs"), 3);
  EXPECT_EQ(loom_test::stored_blob_count(s), 3);
  auto v2 = s.datasets().query("r", 2);
  for (int64_t i = 0; i < v2->size(); ++i) EXPECT_TRUE(same_bytes(v2->get(i)[0], synthetic(i < 8 ? i : 42 + i).tensors.at("x")));
  EXPECT_EQ(s.gc().files_removed, 0);
  s.datasets().remove("r", 2);
  EXPECT_EQ(count(url(), "blobs"), 0);
  EXPECT_EQ(count(url(), "dataset_samples"), 0);
  EXPECT_EQ(count(url(), "dataset_sample_meta"), 0);
  EXPECT_EQ(loom_test::stored_blob_count(s), 0);
  EXPECT_THROW(s.datasets().remove("r", 2), store::NotFoundError);
  // A version number is never reused.
  EXPECT_EQ(write_synthetic(s, "r", 1, 0).version, 3);
}

TEST_P(StoreDatasets, CorruptShardIsABlobError) {
  store::Store s = store::Store::open(url());
  write_synthetic(s, "c", 8, 4);
  const std::string blob = raw_sql(s.path(), "SELECT blob FROM dataset_shards WHERE shard = 1")[0];
  std::string bytes = loom_test::stored_blob(s, blob);
  bytes[bytes.size() / 2] ^= 0x5a;
  loom_test::set_stored_blob(s, blob, bytes);
  auto view = s.datasets().query("c", 1);
  EXPECT_NO_THROW(view->get(0));  // shard 0 is intact
  const std::string msg = error_message<store::BlobError>([&] { view->get(5); });
  EXPECT_NE(msg.find(blob), std::string::npos) << msg;
  EXPECT_NE(msg.find("shard 1"), std::string::npos) << msg;
  data::DataLoader loader(view, {.batch_size = 8, .n_jobs = 2});
  EXPECT_THROW(loader.next(), store::BlobError);
}

TEST_P(StoreDatasets, BadInputIsATypedErrorAndWritesNothing) {
  store::Store s = store::Store::open(url());
  write_synthetic(s, "b", 5, 0);
  auto q = [&](store::SampleQuery query) { s.datasets().query("b", 1, query); };
  EXPECT_NE(error_message<ValueError>([&] { q({.where = {{"label", "=~", 3}}}); }).find("=~"), std::string::npos);
  EXPECT_THROW(q({.where = {{"name", "<", "a"}}}), ValueError);
  EXPECT_THROW(q({.where = {{"score", ">", std::nan("")}}}), ValueError);
  EXPECT_THROW(q({.offset = -1}), ValueError);
  EXPECT_THROW(q({.fields = {"nope"}}), ValueError);
  EXPECT_THROW(s.datasets().query("b", 9), store::NotFoundError);

  const int64_t blobs = count(url(), "blobs"), samples = count(url(), "dataset_samples");
  {
    store::DatasetWriter w = s.datasets().create("w", {.fields = {"x", "y"}, .shard_samples = 2});
    store::Sample missing = synthetic(0);
    missing.tensors.erase("y");
    EXPECT_NE(error_message<ValueError>([&] { w.append(missing); }).find("'y'"), std::string::npos);
    store::Sample extra = synthetic(0);
    extra.tensors.emplace("z", zeros({1}));
    EXPECT_THROW(w.append(extra), ValueError);
    w.append(synthetic(0));
    store::Sample wrong_shape = synthetic(1);
    wrong_shape.tensors["x"] = zeros({2, 3});
    EXPECT_THROW(w.append(wrong_shape), ShapeError);
    store::Sample wrong_dtype = synthetic(1);
    wrong_dtype.tensors["y"] = full({}, 1, Int32, Device::cpu());
    EXPECT_THROW(w.append(wrong_dtype), DTypeError);
    for (const char* bad : {R"({"a": NaN})", R"({"a": 1e999})", R"([1, 2])", "{"}) {
      store::Sample m = synthetic(1);
      m.metadata = bad;
      EXPECT_THROW(w.append(m), ValueError) << bad;
    }
    store::Sample bad_tag = synthetic(1);
    bad_tag.tags = {"a\nb"};
    EXPECT_THROW(w.append(bad_tag), ValueError);
    w.append(synthetic(1));  // a full shard: written as a draft
    w.append(synthetic(2));
    EXPECT_EQ(w.size(), 3);
    EXPECT_GT(count(url(), "blobs"), blobs);
  }  // destroyed uncommitted: the draft and its blobs go
  EXPECT_EQ(count(url(), "blobs"), blobs);
  EXPECT_EQ(count(url(), "dataset_samples"), samples);
  EXPECT_EQ(loom_test::stored_blob_count(s), blobs);
  EXPECT_TRUE(s.datasets().versions("w").empty());

  // An import that fails half way leaves nothing either.
  write_file_atomic(tmp / "x.npy", data::npy_to_bytes(zeros({40, 2})));
  write_file_atomic(tmp / "y.npy", data::npy_to_bytes(zeros({39})));
  EXPECT_THROW(s.datasets().import_npy("i", {{"x", tmp / "x.npy"}, {"y", tmp / "y.npy"}}), ShapeError);
  Tensor y = zeros({40});
  static_cast<float*>(y.data_ptr())[30] = std::nanf("");  // NaN metadata at sample 30, after full shards
  write_file_atomic(tmp / "y.npy", data::npy_to_bytes(y));
  EXPECT_THROW(s.datasets().import_npy("i", {{"x", tmp / "x.npy"}, {"y", tmp / "y.npy"}}, {.shard_samples = 4, .metadata = {{"y", "v"}}}),
               ValueError);
  EXPECT_EQ(count(url(), "blobs"), blobs);
  EXPECT_EQ(count(url(), "datasets"), 1);
  EXPECT_THROW(s.datasets().create("x", {.shard_samples = -1}), ValueError);
  EXPECT_THROW(s.datasets().create("bad\x01name"), ValueError);
}
