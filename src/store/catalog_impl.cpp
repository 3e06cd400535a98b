// The SQL the two catalogs share (src/store/catalog_impl.h).
#include "store/catalog_impl.h"

#include <algorithm>
#include <cmath>

#include "store/query.h"

namespace loom::store::detail {

std::string version_text(const CatalogTables& t, const std::string& name, int64_t version) {
  return std::string(t.kind) + " '" + name + "' version " + std::to_string(version);
}

std::string versions_help(Connection& conn, const CatalogTables& t, const std::string& name) {
  const std::string a = t.alias;
  const std::vector<Row> rows = conn.query("SELECT MIN(" + a + ".version), MAX(" + a + ".version), COUNT(*) FROM " + t.table + " " + a +
                                               " WHERE " + a + ".name = ? AND " + t.visible,
                                           {name});
  if (rows.empty() || rows[0].integer(2) == 0) return std::string("there is no ") + t.missing + " '" + name + "'";
  return "'" + name + "' has " + std::to_string(rows[0].integer(2)) + " version(s) from " + std::to_string(rows[0].integer(0)) +
         " to " + std::to_string(rows[0].integer(1));
}

std::string catalog_where(const CatalogTables& t, const CatalogQuery& q, std::vector<Value>& params) {
  const std::string a = t.alias;
  std::string sql = std::string(" WHERE ") + t.visible;
  if (q.name) {
    sql += " AND " + a + ".name = ?";
    params.emplace_back(*q.name);
  }
  for (const std::string& tag : q.tags) {
    check_label("find", "tag", tag);
    sql += std::string(" AND EXISTS (SELECT 1 FROM ") + t.tags_table + " t WHERE t." + t.tags_owner + " = " + a + ".id AND t.tag = ?)";
    params.emplace_back(tag);
  }
  for (const MetricFilter& f : q.metrics) {
    t.check_metric("find", f.metric);
    const char* cmp = sql_comparison("find", "metric operator", f.op, "'" + f.metric + "'");
    if (std::isnan(f.value)) throw ValueError("find: the value compared with metric '" + f.metric + "' is NaN");
    sql += t.metric_condition(f.metric, cmp, params);
    params.emplace_back(f.value);
  }
  return sql;
}

std::vector<std::string> catalog_names(Connection& conn, const CatalogTables& t) {
  const std::string a = t.alias;
  std::vector<std::string> out;
  for (const Row& r : conn.query("SELECT DISTINCT " + a + ".name FROM " + t.table + " " + a + " WHERE " + t.visible + " ORDER BY " + a + ".name"))
    out.push_back(r.text(0));
  return out;
}

int64_t latest_version(Connection& conn, const CatalogTables& t, const std::string& name) {
  const std::string a = t.alias;
  const std::vector<Row> rows = conn.query("SELECT " + a + ".version FROM " + t.table + " " + a + " WHERE " + a + ".name = ? AND " +
                                               t.visible + " ORDER BY " + t.latest_order + " LIMIT 1",
                                           {name});
  if (rows.empty()) throw NotFoundError(std::string("store: no latest version: there is no ") + t.missing + " '" + name + "'");
  return rows[0].integer(0);
}

int64_t next_version(Connection& conn, const CatalogTables& t, const std::string& name) {
  const std::string n = t.names_table;
  return conn.query("INSERT INTO " + n + " (name, last_version) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET last_version = " + n +
                        ".last_version + 1 RETURNING last_version",
                    {name})[0]
      .integer(0);
}

std::vector<std::string> tag_set(const char* op, std::vector<std::string> tags) {
  std::sort(tags.begin(), tags.end());
  tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
  for (const std::string& tag : tags) check_label(op, "tag", tag);
  return tags;
}

void insert_tags(Connection& conn, const CatalogTables& t, int64_t id, const std::vector<std::string>& tags) {
  for (const std::string& tag : tags)
    conn.execute(std::string("INSERT INTO ") + t.tags_table + " (" + t.tags_owner + ", tag) VALUES (?, ?)", {id, tag});
}

std::vector<std::string> version_tags(Connection& conn, const CatalogTables& t, int64_t id) {
  std::vector<std::string> out;
  for (const Row& r : conn.query(std::string("SELECT tag FROM ") + t.tags_table + " WHERE " + t.tags_owner + " = ? ORDER BY tag", {id}))
    out.push_back(r.text(0));
  return out;
}

void check_top_k(int64_t k) {
  if (k < 1) throw ValueError("find_top: k is " + std::to_string(k) + " (valid: k >= 1)");
}

}  // namespace loom::store::detail
