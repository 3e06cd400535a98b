#include "loom/store/datasets.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/json_util.h"
#include "core/utf8.h"
#include "store/datasets_impl.h"
#include "store/query.h"

namespace loom::store {

using detail::connection;
using detail::dataset_what;
using detail::now_ms;
using detail::open_session;
using detail::Row;
using detail::Value;
using nlohmann::json;

namespace detail {

std::string dataset_what(const std::string& name, int64_t version) { return version_text(dataset_catalog().tables(), name, version); }

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string fields_json(const std::vector<FieldInfo>& fields) {
  json j = json::array();
  for (const FieldInfo& f : fields) j.push_back({{"name", f.name}, {"dtype", io::safetensors_dtype_name(f.dtype)}, {"shape", f.shape}});
  return j.dump();
}

std::vector<FieldInfo> parse_fields(const std::string& text, const std::string& source) {
  std::string error;
  const std::optional<json> j = loom::detail::parse_json(text, &error);
  auto bad = [&] { return StoreError("store: " + source + " has a malformed field list in its row: " + text); };
  if (!j || !j->is_array()) throw bad();
  std::vector<FieldInfo> out;
  for (const json& f : *j) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("dtype") || !f["dtype"].is_string() ||
        !f.contains("shape") || !f["shape"].is_array())
      throw bad();
    FieldInfo fi;
    fi.name = f["name"].get<std::string>();
    const std::optional<DType> dt = io::dtype_from_safetensors(f["dtype"].get<std::string>());
    if (!dt) throw bad();
    fi.dtype = *dt;
    for (const json& d : f["shape"]) {
      const std::optional<int64_t> v = loom::detail::json_to_int(d, 0, int64_t(1) << 40);
      if (!v) throw bad();
      fi.shape.push_back(*v);
    }
    out.push_back(std::move(fi));
  }
  return out;
}

// In the caller's write session: deletes a version (committed or draft) and releases its
// shards. Returns the blobs no row references any more, whose bytes go after the commit
// (detail::remove_unreferenced; src/store/blobs.h says why).
std::vector<std::string> delete_version(detail::StoreImpl& impl, detail::Connection& conn, int64_t id) {
  std::vector<std::string> blobs, freed;
  for (const Row& r : conn.query("SELECT blob FROM dataset_shards WHERE dataset_id = ?", {id})) blobs.push_back(r.text(0));
  conn.execute("DELETE FROM datasets WHERE id = ?", {id});  // shards, samples, metadata and tags cascade
  for (const std::string& b : blobs)
    if (impl.blobs->release(conn, b)) freed.push_back(b);
  return freed;
}

}  // namespace detail

namespace {

// The column of a dataset version's number `metric`, the "metrics" its catalog filters and ranks by.
const char* number_column(const char* op, const std::string& metric) {
  static const char* const columns[] = {"samples", "shards", "version", "created_ms"};
  for (const char* c : columns)
    if (metric == c) return c;
  throw ValueError(std::string(op) + ": dataset versions have no metric " + loom::detail::quote_text(metric) +
                   " (valid: samples, shards, version, created_ms)");
}

void check_number(const char* op, const std::string& metric) { number_column(op, metric); }

std::string number_condition(const std::string& metric, const char* cmp, std::vector<Value>&) {
  return std::string(" AND d.") + number_column("find", metric) + " " + cmp + " ?";
}

detail::CatalogRanking number_ranking(const std::string& metric, std::vector<Value>&) {
  return {"", std::string("d.") + number_column("find_top", metric)};
}

// A version is visible once committed; the latest is the one committed last (created_ms is
// set by the commit).
constexpr detail::CatalogTables kTables{"dataset", "committed dataset", "datasets", "d", "d.committed = 1", "d.created_ms DESC, d.id DESC",
                                        "dataset_tags", "dataset_id", "dataset_names", check_number, number_condition, number_ranking};

// A version's columns: its row's (DatasetInfo's fields, loom/store/record.h), after the row's id
// (for its tags) and before its field list (JSON, which the reader decodes and checks).
const std::vector<std::string>& info_columns() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n{"id"};
    for (std::string& c : column_names<DatasetInfo>()) n.push_back(std::move(c));
    n.emplace_back("fields");
    return n;
  }();
  return names;
}

DatasetInfo info_of(detail::Connection& conn, const Row& r) {
  static const RowReader<DatasetInfo> reader(info_columns());
  DatasetInfo info = reader.read(r);
  info.schema = detail::parse_fields(r.text(info_columns().size() - 1), dataset_what(info.name, info.version));
  info.tags = detail::version_tags(conn, kTables, r.integer(0));
  return info;
}

std::string select_versions() {
  std::string list;
  for (const std::string& c : info_columns()) list += (list.empty() ? "" : ", ") + ("d." + c);
  return "SELECT " + list + " FROM datasets d";
}

}  // namespace

const detail::Catalog<DatasetInfo>& detail::dataset_catalog() {
  static const Catalog<DatasetInfo> c(kTables, select_versions(), info_of);
  return c;
}

Datasets::Datasets(std::shared_ptr<detail::StoreImpl> impl) : impl_(std::move(impl)) {}

std::vector<std::string> Datasets::names() const { return detail::dataset_catalog().names(*impl_); }

std::vector<DatasetInfo> Datasets::versions(const std::string& name) const { return detail::dataset_catalog().versions(*impl_, name); }

DatasetInfo Datasets::get(const std::string& name, int64_t version) const { return detail::dataset_catalog().get(*impl_, name, version); }

DatasetInfo Datasets::get(const std::string& name) const { return detail::dataset_catalog().latest(*impl_, name); }

std::vector<DatasetInfo> Datasets::find(const DatasetQuery& query) const { return detail::dataset_catalog().find(*impl_, query); }

std::vector<DatasetInfo> Datasets::find_top(const std::string& metric, Order order, int64_t k, const DatasetQuery& query) const {
  return detail::dataset_catalog().find_top(*impl_, metric, order, k, query);
}

namespace {

// A sample query as SQL: its text, its parameters, and which parameter is the version's id
// (known once the version's row is read).
struct SampleSql {
  std::string sql;
  std::vector<Value> params;
  size_t id_param = 0;
};

void check_sample_query(const SampleQuery& q) {
  if (q.offset < 0) throw ValueError("query: offset is " + std::to_string(q.offset) + " (valid: >= 0)");
  if (q.limit < -1) throw ValueError("query: limit is " + std::to_string(q.limit) + " (valid: -1 for none, or >= 0)");
  if (q.cache_shards < 1) throw ValueError("query: cache_shards is " + std::to_string(q.cache_shards) + " (valid: >= 1)");
}

// " AND EXISTS (...)" for a predicate on a metadata key: a string compares with == and != only.
std::string predicate_sql(const Predicate& p, std::vector<Value>& params) {
  check_label("query", "metadata key", p.key);
  const char* op = detail::sql_comparison("query", "operator", p.op, "metadata key '" + p.key + "'");
  const std::string sub = " AND EXISTS (SELECT 1 FROM dataset_sample_meta p WHERE p.dataset_id = s.dataset_id AND p.idx = s.idx AND p.mkey = ? AND ";
  params.emplace_back(p.key);
  if (p.value.is_text()) {
    if (p.op != "==" && p.op != "!=")
      throw ValueError("query: operator '" + p.op + "' compares metadata key '" + p.key + "' with the string " +
                       loom::detail::quote_text(p.value.text()) + " (valid for strings: == and !=)");
    if (p.value.text().find('\0') != std::string::npos)
      throw ValueError("query: the string compared with metadata key '" + p.key +
                       "' holds U+0000 (valid: strings without NUL characters, as append stores them)");
    params.emplace_back(p.value.text());
    return sub + "p.str " + op + " ?)";
  }
  if (std::isnan(p.value.number())) throw ValueError("query: the value compared with metadata key '" + p.key + "' is NaN");
  params.emplace_back(p.value.number());
  return sub + "p.num " + op + " ?)";
}

// The query's SQL over dataset_samples, built (and its input checked) before the database is
// touched: numbers before strings before samples without the key, ties by sample index.
SampleSql sample_sql(const SampleQuery& q) {
  SampleSql out;
  out.sql = "SELECT s.idx, s.shard, s.position, s.metadata FROM dataset_samples s";
  if (!q.order_by.empty()) {
    check_label("query", "order_by key", q.order_by);
    out.sql += " LEFT JOIN dataset_sample_meta o ON o.dataset_id = s.dataset_id AND o.idx = s.idx AND o.mkey = ?";
    out.params.emplace_back(q.order_by);
  }
  out.sql += " WHERE s.dataset_id = ?";
  out.id_param = out.params.size();
  out.params.emplace_back(int64_t(0));
  for (const std::string& tag : q.tags) {
    check_label("query", "tag", tag);
    out.sql += " AND EXISTS (SELECT 1 FROM dataset_sample_tags t WHERE t.dataset_id = s.dataset_id AND t.idx = s.idx AND t.tag = ?)";
    out.params.emplace_back(tag);
  }
  for (const Predicate& p : q.where) out.sql += predicate_sql(p, out.params);
  const char* dir = q.descending ? " DESC" : "";
  if (!q.order_by.empty())
    out.sql += std::string(" ORDER BY CASE WHEN o.num IS NOT NULL THEN 0 WHEN o.str IS NOT NULL THEN 1 ELSE 2 END, o.num") + dir +
               ", o.str" + dir + ", s.idx";
  else
    out.sql += std::string(" ORDER BY s.idx") + dir;
  if (q.limit >= 0) {
    out.sql += " LIMIT ? OFFSET ?";
    out.params.emplace_back(q.limit);
    out.params.emplace_back(q.offset);
  }
  return out;
}

// The fields an Example of the view holds, in the query's order (all when it names none).
std::vector<FieldInfo> selected_fields(const DatasetInfo& info, const std::vector<std::string>& wanted) {
  if (wanted.empty()) return info.schema;
  std::vector<FieldInfo> out;
  for (const std::string& f : wanted) {
    auto it = std::find_if(info.schema.begin(), info.schema.end(), [&](const FieldInfo& fi) { return fi.name == f; });
    if (it == info.schema.end()) {
      std::string names;
      for (const FieldInfo& fi : info.schema) names += (names.empty() ? "" : ", ") + fi.name;
      throw ValueError("query: " + dataset_what(info.name, info.version) + " has no field '" + f + "' (its fields: " + names + ")");
    }
    out.push_back(*it);
  }
  return out;
}

// The version's shards, numbered 0, 1, ... without a gap (a StoreError otherwise).
void read_shards(detail::StoreImpl& impl, detail::Connection& conn, int64_t id, DatasetView::Shared& shared) {
  const std::string source = dataset_what(shared.info.name, shared.info.version);
  for (const Row& r : conn.query("SELECT shard, blob, samples FROM dataset_shards WHERE dataset_id = ? ORDER BY shard", {id})) {
    if (r.integer(0) != static_cast<int64_t>(shared.shards.size()))
      throw StoreError("store: " + source + " has a gap in its shard numbers at " + std::to_string(shared.shards.size()));
    shared.shards.push_back(impl.blobs->ref(conn, r.text(1), source + " shard " + std::to_string(r.integer(0))));
    shared.shard_samples.push_back(r.integer(2));
  }
}

// What the view holds per sample: where it is, its metadata and its tags.
struct Selection {
  std::vector<DatasetView::Entry> entries;
  std::vector<std::string> metadata;
  std::vector<std::vector<std::string>> tags;
};

// The samples the query selects, each checked to point inside the version's shards, then their
// tags. Without a limit the offset is skipped here (with one, SQL's OFFSET did it).
Selection read_samples(detail::Connection& conn, const SampleSql& sql, const SampleQuery& q, int64_t id,
                       const DatasetView::Shared& shared) {
  Selection out;
  int64_t skip = q.limit >= 0 ? 0 : q.offset;
  std::unordered_map<int64_t, size_t> at;
  for (const Row& r : conn.query(sql.sql, sql.params)) {
    if (skip > 0) {
      --skip;
      continue;
    }
    const int64_t shard = r.integer(1), position = r.integer(2);
    if (shard < 0 || shard >= static_cast<int64_t>(shared.shards.size()) || position < 0 || position >= shared.shard_samples[shard])
      throw StoreError("store: " + dataset_what(shared.info.name, shared.info.version) + " sample " + std::to_string(r.integer(0)) +
                       " points outside its shards (shard " + std::to_string(shard) + ", position " + std::to_string(position) + ")");
    at.emplace(r.integer(0), out.entries.size());
    out.entries.push_back({r.integer(0), shard, position});
    out.metadata.push_back(r.text(3));
  }
  out.tags.resize(out.entries.size());
  for (const Row& r : conn.query("SELECT idx, tag FROM dataset_sample_tags WHERE dataset_id = ? ORDER BY idx, tag", {id})) {
    auto it = at.find(r.integer(0));
    if (it != at.end()) out.tags[it->second].push_back(r.text(1));
  }
  return out;
}

}  // namespace

std::shared_ptr<DatasetView> Datasets::query(const std::string& name, int64_t version, const SampleQuery& q) const {
  check_sample_query(q);
  SampleSql sql = sample_sql(q);
  auto shared = std::make_shared<DatasetView::Shared>();
  shared->impl = impl_;
  shared->capacity = static_cast<size_t>(q.cache_shards);
  Selection selected;
  {
    Session session = open_session(*impl_, Access::Read);
    detail::Connection& conn = connection(session);
    const Row row = detail::dataset_catalog().row(conn, name, version);
    const int64_t id = row.integer(0);
    shared->info = info_of(conn, row);
    sql.params[sql.id_param] = id;
    shared->fields = selected_fields(shared->info, q.fields);
    read_shards(*impl_, conn, id, *shared);
    selected = read_samples(conn, sql, q, id, *shared);
  }
  return std::make_shared<DatasetView>(std::move(shared), std::move(selected.entries), std::move(selected.metadata),
                                       std::move(selected.tags));
}

void Datasets::remove(const std::string& name, int64_t version) {
  std::vector<std::string> freed;
  {
    Session session = open_session(*impl_, Access::Write);
    detail::Connection& conn = connection(session);
    std::vector<Row> rows = conn.query("SELECT id FROM datasets WHERE name = ? AND version = ?", {name, version});
    if (rows.empty()) throw NotFoundError("remove: no " + dataset_what(name, version) + ": " + detail::versions_help(conn, kTables, name));
    freed = detail::delete_version(*impl_, conn, rows[0].integer(0));
    session.commit();
  }
  detail::remove_unreferenced(*impl_, freed);
}

int64_t Datasets::remove_drafts(int64_t older_than_ms) {
  if (older_than_ms < 0) throw ValueError("remove_drafts: older_than_ms is negative");
  std::vector<std::string> freed;
  int64_t removed = 0;
  {
    Session session = open_session(*impl_, Access::Write);
    detail::Connection& conn = connection(session);
    const std::vector<Row> rows = conn.query("SELECT id FROM datasets WHERE committed = 0 AND created_ms <= ?", {now_ms() - older_than_ms});
    for (const Row& r : rows) {
      const std::vector<std::string> version_freed = detail::delete_version(*impl_, conn, r.integer(0));
      freed.insert(freed.end(), version_freed.begin(), version_freed.end());
    }
    removed = static_cast<int64_t>(rows.size());
    session.commit();
  }
  detail::remove_unreferenced(*impl_, freed);
  return removed;
}

}  // namespace loom::store
