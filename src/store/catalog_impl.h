#pragma once
// The one implementation of the store's two catalogs of named, numbered versions, models
// (model_registry.cpp) and datasets (datasets.cpp), whose shape loom/store/catalog.h declares: names,
// versions, get, the latest, find and find_top are written once here over a description of the
// catalog's tables (CatalogTables); a catalog adds only what is its own (how a version's row
// becomes its record, what its "metrics" are, saving and removing).
#include <cstdint>
#include <string>
#include <vector>

#include "loom/store/catalog.h"
#include "store/store_impl.h"

namespace loom::store::detail {

// The SQL of find_top's ranking by one metric: a join adding the metric's value (may be empty)
// and the expression to order by.
struct CatalogRanking {
  std::string join;
  std::string key;
};

// Where a catalog keeps its versions and what its metrics are.
struct CatalogTables {
  const char* kind;          // in messages: "model 'm' version 2"
  const char* missing;       // in messages: "there is no <missing> 'm'" ("committed dataset")
  const char* table;         // the versions' table ("models"), with columns id, name, version, created_ms
  const char* alias;         // its alias in the catalog's SELECT ("m")
  const char* visible;       // the condition on a version the catalog shows ("1 = 1", "d.committed = 1")
  const char* latest_order;  // the order whose first visible version is the latest ("m.version DESC")
  const char* tags_table;    // the versions' tags ("model_tags": <owner>, tag)
  const char* tags_owner;    // its column naming the version's id ("model_id")
  const char* names_table;   // each name's last version number, never reused ("model_names")
  // ValueError naming `op` unless `metric` is one the catalog's versions can have.
  void (*check_metric)(const char* op, const std::string& metric);
  // The SQL condition " AND ..." of one filter on a (checked) metric, `cmp` its SQL comparison;
  // the compared value is its last parameter, which the caller appends after those this does.
  std::string (*metric_condition)(const std::string& metric, const char* cmp, std::vector<Value>& params);
  // find_top's ranking by a (checked) metric.
  CatalogRanking (*ranking)(const std::string& metric, std::vector<Value>& params);
};

// "model 'm' version 2"
std::string version_text(const CatalogTables& t, const std::string& name, int64_t version);
// "'m' has 3 version(s) from 1 to 3", or "there is no model 'm'": what a NotFoundError adds.
std::string versions_help(Connection& conn, const CatalogTables& t, const std::string& name);
// " WHERE <visible> AND ..." for a query, appending its parameters (ValueError for a bad tag,
// metric, operator or a NaN value).
std::string catalog_where(const CatalogTables& t, const CatalogQuery& q, std::vector<Value>& params);
// The visible version numbers' names, sorted.
std::vector<std::string> catalog_names(Connection& conn, const CatalogTables& t);
// The number of the latest visible version of `name`; NotFoundError when there is none.
int64_t latest_version(Connection& conn, const CatalogTables& t, const std::string& name);
// The next version number of `name` (1 for a new name), in the caller's write session.
int64_t next_version(Connection& conn, const CatalogTables& t, const std::string& name);
// The tags, sorted and without repeats, each checked (ValueError naming `op`).
std::vector<std::string> tag_set(const char* op, std::vector<std::string> tags);
void insert_tags(Connection& conn, const CatalogTables& t, int64_t id, const std::vector<std::string>& tags);
std::vector<std::string> version_tags(Connection& conn, const CatalogTables& t, int64_t id);
// find_top's k; ValueError unless k >= 1.
void check_top_k(int64_t k);

// A catalog's reads of its records, `Info`: `select` is "SELECT <columns> FROM <table> <alias>
// [JOIN ...]" and `read` makes a record of one of its rows (in the same session, for the rows
// of other tables the record holds).
template <class Info>
class Catalog {
 public:
  using Reader = Info (*)(Connection& conn, const Row& row);
  Catalog(const CatalogTables& tables, std::string select, Reader read)
      : t_(tables), select_(std::move(select)), read_(read) {}

  const CatalogTables& tables() const { return t_; }
  const std::string& select() const { return select_; }

  std::vector<Info> read_all(Connection& conn, const std::string& sql, const std::vector<Value>& params) const {
    std::vector<Info> out;
    for (const Row& r : conn.query(sql, params)) out.push_back(read_(conn, r));
    return out;
  }

  // The row of a visible version, as `select` selects it; NotFoundError naming what exists.
  Row row(Connection& conn, const std::string& name, int64_t version) const {
    std::vector<Row> rows = conn.query(select_ + " WHERE " + column("name") + " = ? AND " + column("version") + " = ? AND " + t_.visible,
                                       {name, version});
    if (rows.empty()) throw NotFoundError("store: no " + version_text(t_, name, version) + ": " + versions_help(conn, t_, name));
    return std::move(rows[0]);
  }
  Info get(Connection& conn, const std::string& name, int64_t version) const { return read_(conn, row(conn, name, version)); }

  std::vector<std::string> names(StoreImpl& impl) const {
    Session session = open_session(impl, Access::Read);
    return catalog_names(connection(session), t_);
  }
  std::vector<Info> versions(StoreImpl& impl, const std::string& name) const {
    Session session = open_session(impl, Access::Read);
    return read_all(connection(session),
                    select_ + " WHERE " + column("name") + " = ? AND " + t_.visible + " ORDER BY " + column("version"), {name});
  }
  Info get(StoreImpl& impl, const std::string& name, int64_t version) const {
    Session session = open_session(impl, Access::Read);
    return get(connection(session), name, version);
  }
  Info latest(StoreImpl& impl, const std::string& name) const {
    Session session = open_session(impl, Access::Read);
    Connection& conn = connection(session);
    return get(conn, name, latest_version(conn, t_, name));
  }
  // Versions matching the query, by name then version.
  std::vector<Info> find(StoreImpl& impl, const CatalogQuery& query) const {
    std::vector<Value> params;
    const std::string sql = select_ + catalog_where(t_, query, params) + " ORDER BY " + column("name") + ", " + column("version");
    Session session = open_session(impl, Access::Read);
    return read_all(connection(session), sql, params);
  }
  // The k versions with the highest (Max) or lowest (Min) `metric`; ties go to the older version.
  std::vector<Info> find_top(StoreImpl& impl, const std::string& metric, Order order, int64_t k, const CatalogQuery& query) const {
    t_.check_metric("find_top", metric);
    check_top_k(k);
    std::vector<Value> params;
    const CatalogRanking rank = t_.ranking(metric, params);
    const std::string sql = select_ + rank.join + catalog_where(t_, query, params) + " ORDER BY " + rank.key +
                            (order == Order::Max ? " DESC" : " ASC") + ", " + column("created_ms") + ", " + column("id") + " LIMIT ?";
    params.emplace_back(k);
    Session session = open_session(impl, Access::Read);
    return read_all(connection(session), sql, params);
  }

 private:
  std::string column(const char* name) const { return std::string(t_.alias) + "." + name; }

  const CatalogTables& t_;
  std::string select_;
  Reader read_;
};

}  // namespace loom::store::detail
