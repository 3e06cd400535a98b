// Sessions (loom/store/session.h), the SQL seam the parts above the store use, and the schema
// parts they register (Store::ensure_schema): flow's task queue creates its own tables, and a
// store made when the store's schema still held them keeps its tasks. On both backends.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/flow/tasks.h>
#include <loom/graph/graph.h>
#include <loom/store/error.h>
#include <loom/store/model_registry.h>
#include <loom/store/schema_part.h>
#include <loom/store/session.h>
#include <loom/store/sql.h>
#include <loom/store/store.h>

#include <stdexcept>

#include "unit/common/core_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::raw_sql;
using loom_test::StoreBackendTest;

namespace {

class StoreSession : public StoreBackendTest {
 protected:
  // Whether the database at url() has a table `name` (raw SQL, beside the store).
  bool has_table(const std::string& name) {
    const std::string sql = pg() ? "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = '" +
                                       name + "'"
                                 : "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '" + name + "'";
    return raw_sql(url(), sql).at(0) == "1";
  }
  int64_t rows_of(store::Store& s, const std::string& table) {
    store::Session read(s, store::Access::Read);
    return read.query("SELECT COUNT(*) FROM " + table)[0].integer(0);
  }
};

const store::SchemaPart kNotes{"test.notes",
                               {{1, {"CREATE TABLE notes (id {id}, body {text} NOT NULL UNIQUE, score {real}, data {blob})"}}}};

}  // namespace

INSTANTIATE_STORE_BACKENDS(StoreSession);

TEST_P(StoreSession, ExceptionsRollBackEverythingTheSessionWrote) {
  store::Store s = store::Store::open(url());
  s.ensure_schema(kNotes);
  // A session left by an exception (a program's own error): neither insert stays.
  EXPECT_THROW(
      {
        store::Session w(s, store::Access::Write);
        w.execute("INSERT INTO notes (body) VALUES (?)", {std::string("first")});
        w.execute("INSERT INTO notes (body) VALUES (?)", {std::string("second")});
        throw std::runtime_error("a failure half way");
      },
      std::runtime_error);
  EXPECT_EQ(rows_of(s, "notes"), 0);
  // A statement that fails half way (a constraint): the first insert goes too.
  const std::string msg = error_message<store::StoreError>([&] {
    store::Session w(s, store::Access::Write);
    w.execute("INSERT INTO notes (body) VALUES (?)", {std::string("same")});
    w.execute("INSERT INTO notes (body) VALUES (?)", {std::string("same")});
    w.commit();
  });
  EXPECT_TRUE(contains_all(msg, {"INSERT INTO notes (body) VALUES (?)"})) << msg;
  EXPECT_EQ(rows_of(s, "notes"), 0);
  // Uncommitted: rolled back; committed: kept, and seen by another handle.
  {
    store::Session w(s, store::Access::Write);
    w.execute("INSERT INTO notes (body) VALUES (?)", {std::string("dropped")});
  }
  EXPECT_EQ(rows_of(s, "notes"), 0);
  {
    store::Session w(s, store::Access::Write);
    w.execute("INSERT INTO notes (body) VALUES (?)", {std::string("kept")});
    w.commit();
    EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { w.query("SELECT 1"); }), {"after its session committed"}));
    EXPECT_THROW(w.commit(), store::StoreError);
  }
  store::Store other = store::Store::open(url());
  EXPECT_EQ(rows_of(other, "notes"), 1);
  // The lock went with the commit: the store's own operations run after it.
  EXPECT_TRUE(s.models().names().empty());
}

TEST_P(StoreSession, TheSeamRunsTheSameSqlOnBothBackends) {
  store::Store s = store::Store::open(url());
  EXPECT_EQ(s.ensure_schema(kNotes), 1);
  store::Session w(s, store::Access::Write);
  EXPECT_EQ(w.backend(), GetParam());
  EXPECT_EQ(w.render("{int}").find('{'), std::string::npos);
  const std::string bytes("a\0b\xff", 4);
  const int64_t id = w.query("INSERT INTO notes (body, score, data) VALUES (?, ?, ?) RETURNING id",
                             {std::string("it's '?' héllo"), 0.25, store::SqlBytes{bytes}})[0]
                         .integer(0);
  EXPECT_GT(id, 0);
  EXPECT_EQ(w.execute("INSERT INTO notes (body, score) VALUES (?, ?) ON CONFLICT (body) DO UPDATE SET score = excluded.score",
                      {std::string("it's '?' héllo"), 1.5}),
            1);
  w.execute("INSERT INTO notes (body) VALUES (?)", {std::string("no score")});
  w.commit();
  store::Session r(s, store::Access::Read);
  const std::vector<store::SqlRow> rows = r.query("SELECT id, body, score, data FROM notes WHERE id >= ? ORDER BY id", {id});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].integer(0), id);
  EXPECT_EQ(rows[0].text(1), "it's '?' héllo");
  EXPECT_EQ(rows[0].real(2), 1.5);
  EXPECT_EQ(rows[0].blob(3), bytes);
  EXPECT_TRUE(rows[1].is_null(2));
  EXPECT_TRUE(rows[1].is_null(3));
  EXPECT_THROW(rows[1].integer(1), store::StoreError);  // text read as an integer: named, never undefined
  // A failed statement names the statement (the session then only rolls back).
  EXPECT_TRUE(contains_all(error_message<store::StoreError>([&] { r.query("SELEC 1"); }), {"SELEC 1"}));
}

TEST_P(StoreSession, FlowCreatesItsTablesWhenItFirstUsesAStore) {
  {
    store::Store s = store::Store::open(url());
    s.models().save("m", loom_test::small_mlp(1));
  }
  EXPECT_FALSE(has_table("tasks")) << "a program that never uses flow has no task queue";
  store::Store s = store::Store::open(url());
  flow::Tasks tasks(s);
  EXPECT_TRUE(has_table("tasks"));
  EXPECT_EQ(raw_sql(url(), "SELECT version FROM loom_schema_parts WHERE part = 'loom.flow'"), std::vector<std::string>{"3"});
  const int64_t id = tasks.submit("k");
  // Another handle and process finds it current and changes nothing.
  store::Store again = store::Store::open(url());
  flow::Tasks more(again);
  EXPECT_EQ(more.get(id).status, flow::Status::Pending);
  // flow's two parts: the task queue and the stream controllers (which extend its tasks)
  EXPECT_EQ(raw_sql(url(), "SELECT COUNT(*) FROM loom_schema_parts"), std::vector<std::string>{"2"});
  EXPECT_EQ(raw_sql(url(), "SELECT version FROM loom_schema_parts WHERE part = 'loom.flow.stream'"), std::vector<std::string>{"2"});
}

TEST_P(StoreSession, AStoreWhoseSchemaHeldTheTasksKeepsThem) {
  // A store as the library wrote it at schema version 4, when the store's migration 3 created
  // flow's tables: no loom_schema_parts, the tasks table with one task in it.
  {
    store::Store s = store::Store::open(url());
    store::Session w(s, store::Access::Write);
    w.execute("DROP TABLE loom_schema_parts");
    w.execute("DROP TABLE dataset_queries");  // the store's migration 8 (named queries) neither
    w.execute("DROP TABLE run_metric_summaries");  // nor 9 (metric summaries)
    for (const char* table : {"models", "datasets"})  // the store's migration 6 (lineage) had not come yet
      for (const char* column : {"task_id", "run_id"}) w.execute(std::string("ALTER TABLE ") + table + " DROP COLUMN " + column);
    w.execute("ALTER TABLE run_metrics DROP COLUMN time_ms");  // nor migration 7 (each epoch's time)
    w.execute("UPDATE loom_schema SET version = 4");
    w.execute(w.render(
        "CREATE TABLE tasks (id {id}, kind {text} NOT NULL, hyper_parameters {text} NOT NULL, priority {int} NOT NULL, "
        "status {text} NOT NULL CHECK (status IN ('pending', 'running', 'finished', 'failed', 'cancelled')), "
        "attempts {int} NOT NULL, max_attempts {int} NOT NULL, timeout_ms {int} NOT NULL, lease_ms {int} NOT NULL, "
        "token {int} NOT NULL, agent {text}, lease_expires_ms {int}, deadline_ms {int}, result {text}, error {text}, "
        "created_ms {int} NOT NULL, started_ms {int}, finished_ms {int})"));
    w.execute("CREATE INDEX tasks_by_queue ON tasks (status, kind, priority, id)");
    w.execute("CREATE INDEX tasks_by_lease ON tasks (status, lease_expires_ms)");
    w.execute("INSERT INTO tasks (kind, hyper_parameters, priority, status, attempts, max_attempts, timeout_ms, lease_ms, token, "
              "created_ms) VALUES ('old.kind', '{\"lr\":0.5}', 0, 'pending', 0, 3, 0, 30000, 0, 1)");
    w.commit();
  }
  store::Store s = store::Store::open(url());
  EXPECT_EQ(s.schema_version(), store::Store::library_schema_version());
  flow::Tasks tasks(s);
  const std::vector<flow::TaskInfo> all = tasks.list();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].kind, "old.kind");
  EXPECT_EQ(all[0].hyper_parameters, R"({"lr":0.5})");
  EXPECT_EQ(raw_sql(url(), "SELECT version FROM loom_schema_parts WHERE part = 'loom.flow'"), std::vector<std::string>{"3"});
  const std::optional<flow::Claim> c = tasks.claim({"old.kind"}, "agent");
  ASSERT_TRUE(c.has_value());
  tasks.finish(*c, "1");
  EXPECT_EQ(tasks.get(all[0].id).status, flow::Status::Finished);
}

TEST_P(StoreSession, SchemaPartsMigrateInOrderAndRefuseNewerOnes) {
  store::Store s = store::Store::open(url());
  EXPECT_EQ(s.ensure_schema(kNotes), 1);
  store::SchemaPart two = kNotes;
  two.migrations.push_back({2, {"CREATE TABLE note_tags (note {int} NOT NULL, tag {text} NOT NULL)"}});
  store::Store other = store::Store::open(url());
  EXPECT_EQ(other.ensure_schema(two), 2);  // only migration 2 runs: notes exists already
  EXPECT_TRUE(has_table("note_tags"));
  EXPECT_EQ(raw_sql(url(), "SELECT version FROM loom_schema_parts WHERE part = 'test.notes'"), std::vector<std::string>{"2"});
  // An older program meets the newer part: refused, nothing changed.
  store::Store third = store::Store::open(url());
  const std::string msg = error_message<store::SchemaVersionError>([&] { third.ensure_schema(kNotes); });
  EXPECT_TRUE(contains_all(msg, {"'test.notes'", "version 2", "newer than this program's 1"})) << msg;
  EXPECT_EQ(raw_sql(url(), "SELECT version FROM loom_schema_parts WHERE part = 'test.notes'"), std::vector<std::string>{"2"});
  // Bad parts are ValueErrors before the database is read.
  EXPECT_THROW(s.ensure_schema({"loom.store", {{1, {}}}}), ValueError);
  EXPECT_THROW(s.ensure_schema({"Bad Name", {{1, {}}}}), ValueError);
  EXPECT_THROW(s.ensure_schema({"test.empty", {}}), ValueError);
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { s.ensure_schema({"test.gap", {{1, {}}, {3, {}}}}); }),
                           {"has version 3", "1, 2, ... in order"}));
}
