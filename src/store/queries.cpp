#include "loom/store/queries.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "core/json_util.h"
#include "core/utf8.h"
#include "store/query.h"
#include "store/store_impl.h"

namespace loom::store {

using detail::connection;
using detail::open_session;
using detail::Row;
using detail::Value;
using nlohmann::json;

// ---------------------------------------------------------------- QueryView

QueryView::QueryView(std::vector<std::shared_ptr<DatasetView>> parts, int64_t offset, int64_t limit) : parts_(std::move(parts)) {
  if (offset < 0) throw ValueError("QueryView: offset is " + std::to_string(offset) + " (valid: >= 0)");
  if (limit < -1) throw ValueError("QueryView: limit is " + std::to_string(limit) + " (valid: -1 for none, or >= 0)");
  const auto same = [](const std::vector<FieldInfo>& a, const std::vector<FieldInfo>& b) {
    if (a.size() != b.size()) return false;
    for (size_t k = 0; k < a.size(); ++k)
      if (a[k].name != b[k].name || a[k].dtype != b[k].dtype || a[k].shape != b[k].shape) return false;
    return true;
  };
  for (size_t p = 0; p < parts_.size(); ++p) {
    if (!parts_[p]) throw ValueError("QueryView: part " + std::to_string(p) + " is null");
    if (p > 0 && !same(parts_[p]->fields(), parts_[0]->fields()))
      throw ValueError("QueryView: dataset '" + parts_[p]->info().name + "' version " + std::to_string(parts_[p]->info().version) +
                       " has other fields than version " + std::to_string(parts_[0]->info().version) +
                       " (valid: versions whose samples have the same field names, dtypes and shapes)");
    versions_.push_back(parts_[p]->info().version);
    for (int64_t i = 0; i < parts_[p]->size(); ++i) {
      if (offset > 0) {
        --offset;
        continue;
      }
      if (limit >= 0 && static_cast<int64_t>(at_.size()) >= limit) break;
      at_.push_back({static_cast<int32_t>(p), i});
    }
  }
}

const QueryView::At& QueryView::at(int64_t i) const {
  if (i < 0 || i >= size())
    throw IndexError("QueryView: index " + std::to_string(i) + " is out of range (valid: 0 to " + std::to_string(size() - 1) + ")");
  return at_[static_cast<size_t>(i)];
}

data::Example QueryView::get(int64_t i) const {
  const At& a = at(i);
  return parts_[static_cast<size_t>(a.part)]->get(a.i);
}

data::Batch QueryView::get_batch(const std::vector<int64_t>& indices) const {
  // One part (the common case: a batch of one version): its own batched read.
  if (!indices.empty()) {
    const int32_t part = at(indices[0]).part;
    std::vector<int64_t> local;
    for (int64_t i : indices) {
      const At& a = at(i);
      if (a.part != part) return data::Dataset::get_batch(indices);
      local.push_back(a.i);
    }
    return parts_[static_cast<size_t>(part)]->get_batch(local);
  }
  return data::Dataset::get_batch(indices);
}

int64_t QueryView::version(int64_t i) const { return versions_[static_cast<size_t>(at(i).part)]; }
int64_t QueryView::index(int64_t i) const {
  const At& a = at(i);
  return parts_[static_cast<size_t>(a.part)]->index(a.i);
}
const std::string& QueryView::metadata(int64_t i) const {
  const At& a = at(i);
  return parts_[static_cast<size_t>(a.part)]->metadata(a.i);
}

// ---------------------------------------------------------------- JSON

std::string sample_query_json(const SampleQuery& q) {
  json where = json::array();
  for (const Predicate& p : q.where)
    where.push_back({{"key", p.key}, {"op", p.op}, {"value", p.value.is_text() ? json(p.value.text()) : json(p.value.number())}});
  json j = {{"tags", q.tags},       {"where", where},       {"order_by", q.order_by}, {"descending", q.descending},
            {"offset", q.offset},   {"limit", q.limit},     {"fields", q.fields}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

SampleQuery parse_sample_query(const std::string& text) {
  std::string error;
  const std::optional<json> j = loom::detail::parse_json(text, &error);
  const auto bad = [&](const std::string& why) {
    return ValueError("parse_sample_query: " + why + " (valid: a JSON object with tags, where [{key, op, value}], order_by, "
                      "descending, offset, limit, fields)");
  };
  if (!j) throw bad("not JSON: " + error);
  if (!j->is_object()) throw bad("not a JSON object");
  SampleQuery q;
  const auto strings = [&](const char* key, std::vector<std::string>& out) {
    if (!j->contains(key)) return;
    if (!(*j)[key].is_array()) throw bad(std::string("'") + key + "' is not an array");
    for (const json& s : (*j)[key]) {
      if (!s.is_string()) throw bad(std::string("'") + key + "' holds a non-string");
      out.push_back(s.get<std::string>());
    }
  };
  const auto integer = [&](const char* key, int64_t& out) {
    if (!j->contains(key)) return;
    const std::optional<int64_t> v = loom::detail::json_to_int((*j)[key], -1, int64_t(1) << 62);
    if (!v) throw bad(std::string("'") + key + "' is not an integer");
    out = *v;
  };
  for (const auto& [key, value] : j->items())
    if (key != "tags" && key != "where" && key != "order_by" && key != "descending" && key != "offset" && key != "limit" &&
        key != "fields")
      throw bad("unknown key " + loom::detail::quote_text(key));
  strings("tags", q.tags);
  strings("fields", q.fields);
  if (j->contains("where")) {
    if (!(*j)["where"].is_array()) throw bad("'where' is not an array");
    for (const json& p : (*j)["where"]) {
      if (!p.is_object() || !p.contains("key") || !p["key"].is_string() || !p.contains("op") || !p["op"].is_string() ||
          !p.contains("value") || !(p["value"].is_string() || p["value"].is_number() || p["value"].is_boolean()))
        throw bad("a 'where' item is not {\"key\": text, \"op\": text, \"value\": number or text}");
      const json& v = p["value"];
      q.where.push_back({p["key"].get<std::string>(), p["op"].get<std::string>(),
                         v.is_string()    ? MetaValue(v.get<std::string>())
                         : v.is_boolean() ? MetaValue(v.get<bool>() ? 1 : 0)
                                          : MetaValue(v.get<double>())});
    }
  }
  if (j->contains("order_by")) {
    if (!(*j)["order_by"].is_string()) throw bad("'order_by' is not text");
    q.order_by = (*j)["order_by"].get<std::string>();
  }
  if (j->contains("descending")) {
    if (!(*j)["descending"].is_boolean()) throw bad("'descending' is not true or false");
    q.descending = (*j)["descending"].get<bool>();
  }
  integer("offset", q.offset);
  integer("limit", q.limit);
  return q;
}

std::string record_text(const SampleQuery& q) { return sample_query_json(q); }
SampleQuery record_from_text(const std::string& text, const SampleQuery*) { return parse_sample_query(text); }

// ---------------------------------------------------------------- Queries

namespace {

// The columns of a NamedQuery, from its field list (loom/store/record.h).
const std::string& select_queries() {
  static const std::string sql = "SELECT " + column_list<NamedQuery>() + " FROM dataset_queries";
  return sql;
}

NamedQuery query_of(const Row& r) {
  static const RowReader<NamedQuery> reader;
  try {
    return reader.read(r);
  } catch (const StoreError& e) {
    // the name is the first column (its field's): the message says which query cannot be read
    throw StoreError("store: named query " + loom::detail::quote_text(r.text(0)) + " cannot be read from its row: " + e.what());
  }
}

NamedQuery find_query(Session& session, const char* op, const std::string& name) {
  std::vector<Row> rows = connection(session).query(select_queries() + " WHERE name = ?", {name});
  if (rows.empty()) {
    std::string names;
    for (const Row& r : connection(session).query("SELECT name FROM dataset_queries ORDER BY name LIMIT 10"))
      names += (names.empty() ? "" : ", ") + loom::detail::quote_text(r.text(0));
    throw NotFoundError(std::string(op) + ": there is no named query " + loom::detail::quote_text(name) +
                        (names.empty() ? " (the store has none)" : " (valid: " + names + ")"));
  }
  return query_of(rows[0]);
}

}  // namespace

Queries::Queries(std::shared_ptr<detail::StoreImpl> impl) : impl_(std::move(impl)) {}

NamedQuery Queries::create(const NamedQuery& in) {
  check_label("create", "query name", in.name);
  check_label("create", "dataset name", in.dataset);
  const int64_t first = in.first_version, last = in.last_version;
  if (first < 0 || last < 0 || (first == 0 && last != 0) || (last > 0 && first > last))
    throw ValueError("create: version range " + std::to_string(first) + ".." + std::to_string(last) +
                     " is invalid (valid: first == last for one version, first <= last for a range, first >= 1 with last 0 "
                     "for first..latest, both 0 for the latest only)");
  if (in.query.cache_shards < 1) throw ValueError("create: cache_shards is " + std::to_string(in.query.cache_shards) + " (valid: >= 1)");
  // Checked against the dataset before anything is written: its latest version must take the
  // query (predicates, order key, fields), and a pinned range must exist.
  const Datasets datasets(impl_);
  const DatasetInfo latest = datasets.get(in.dataset);  // NotFoundError for an unknown dataset
  if (last > 0) {
    datasets.get(in.dataset, first);
    datasets.get(in.dataset, last);
  }
  SampleQuery probe = in.query;
  probe.offset = 0;
  probe.limit = 0;
  datasets.query(in.dataset, last > 0 ? last : latest.version, probe);
  if (in.query.offset < 0) throw ValueError("create: offset is " + std::to_string(in.query.offset) + " (valid: >= 0)");
  if (in.query.limit < -1) throw ValueError("create: limit is " + std::to_string(in.query.limit) + " (valid: -1 for none, or >= 0)");

  NamedQuery out = in;
  out.created_ms = detail::now_ms();
  Session session = open_session(*impl_, Access::Write);
  if (connection(session).execute("INSERT INTO dataset_queries (name, dataset, first_version, last_version, query, created_ms) "
                                  "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
                                  {in.name, in.dataset, first, last, sample_query_json(in.query), out.created_ms}) == 0)
    throw ConflictError("create: a named query " + loom::detail::quote_text(in.name) +
                        " already exists (delete it first, or choose another name); nothing was changed");
  session.commit();
  return out;
}

NamedQuery Queries::get(const std::string& name) const {
  Session session = open_session(*impl_, Access::Read);
  return find_query(session, "get", name);
}

std::vector<NamedQuery> Queries::list() const {
  Session session = open_session(*impl_, Access::Read);
  std::vector<NamedQuery> out;
  for (const Row& r : connection(session).query(select_queries() + " ORDER BY name")) out.push_back(query_of(r));
  return out;
}

void Queries::remove(const std::string& name) {
  Session session = open_session(*impl_, Access::Write);
  find_query(session, "remove", name);
  connection(session).execute("DELETE FROM dataset_queries WHERE name = ?", {name});
  session.commit();
}

std::vector<int64_t> Queries::versions(const std::string& name) const {
  Session session = open_session(*impl_, Access::Read);
  const NamedQuery q = find_query(session, "versions", name);
  std::vector<Row> rows;
  if (q.first_version == 0)
    rows = connection(session).query("SELECT version FROM datasets WHERE name = ? AND committed = 1 ORDER BY created_ms DESC, id DESC LIMIT 1",
                                     {q.dataset});
  else if (q.last_version == 0)
    rows = connection(session).query("SELECT version FROM datasets WHERE name = ? AND committed = 1 AND version >= ? ORDER BY version",
                                     {q.dataset, q.first_version});
  else
    rows = connection(session).query(
        "SELECT version FROM datasets WHERE name = ? AND committed = 1 AND version >= ? AND version <= ? ORDER BY version",
        {q.dataset, q.first_version, q.last_version});
  std::vector<int64_t> out;
  for (const Row& r : rows) out.push_back(r.integer(0));
  return out;
}

std::shared_ptr<QueryView> Queries::open(const std::string& name, int64_t cache_shards) const {
  const NamedQuery q = get(name);
  SampleQuery each = q.query;
  each.cache_shards = cache_shards;
  const std::vector<int64_t> vs = versions(name);
  std::vector<std::shared_ptr<DatasetView>> parts;
  const Datasets datasets(impl_);
  if (vs.size() == 1) return std::make_shared<QueryView>(std::vector{datasets.query(q.dataset, vs[0], each)});
  each.offset = 0;
  each.limit = -1;
  for (int64_t v : vs) {
    try {
      parts.push_back(datasets.query(q.dataset, v, each));
    } catch (const NotFoundError&) {
      // removed since versions() read it: as if removed before
    }
  }
  return std::make_shared<QueryView>(std::move(parts), q.query.offset, q.query.limit);
}

std::shared_ptr<QueryView> Queries::open_versions(const std::string& dataset, const std::vector<int64_t>& versions,
                                                  const SampleQuery& query) const {
  const Datasets datasets(impl_);
  if (versions.size() == 1) return std::make_shared<QueryView>(std::vector{datasets.query(dataset, versions[0], query)});
  SampleQuery each = query;
  each.offset = 0;
  each.limit = -1;
  std::vector<std::shared_ptr<DatasetView>> parts;
  for (int64_t v : versions) parts.push_back(datasets.query(dataset, v, each));
  return std::make_shared<QueryView>(std::move(parts), query.offset, query.limit);
}

}  // namespace loom::store
