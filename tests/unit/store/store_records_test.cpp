// Records declared once (loom/store/record.h, docs/architecture.md "Records"): a record's
// column list, its reader by column name and its JSON all come from its fields(); a run, a
// dataset version and a named query go through the database and through JSON unchanged; a
// stored state that is no spelling is a BadStateError naming the valid ones. On SQLite and PostgreSQL.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/ops/creation.h>
#include <loom/store/datasets.h>
#include <loom/store/error.h>
#include <loom/store/queries.h>
#include <loom/store/record.h>
#include <loom/store/runs.h>
#include <loom/store/session.h>
#include <loom/store/store.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "unit/common/core_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::raw_sql;
using ordered_json = nlohmann::ordered_json;

namespace {

enum class Shade { Light, Dark };
constexpr store::Spellings<2> spellings(Shade) { return {"shade", {"light", "dark"}}; }

struct Inner {
  int64_t size = 0;
  std::string label;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("size", size);
    visit("label", label);
  }
};

// Every kind of field the facility handles.
struct Sample {
  int64_t id = 0;
  uint64_t bytes = 0;
  double score = 0;
  bool on = false;
  Shade shade = Shade::Light;
  std::string note;
  std::string config;  // JSON
  std::string sha;     // in column "blob"
  std::vector<int64_t> ids;
  std::vector<std::string> names;
  std::vector<double> values;
  std::map<std::string, Inner> parts;
  Inner inner;
  template <class Visit>
  void fields(Visit&& visit) {
    using store::RecordField;
    visit("id", id);
    visit("bytes", bytes);
    visit("score", score);
    visit("on", on);
    visit("shade", shade);
    visit("note", note);
    visit("config", config, RecordField::json());
    visit("sha", sha, RecordField::in_column("blob"));
    visit("ids", ids, RecordField::not_stored());
    visit("names", names, RecordField::not_stored());
    visit("values", values, RecordField::not_stored());
    visit("parts", parts, RecordField::not_stored());
    visit("inner", inner);
  }
};

Sample full_sample() {
  Sample s;
  s.id = 7;
  s.bytes = 1ull << 40;
  s.score = 0.25;
  s.on = true;
  s.shade = Shade::Dark;
  s.note = "héllo";
  s.config = R"({"a":[1,2],"b":{"c":"d"}})";
  s.sha = "ab12";
  s.ids = {3, 1};
  s.names = {"x", "y"};
  s.values = {1.5, std::numeric_limits<double>::quiet_NaN()};
  s.parts = {{"p", {2, "two"}}};
  s.inner = {9, "nine"};
  return s;
}

void expect_same(const Sample& a, const Sample& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.score, b.score);
  EXPECT_EQ(a.on, b.on);
  EXPECT_EQ(a.shade, b.shade);
  EXPECT_EQ(a.note, b.note);
  EXPECT_EQ(a.config, b.config);
  EXPECT_EQ(a.sha, b.sha);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.names, b.names);
  ASSERT_EQ(a.values.size(), b.values.size());
  for (size_t i = 0; i < a.values.size(); ++i)
    EXPECT_TRUE(a.values[i] == b.values[i] || (std::isnan(a.values[i]) && std::isnan(b.values[i])));
  ASSERT_EQ(a.parts.size(), b.parts.size());
  EXPECT_EQ(a.parts.at("p").label, b.parts.at("p").label);
  EXPECT_EQ(a.inner.size, b.inner.size);
  EXPECT_EQ(a.inner.label, b.inner.label);
}

// Optional fields (a search's ASHA, a trial's value): JSON only.
struct Maybe {
  std::optional<double> value;
  std::optional<Inner> inner;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("value", value, store::RecordField::not_stored());
    visit("inner", inner, store::RecordField::not_stored());
  }
};

}  // namespace

TEST(StoreRecords, ColumnsComeFromTheFieldsWithNestedRecordsFlattened) {
  EXPECT_EQ(store::column_names<Sample>(),
            (std::vector<std::string>{"id", "bytes", "score", "on", "shade", "note", "config", "blob", "size", "label"}));
  EXPECT_EQ(store::column_list<Sample>("s"), "s.id, s.bytes, s.score, s.on, s.shade, s.note, s.config, s.blob, s.size, s.label");
  EXPECT_EQ(store::column_list<store::RunInfo>(),
            "id, experiment, name, status, hyper_parameters, started_ms, ended_ms, error, checkpoint");
}

TEST(StoreRecords, JsonRoundTripsEveryFieldKind) {
  const Sample s = full_sample();
  const ordered_json j = store::record_json<ordered_json>(s);
  // one key per field, in field order; JSON text as a value, NaN as null, an enum by its spelling
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"id", "bytes", "score", "on", "shade", "note", "config", "sha", "ids", "names", "values",
                                            "parts", "inner"}));
  EXPECT_EQ(j["shade"], "dark");
  EXPECT_EQ(j["config"]["b"]["c"], "d");
  EXPECT_TRUE(j["values"][1].is_null());
  EXPECT_EQ(j["inner"]["label"], "nine");
  EXPECT_EQ(j["parts"]["p"]["size"], 2);
  expect_same(store::record_from_json<Sample>(j, "sample"), s);
  expect_same(store::record_from_json<Sample>(nlohmann::json::parse(j.dump()), "sample"), s);  // through text, sorted keys
  // an empty JSON text is null, and back
  Sample empty;
  const ordered_json e = store::record_json<ordered_json>(empty);
  EXPECT_TRUE(e["config"].is_null());
  EXPECT_EQ(store::record_from_json<Sample>(e, "sample").config, "");
}

TEST(StoreRecords, JsonWithAMissingUnknownOrMistypedKeyIsRefusedByName) {
  const ordered_json good = store::record_json<ordered_json>(full_sample());
  ordered_json missing = good;
  missing.erase("note");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { store::record_from_json<Sample>(missing, "sample"); }),
                           {"sample", "missing key 'note'", "keys: id, bytes"}));
  ordered_json unknown = good;
  unknown["colour"] = 1;
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { store::record_from_json<Sample>(unknown, "sample"); }),
                           {"sample", "unknown key 'colour'", "keys: id, bytes"}));
  ordered_json typed = good;
  typed["id"] = "7";
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { store::record_from_json<Sample>(typed, "sample"); }),
                           {"sample", "'id'", "an integer", "string"}));
  ordered_json negative = good;
  negative["bytes"] = -1;
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { store::record_from_json<Sample>(negative, "sample"); }), {"'bytes'"}));
  ordered_json shade = good;
  shade["shade"] = "grey";
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { store::record_from_json<Sample>(shade, "sample"); }),
                           {"sample", "'shade'", "unknown shade 'grey'", "valid: light, dark"}));
  ordered_json nested = good;
  nested["inner"].erase("label");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { store::record_from_json<Sample>(nested, "sample"); }),
                           {"sample.inner", "missing key 'label'"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { store::record_from_json<Sample>(ordered_json::array(), "sample"); }),
                           {"sample", "must be a JSON object", "array"}));
}

TEST(StoreRecords, AnOptionalFieldIsNullWhenEmpty) {
  const ordered_json none = store::record_json<ordered_json>(Maybe{});
  EXPECT_EQ(none.dump(), R"({"value":null,"inner":null})");
  const Maybe back = store::record_from_json<Maybe>(none, "maybe");
  EXPECT_FALSE(back.value.has_value());
  EXPECT_FALSE(back.inner.has_value());
  const ordered_json some = store::record_json<ordered_json>(Maybe{0.5, Inner{3, "three"}});
  EXPECT_EQ(some.dump(), R"({"value":0.5,"inner":{"size":3,"label":"three"}})");
  const Maybe read = store::record_from_json<Maybe>(some, "maybe");
  ASSERT_TRUE(read.value);
  EXPECT_EQ(*read.value, 0.5);
  ASSERT_TRUE(read.inner.has_value());
  EXPECT_EQ(read.inner->label, "three");
  ordered_json bad = some;
  bad["inner"].erase("size");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { store::record_from_json<Maybe>(bad, "maybe"); }),
                           {"maybe.inner", "missing key 'size'"}));
  EXPECT_TRUE(store::column_names<Maybe>().empty());
}

TEST(StoreRecords, StatesHaveOneSpellingEach) {
  EXPECT_STREQ(store::to_string(store::RunStatus::Failed), "failed");
  EXPECT_EQ(store::parse_state<store::RunStatus>("finished"), store::RunStatus::Finished);
  EXPECT_EQ(store::state_names<store::RunStatus>(), (std::vector<std::string>{"running", "finished", "failed"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([] { store::parse_state<store::RunStatus>("done"); }),
                           {"unknown run status 'done'", "valid: running, finished, failed"}));
}

class StoreRecordsDb : public loom_test::StoreBackendTest {};
INSTANTIATE_STORE_BACKENDS(StoreRecordsDb);

TEST_P(StoreRecordsDb, ARunRoundTripsThroughTheDatabaseAndJson) {
  store::Store s = store::Store::open(url());
  const int64_t id = s.runs().start("exp", "r1", R"({"lr": 0.5, "opt": {"name": "sgd"}})", {"b", "a"}).id;
  s.runs().log_epoch(id, 0, {{"loss", 2.0}, {"acc", std::numeric_limits<double>::quiet_NaN()}});
  s.runs().log_epoch(id, 1, {{"loss", 1.0}});
  s.runs().set_checkpoint(id, "checkpoint bytes");
  s.runs().finish(id, store::RunStatus::Failed, "out of patience");
  const store::RunInfo run = s.runs().get(id);
  EXPECT_EQ(run.status, store::RunStatus::Failed);
  EXPECT_EQ(run.error, "out of patience");
  EXPECT_EQ(run.tags, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(run.checkpoint_sha256.size(), 64u);
  EXPECT_EQ(raw_sql(url(), "SELECT status FROM runs WHERE id = " + std::to_string(id)), std::vector<std::string>{"failed"});

  const ordered_json j = store::record_json<ordered_json>(run);
  EXPECT_EQ(j["status"], "failed");
  EXPECT_EQ(j["hyper_parameters"]["opt"]["name"], "sgd");
  EXPECT_EQ(j["metrics"]["loss"]["values"], ordered_json({2.0, 1.0}));
  EXPECT_TRUE(j["metrics"]["acc"]["values"][0].is_null());
  const store::RunInfo back = store::record_from_json<store::RunInfo>(j, "run");
  EXPECT_EQ(store::record_json<ordered_json>(back).dump(), j.dump());
  EXPECT_EQ(back.hyper_parameters, run.hyper_parameters);
  EXPECT_EQ(back.checkpoint_sha256, run.checkpoint_sha256);
  EXPECT_EQ(back.metrics.at("loss").times_ms, run.metrics.at("loss").times_ms);
  EXPECT_TRUE(std::isnan(back.metrics.at("acc").values[0]));

  // a query of the status by its enum
  s.runs().start("exp", "r2");
  const auto running = s.runs().find({.status = store::RunStatus::Running});
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].name, "r2");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { s.runs().finish(running[0].id, store::RunStatus::Running); }),
                           {"finish", "running", "valid: finished, failed"}));
}

TEST_P(StoreRecordsDb, TheReaderFindsColumnsByName) {
  store::Store s = store::Store::open(url());
  const int64_t id = s.runs().start("exp", "named").id;
  store::Session session(s, store::Access::Read);
  // other columns, in another order, around the record's
  const std::vector<std::string> selected{"started_ms", "name", "checkpoint", "ended_ms", "experiment", "error", "status",
                                          "hyper_parameters", "id"};
  std::string list;
  for (const auto& c : selected) list += (list.empty() ? "" : ", ") + c;
  const auto rows = session.query("SELECT " + list + " FROM runs WHERE id = ?", {id});
  ASSERT_EQ(rows.size(), 1u);
  const store::RunInfo run = store::RowReader<store::RunInfo>(selected).read(rows[0]);
  EXPECT_EQ(run.id, id);
  EXPECT_EQ(run.name, "named");
  EXPECT_EQ(run.experiment, "exp");
  EXPECT_EQ(run.status, store::RunStatus::Running);
  EXPECT_EQ(run.ended_ms, 0);  // NULL
  // a record's column the query did not select
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([] { store::RowReader<store::RunInfo>({"id", "name"}); }),
                           {"column 'experiment'", "not among the query's columns (id, name)"}));
  session.commit();
}

TEST_P(StoreRecordsDb, AStoredStateThatIsNoSpellingIsABadStateError) {
  store::Store s = store::Store::open(url());
  const int64_t id = s.runs().start("exp", "odd").id;
  raw_sql(url(), "UPDATE runs SET status = 'paused' WHERE id = " + std::to_string(id));
  for (auto read : {std::function<void()>([&] { s.runs().get(id); }), std::function<void()>([&] { s.runs().find(); })})
    EXPECT_TRUE(contains_all(error_message<store::BadStateError>(read),
                             {"column 'status'", "'paused'", "run status", "valid: running, finished, failed"}));
  raw_sql(url(), "UPDATE runs SET status = 'running' WHERE id = " + std::to_string(id));
  EXPECT_EQ(s.runs().get(id).status, store::RunStatus::Running);
  if (loom_test::is_pg_url(url())) return;  // PostgreSQL's columns keep their types
  // a column of the wrong type is named
  raw_sql(url(), "UPDATE runs SET ended_ms = 'soon' WHERE id = " + std::to_string(id));
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { s.runs().get(id); }), {"column 'ended_ms'"}));
}

TEST_P(StoreRecordsDb, ADatasetVersionRoundTripsThroughTheDatabaseAndJson) {
  store::Store s = store::Store::open(url());
  store::DatasetWriter w = s.datasets().create("points", {.fields = {"x", "y"}, .tags = {"b", "a"}, .shard_samples = 2});
  for (int i = 0; i < 3; ++i) w.append({.tensors = {{"x", zeros({3, 2})}, {"y", full({}, i, Int64)}}});
  w.commit();
  const store::DatasetInfo info = s.datasets().get("points", 1);
  EXPECT_EQ(info.samples, 3);
  EXPECT_EQ(info.shards, 2);
  EXPECT_EQ(info.tags, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(info.schema.size(), 2u);
  EXPECT_EQ(info.schema[1].dtype, Int64);
  // the columns its reader selects: the field list is decoded from its own column, the tags come from dataset_tags
  EXPECT_EQ(store::column_list<store::DatasetInfo>(), "name, version, created_ms, samples, shards, task_id, run_id");

  const ordered_json j = store::record_json<ordered_json>(info);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"name", "version", "created_ms", "samples", "shards", "fields", "tags", "produced_by"}));
  EXPECT_EQ(j["fields"][0], ordered_json({{"name", "x"}, {"dtype", "float32"}, {"shape", {3, 2}}}));
  EXPECT_EQ(j["fields"][1]["shape"], ordered_json::array());
  EXPECT_EQ(j["produced_by"], ordered_json({{"task_id", 0}, {"run_id", 0}}));
  const store::DatasetInfo back = store::record_from_json<store::DatasetInfo>(j, "dataset");
  EXPECT_EQ(store::record_json<ordered_json>(back).dump(), j.dump());
  EXPECT_EQ(back.schema[0].shape, (Shape{3, 2}));

  ordered_json dtype = j;
  dtype["fields"][0]["dtype"] = "float33";
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { store::record_from_json<store::DatasetInfo>(dtype, "dataset"); }),
                           {"dataset.fields", "'dtype'", "unknown dtype 'float33'", "valid: bool, uint8"}));
  ordered_json shape = j;
  shape["fields"][0]["shape"] = {3, "2"};
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { store::record_from_json<store::DatasetInfo>(shape, "dataset"); }),
                           {"'shape'", "an array of integers"}));
}

TEST_P(StoreRecordsDb, ANamedQueryRoundTripsThroughTheDatabaseAndJson) {
  store::Store s = store::Store::open(url());
  store::DatasetWriter w = s.datasets().create("points", {.fields = {"x"}});
  w.append({.tensors = {{"x", zeros({2})}}, .metadata = R"({"label": 1})"});
  w.commit();
  const store::SampleQuery query{.tags = {"even"}, .where = {{"label", "==", 1}, {"kind", "!=", "cat"}}, .order_by = "label",
                                 .descending = true, .offset = 2, .limit = 5, .fields = {"x"}};
  s.queries().create({.name = "ones", .dataset = "points", .first_version = 1, .last_version = 0, .query = query});
  const store::NamedQuery q = s.queries().get("ones");
  EXPECT_EQ(q.query.where.at(1).value.text(), "cat");
  EXPECT_EQ(q.query.limit, 5);
  // its columns, from its fields: the query is one column of JSON text
  EXPECT_EQ(store::column_list<store::NamedQuery>(), "name, dataset, first_version, last_version, query, created_ms");

  // the JSON `loom queries ... --json` prints: the key set it always had, the query an object
  const ordered_json j = store::record_json<ordered_json>(q);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"name", "dataset", "first_version", "last_version", "query", "created_ms"}));
  EXPECT_EQ(j["query"], ordered_json::parse(store::sample_query_json(query)));
  EXPECT_EQ(j["query"]["where"][1], ordered_json({{"key", "kind"}, {"op", "!="}, {"value", "cat"}}));
  EXPECT_GT(j["created_ms"].get<int64_t>(), 0);
  const store::NamedQuery back = store::record_from_json<store::NamedQuery>(j, "query");
  EXPECT_EQ(store::record_json<ordered_json>(back).dump(), j.dump());
  EXPECT_EQ(back.query.order_by, "label");
  ordered_json bad = j;
  bad["query"] = {{"where", 3}};
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { store::record_from_json<store::NamedQuery>(bad, "query"); }),
                           {"query: key 'query'", "'where' is not an array"}));

  // a row whose query text is not one: a StoreError naming the query and the column
  raw_sql(url(), "UPDATE dataset_queries SET query = '{\"limit\": \"many\"}' WHERE name = 'ones'");
  for (auto read : {std::function<void()>([&] { s.queries().get("ones"); }), std::function<void()>([&] { s.queries().list(); })})
    EXPECT_TRUE(contains_all(error_message<store::StoreError>(read), {"named query 'ones'", "column 'query'", "'limit' is not an integer"}));
}

TEST_P(StoreRecordsDb, ARunSummaryRoundTripsThroughTheDatabaseAndJson) {
  store::Store s = store::Store::open(url());
  const int64_t id = s.runs().start("exp", "r1").id;
  s.runs().log_epoch(id, 0, {{"loss", 2.0}, {"acc", std::numeric_limits<double>::quiet_NaN()}});
  s.runs().log_epoch(id, 1, {{"loss", 1.0}});
  // the summaries' columns come from MetricSummary's fields; the run's from RunInfo's
  EXPECT_EQ(store::column_list<store::MetricSummary>(), "final_value, min_value, max_value, epochs");
  EXPECT_EQ(store::column_list<store::RunSummary>(), store::column_list<store::RunInfo>());
  const std::vector<store::RunSummary> all = s.runs().summaries();
  ASSERT_EQ(all.size(), 1u);
  const store::MetricSummary& loss = all[0].metrics.at("loss");
  EXPECT_EQ(loss.final, 1.0);
  EXPECT_EQ(loss.min, 1.0);
  EXPECT_EQ(loss.max, 2.0);
  EXPECT_EQ(loss.epochs, 2);
  EXPECT_TRUE(std::isnan(all[0].metrics.at("acc").final));  // a NULL summary value reads as NaN

  // one key set: the record's fields; a NaN is null
  const ordered_json j = store::record_json<ordered_json>(all[0]);
  std::vector<std::string> keys, fields;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  store::detail::visit_fields(all[0], [&](const char* key, const auto&, store::RecordField = {}) { fields.emplace_back(key); });
  EXPECT_EQ(keys, fields);
  EXPECT_EQ(keys, (std::vector<std::string>{"run", "metrics"}));
  EXPECT_EQ(j["run"]["name"], "r1");
  EXPECT_EQ(j["metrics"]["loss"], ordered_json({{"final", 1.0}, {"min", 1.0}, {"max", 2.0}, {"epochs", 2}}));
  EXPECT_TRUE(j["metrics"]["acc"]["final"].is_null());
  const store::RunSummary back = store::record_from_json<store::RunSummary>(j, "summary");
  EXPECT_EQ(store::record_json<ordered_json>(back).dump(), j.dump());
  EXPECT_TRUE(std::isnan(back.metrics.at("acc").max));
}
