// Upgrades generated from the store's schema part (src/store/schema.cpp, store_schema()): for
// every version the store's schema has had, a database stopped there (made by applying that
// part's migrations up to it, as the library of that version did) opens, migrates to this
// library's version and reads its records. A new migration is covered without editing a test.
// On SQLite and PostgreSQL.
#include <gtest/gtest.h>
#include <loom/ops/creation.h>
#include <loom/store/datasets.h>
#include <loom/store/model_registry.h>
#include <loom/store/queries.h>
#include <loom/store/record.h>
#include <loom/store/runs.h>
#include <loom/store/session.h>
#include <loom/store/store.h>

#include <memory>

#include "store/db.h"
#include "store/schema.h"
#include "unit/common/core_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;

class StoreUpgrade : public loom_test::StoreBackendTest {};
INSTANTIATE_STORE_BACKENDS(StoreUpgrade);

namespace {

// A database at version `version` of the store's part, as that version of the library left it.
void make_store_at(const std::string& url, bool pg, int64_t version) {
  std::unique_ptr<store::detail::Connection> conn = pg ? store::detail::open_postgresql(url) : store::detail::open_sqlite(url);
  conn->begin(store::Access::Write);
  conn->execute(conn->dialect().render("CREATE TABLE loom_schema (application {text} NOT NULL, version {int} NOT NULL)"));
  conn->execute("INSERT INTO loom_schema (application, version) VALUES ('loom.store', ?)", {version});
  for (const store::SchemaMigration& m : store::detail::store_schema().migrations)
    if (m.version <= version)
      for (const std::string& ddl : m.ddl) conn->execute(conn->dialect().render(ddl));
  conn->commit();
}

}  // namespace

TEST_P(StoreUpgrade, AStoreStoppedAtEveryVersionOfItsSchemaUpgradesAndReads) {
  const store::SchemaPart& part = store::detail::store_schema();
  const int64_t latest = store::Store::library_schema_version();
  ASSERT_EQ(part.migrations.back().version, latest);
  for (size_t i = 0; i < part.migrations.size(); ++i) ASSERT_EQ(part.migrations[i].version, static_cast<int64_t>(i) + 1);
  for (int64_t version = 0; version < latest; ++version) {
    SCOPED_TRACE("a store at schema version " + std::to_string(version));
    const std::string u = url("v" + std::to_string(version));
    make_store_at(u, pg(), version);
    store::Store s = store::Store::open(u);
    EXPECT_EQ(s.schema_version(), latest);
    // every record's columns are there (a model's size is its blob's), and its rows read
    {
      store::Session read(s, store::Access::Read);
      for (const auto& [table, columns] : {std::pair<std::string, std::string>{"runs", store::column_list<store::RunInfo>()},
                                           {"datasets", store::column_list<store::DatasetInfo>()},
                                           {"dataset_queries", store::column_list<store::NamedQuery>()},
                                           {"run_metric_summaries", store::column_list<store::MetricSummary>()}})
        EXPECT_NO_THROW(read.query("SELECT " + columns + " FROM " + table)) << table;
      read.commit();
    }
    const int64_t run = s.runs().start("upgraded").id;
    s.runs().log_epoch(run, 0, {{"loss", 1.0}});
    s.runs().finish(run);
    EXPECT_EQ(s.runs().get(run).status, store::RunStatus::Finished);
    EXPECT_EQ(s.runs().summaries().at(0).metrics.at("loss").epochs, 1);
    const store::ModelInfo m = s.models().save("upgraded", loom_test::small_mlp(1), {{"accuracy", 0.5}}, "{}", {}, {.run_id = run});
    EXPECT_EQ(s.models().get("upgraded").produced_by.run_id, run);
    EXPECT_EQ(s.models().find({.metrics = {{"accuracy", ">", 0.4}}}).size(), 1u);
    EXPECT_EQ(m.version, 1);
    store::DatasetWriter w = s.datasets().create("upgraded", {.fields = {"x"}});
    w.append({.tensors = {{"x", zeros({2})}}, .metadata = R"({"label": 1})"});
    w.commit();
    s.queries().create({.name = "ones", .dataset = "upgraded", .query = {.where = {{"label", "==", 1}}}});
    EXPECT_EQ(s.queries().get("ones").query.where.at(0).key, "label");
    EXPECT_EQ(s.queries().open("ones")->size(), 1);
  }
}
