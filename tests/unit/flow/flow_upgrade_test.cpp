// Upgrades generated from flow's schema parts (src/flow/task_schema.cpp, stream_schema.cpp,
// search_schema.cpp), as tests/unit/store/store_upgrade_test.cpp does for the store's own: for
// every version of every part, a store whose part stopped there (the parts before it current,
// those after it absent) ensures the parts, reaches their latest versions and reads its tasks
// and its stream controllers.
// A new migration is covered without editing a test. On SQLite and PostgreSQL.
#include <gtest/gtest.h>
#include <loom/flow/controllers.h>
#include <loom/flow/plans.h>
#include <loom/flow/search.h>
#include <loom/flow/tasks.h>
#include <loom/store/record.h>
#include <loom/store/schema_part.h>
#include <loom/store/session.h>
#include <loom/store/store.h>

#include "flow/search_schema.h"
#include "flow/task_schema.h"
#include "unit/flow/flow_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;

class FlowUpgrade : public loom_test::FlowBackendTest {};
INSTANTIATE_STORE_BACKENDS(FlowUpgrade);

TEST_P(FlowUpgrade, EveryVersionOfEveryFlowPartUpgradesAndItsTasksRead) {
  // in the order flow ensures them (the stream part extends the tasks table)
  const std::vector<const store::SchemaPart*> parts = {&flow::detail::task_schema(), &flow::detail::stream_schema(),
                                                       &flow::detail::search_schema()};
  int stores = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    const store::SchemaPart& part = *parts[p];
    for (size_t i = 0; i < part.migrations.size(); ++i) ASSERT_EQ(part.migrations[i].version, static_cast<int64_t>(i) + 1);
    for (int64_t version = 0; version < part.migrations.back().version; ++version) {
      SCOPED_TRACE("part " + part.name + " at version " + std::to_string(version));
      store::Store s = store::Store::open(url("s" + std::to_string(stores++)));
      for (size_t q = 0; q < p; ++q) s.ensure_schema(*parts[q]);
      {
        store::Session write(s, store::Access::Write);
        for (const store::SchemaMigration& m : part.migrations)
          if (m.version <= version)
            for (const std::string& ddl : m.ddl) write.execute(write.render(ddl));
        if (version > 0) write.execute("INSERT INTO loom_schema_parts (part, version) VALUES (?, ?)", {part.name, version});
        write.commit();
      }
      if (parts[p] != &flow::detail::search_schema()) EXPECT_FALSE(flow::Tasks::ready(s));  // the queue's parts only
      for (const store::SchemaPart* q : parts) EXPECT_EQ(s.ensure_schema(*q), q->migrations.back().version) << q->name;
      EXPECT_TRUE(flow::Tasks::ready(s));
      flow::Tasks tasks(s);
      const int64_t id = tasks.submit("upgraded", R"({"k": 1})", {.depends_on = {}, .lineage = {.output_model = "m"}});
      const std::vector<flow::TaskInfo> all = tasks.list();
      ASSERT_EQ(all.size(), 1u);
      EXPECT_EQ(all[0].id, id);
      EXPECT_EQ(all[0].lineage.output_model, "m");
      EXPECT_EQ(all[0].status, flow::Status::Pending);
      // every record's columns are there (a stream controller's, its batches', a plan's, a
      // search's and its ASHA's), and a controller's row reads
      {
        store::Session read(s, store::Access::Read);
        for (const auto& [table, columns] :
             {std::pair<std::string, std::string>{"stream_controllers", store::column_list<flow::ControllerInfo>()},
              {"stream_batches", store::column_list<flow::BatchInfo>()},
              {"plans", store::column_list<flow::PlanInfo>()},
              {"searches", store::column_list<flow::SearchInfo>() + ", " + store::column_list<flow::Asha>()}})
          EXPECT_NO_THROW(read.query("SELECT " + columns + " FROM " + table)) << table;
        read.commit();
      }
      flow::Controllers controllers(tasks);
      controllers.create({.name = "upgraded", .dataset = "points", .min_samples = 3, .kind = "train"});
      EXPECT_EQ(controllers.get("upgraded").spec.min_samples, 3);
    }
  }
}
