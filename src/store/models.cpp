#include "loom/store/models.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/json_util.h"
#include "core/utf8.h"
#include "loom/graph/serialize.h"
#include "loom/io/model.h"
#include "loom/train/model.h"
#include "store/crash_point.h"
#include "store/query.h"
#include "store/store_impl.h"

namespace loom::store {

using detail::Row;
using detail::connection;
using detail::open_session;
using detail::Value;
using detail::now_ms;

namespace {

void check_alias(const char* op, const std::string& alias) {
  bool ok = !alias.empty() && alias.size() <= 64 && alias != "latest" &&
            alias.find_first_not_of("0123456789") != std::string::npos;
  for (char c : alias) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
  if (!ok)
    throw ValueError(std::string(op) + ": invalid alias " + loom::detail::quote_text(alias) +
                     " (valid: 1 to 64 characters of [A-Za-z0-9_.-], not all digits, not 'latest')");
}

std::string what(const std::string& name, int64_t version) { return "model '" + name + "' version " + std::to_string(version); }

// A version's columns: its row's (ModelInfo's fields, loom/store/record.h) with the weights
// blob's size, which the reader finds by name; the row's id for its metrics, tags and aliases.
const std::vector<std::string>& info_columns() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n{"id"};
    for (std::string& c : column_names<ModelInfo>()) n.push_back(std::move(c));
    return n;
  }();
  return names;
}

const std::string& select_versions() {
  static const std::string sql = [] {
    std::string list;
    for (const std::string& c : info_columns()) list += (list.empty() ? "" : ", ") + std::string(c == "size" ? "b." : "m.") + c;
    return "SELECT " + list + " FROM models m JOIN blobs b ON b.sha256 = m.weights";
  }();
  return sql;
}

ModelInfo info_of(detail::Connection& conn, const Row& r) {
  static const RowReader<ModelInfo> reader(info_columns());
  ModelInfo info = reader.read(r);
  const int64_t id = r.integer(0);
  for (const Row& m : conn.query("SELECT metric, value FROM model_metrics WHERE model_id = ? ORDER BY metric", {id}))
    info.metrics.emplace(m.text(0), m.real(1));
  for (const Row& t : conn.query("SELECT tag FROM model_tags WHERE model_id = ? ORDER BY tag", {id})) info.tags.push_back(t.text(0));
  for (const Row& a : conn.query("SELECT alias FROM model_aliases WHERE model_id = ? ORDER BY alias", {id}))
    info.aliases.push_back(a.text(0));
  return info;
}

std::vector<ModelInfo> infos(detail::Connection& conn, const std::string& sql, const std::vector<Value>& params) {
  std::vector<ModelInfo> out;
  for (const Row& r : conn.query(sql, params)) out.push_back(info_of(conn, r));
  return out;
}

std::string versions_help(detail::Connection& conn, const std::string& name) {
  const std::vector<Row> rows = conn.query("SELECT MIN(version), MAX(version), COUNT(*) FROM models WHERE name = ?", {name});
  if (rows.empty() || rows[0].integer(2) == 0) return "there is no model '" + name + "'";
  return "'" + name + "' has " + std::to_string(rows[0].integer(2)) + " version(s) from " + std::to_string(rows[0].integer(0)) +
         " to " + std::to_string(rows[0].integer(1));
}

// The model id and weights of a version, in the caller's transaction; NotFoundError otherwise.
Row version_row(detail::Connection& conn, const std::string& name, int64_t version) {
  std::vector<Row> rows = conn.query("SELECT id, weights, architecture FROM models WHERE name = ? AND version = ?", {name, version});
  if (rows.empty()) throw NotFoundError("store: no " + what(name, version) + ": " + versions_help(conn, name));
  return std::move(rows[0]);
}

int64_t resolve(detail::Connection& conn, const std::string& name, const std::string& alias) {
  if (alias == "latest") {
    const std::vector<Row> rows = conn.query("SELECT MAX(version) FROM models WHERE name = ?", {name});
    if (rows.empty() || rows[0].is_null(0)) throw NotFoundError("store: no latest version: there is no model '" + name + "'");
    return rows[0].integer(0);
  }
  check_alias("get", alias);
  const std::vector<Row> rows = conn.query(
      "SELECT m.version FROM model_aliases a JOIN models m ON m.id = a.model_id WHERE a.name = ? AND a.alias = ?", {name, alias});
  if (rows.empty()) {
    std::string known;
    for (const Row& r : conn.query("SELECT alias FROM model_aliases WHERE name = ? ORDER BY alias", {name}))
      known += (known.empty() ? "" : ", ") + r.text(0);
    throw NotFoundError("store: model '" + name + "' has no alias '" + alias + "' (its aliases: " + (known.empty() ? "none" : known) +
                        "; 'latest' names the highest version)");
  }
  return rows[0].integer(0);
}

// " WHERE ..." for a query, appending its parameters.
std::string where(const ModelQuery& q, std::vector<Value>& params) {
  std::string sql = " WHERE 1 = 1";
  if (q.name) {
    sql += " AND m.name = ?";
    params.emplace_back(*q.name);
  }
  for (const std::string& tag : q.tags) {
    check_label("find", "tag", tag);
    sql += " AND EXISTS (SELECT 1 FROM model_tags t WHERE t.model_id = m.id AND t.tag = ?)";
    params.emplace_back(tag);
  }
  for (const MetricFilter& f : q.metrics) {
    check_label("find", "metric name", f.metric);
    const char* op = detail::sql_comparison("find", "metric operator", f.op, "'" + f.metric + "'");
    if (std::isnan(f.value)) throw ValueError("find: the value compared with metric '" + f.metric + "' is NaN");
    sql += std::string(" AND EXISTS (SELECT 1 FROM model_metrics x WHERE x.model_id = m.id AND x.metric = ? AND x.value ") + op + " ?)";
    params.emplace_back(f.metric);
    params.emplace_back(f.value);
  }
  return sql;
}

}  // namespace

Models::Models(std::shared_ptr<detail::StoreImpl> impl) : impl_(std::move(impl)) {}

ModelInfo Models::save(const std::string& name, const Graph& graph, const Metrics& metrics, const std::string& hyper_parameters,
                       const std::vector<std::string>& tags, const Provenance& produced_by) {
  check_label("save", "model name", name);
  detail::check_provenance_ids("save", produced_by);
  for (const auto& [k, v] : metrics) {
    check_label("save", "metric name", k);
    if (std::isnan(v)) throw ValueError("save: metric '" + k + "' of '" + name + "' is NaN (valid: a number, infinities included)");
  }
  std::vector<std::string> tag_set = tags;
  std::sort(tag_set.begin(), tag_set.end());
  tag_set.erase(std::unique(tag_set.begin(), tag_set.end()), tag_set.end());
  for (const std::string& t : tag_set) check_label("save", "tag", t);
  std::string parse_error;
  const std::optional<nlohmann::json> hyper = loom::detail::parse_json(hyper_parameters, &parse_error);
  if (!hyper || !hyper->is_object())
    throw ValueError("save: the hyper-parameters of '" + name + "' are not a JSON object" + (hyper ? "" : ": " + parse_error));
  const std::string hyper_text = hyper->dump();
  // Everything is encoded before the database is touched (a Lambda layer throws here).
  const std::string architecture = graph_to_json(graph);
  const detail::PreparedBlob blob = detail::prepare_blob(io::encode_state(graph));

  ModelInfo info;
  info.name = name;
  info.created_ms = now_ms();
  info.metrics = metrics;
  info.hyper_parameters = hyper_text;
  info.tags = tag_set;
  info.weights_sha256 = blob.sha256;
  info.weights_bytes = blob.size;
  Session session = open_session(*impl_, Access::Write);
  detail::Connection& conn = connection(session);
  impl_->blobs->add_ref(conn, blob);  // its bytes are durable before (or with) the commit below
  detail::crash_point("save:blob-written");
  info.version = conn.query("INSERT INTO model_names (name, last_version) VALUES (?, 1) ON CONFLICT (name) "
                            "DO UPDATE SET last_version = model_names.last_version + 1 RETURNING last_version",
                            {name})[0]
                     .integer(0);
  detail::check_provenance(conn, "save", produced_by);
  info.produced_by = produced_by;
  const int64_t id = conn.query("INSERT INTO models (name, version, created_ms, architecture, hyper_parameters, weights, task_id, run_id) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                                {name, info.version, info.created_ms, architecture, hyper_text, blob.sha256,
                                 produced_by.task_id ? Value(produced_by.task_id) : Value(),
                                 produced_by.run_id ? Value(produced_by.run_id) : Value()})[0]
                         .integer(0);
  for (const auto& [k, v] : metrics) conn.execute("INSERT INTO model_metrics (model_id, metric, value) VALUES (?, ?, ?)", {id, k, v});
  for (const std::string& t : tag_set) conn.execute("INSERT INTO model_tags (model_id, tag) VALUES (?, ?)", {id, t});
  detail::crash_point("save:before-commit");
  session.commit();
  detail::crash_point("save:committed");
  return info;
}

ModelInfo Models::save(const std::string& name, const train::Model& model, const Metrics& metrics,
                       const std::string& hyper_parameters, const std::vector<std::string>& tags, const Provenance& produced_by) {
  return save(name, model.graph(), metrics, hyper_parameters, tags, produced_by);
}

std::vector<std::string> Models::names() const {
  Session session = open_session(*impl_, Access::Read);
  std::vector<std::string> out;
  for (const Row& r : connection(session).query("SELECT DISTINCT name FROM models ORDER BY name")) out.push_back(r.text(0));
  return out;
}

std::vector<ModelInfo> Models::versions(const std::string& name) const {
  Session session = open_session(*impl_, Access::Read);
  return infos(connection(session), select_versions() + " WHERE m.name = ? ORDER BY m.version", {name});
}

ModelInfo Models::get(const std::string& name, int64_t version) const {
  Session session = open_session(*impl_, Access::Read);
  detail::Connection& conn = connection(session);
  std::vector<ModelInfo> found = infos(conn, select_versions() + " WHERE m.name = ? AND m.version = ?", {name, version});
  if (found.empty()) throw NotFoundError("store: no " + what(name, version) + ": " + versions_help(conn, name));
  return found[0];
}

ModelInfo Models::get(const std::string& name, const std::string& alias) const {
  int64_t version = 0;
  {
    Session session = open_session(*impl_, Access::Read);
    version = resolve(connection(session), name, alias);
  }
  return get(name, version);
}

ModelInfo Models::get(const std::string& name) const { return get(name, std::string("latest")); }

std::vector<ModelInfo> Models::find(const ModelQuery& query) const {
  std::vector<Value> params;
  const std::string sql = select_versions() + where(query, params) + " ORDER BY m.name, m.version";
  Session session = open_session(*impl_, Access::Read);
  return infos(connection(session), sql, params);
}

std::vector<ModelInfo> Models::find_top(const std::string& metric, Order order, int64_t k, const ModelQuery& query) const {
  check_label("find_top", "metric name", metric);
  if (k < 1) throw ValueError("find_top: k is " + std::to_string(k) + " (valid: k >= 1)");
  std::vector<Value> params{metric};
  const std::string sql = select_versions() + " JOIN model_metrics k ON k.model_id = m.id AND k.metric = ?" +
                          where(query, params) + " ORDER BY k.value " + (order == Order::Max ? "DESC" : "ASC") +
                          ", m.created_ms, m.id LIMIT ?";
  params.emplace_back(k);
  Session session = open_session(*impl_, Access::Read);
  return infos(connection(session), sql, params);
}

Graph Models::load(const std::string& name, int64_t version) const {
  std::string architecture, stored;
  detail::BlobRef ref;
  const std::string source = what(name, version);
  {
    Session session = open_session(*impl_, Access::Read);
    detail::Connection& conn = connection(session);
    const Row row = version_row(conn, name, version);
    architecture = row.text(2);
    ref = impl_->blobs->ref(conn, row.text(1), source + " weights");
    stored = impl_->blobs->stored(conn, ref, source + " weights");
  }
  // Verified (size, decompressed size, SHA-256) before anything is decoded, outside the lock.
  const std::string bytes = impl_->blobs->decode(ref, stored, source + " weights");
  io::Metadata meta;
  const io::TensorMap weights = io::decode_safetensors(bytes, &meta, source);
  // build_model checks every tensor against the architecture before copying any.
  return io::build_model(architecture, weights, source);
}

Graph Models::load(const std::string& name, const std::string& alias) const {
  int64_t version = 0;
  {
    Session session = open_session(*impl_, Access::Read);
    version = resolve(connection(session), name, alias);
  }
  return load(name, version);
}

Graph Models::load(const ModelInfo& info) const { return load(info.name, info.version); }

void Models::set_alias(const std::string& name, const std::string& alias, int64_t version, bool replace) {
  check_alias("set_alias", alias);
  Session session = open_session(*impl_, Access::Write);
  detail::Connection& conn = connection(session);
  const int64_t id = version_row(conn, name, version).integer(0);
  const std::vector<Row> current = conn.query(
      "SELECT m.version FROM model_aliases a JOIN models m ON m.id = a.model_id WHERE a.name = ? AND a.alias = ?", {name, alias});
  if (!current.empty() && current[0].integer(0) != version && !replace)
    throw ConflictError("set_alias: alias '" + alias + "' of model '" + name + "' already names version " +
                        std::to_string(current[0].integer(0)) + " (pass replace = true to move it to version " +
                        std::to_string(version) + ")");
  conn.execute("INSERT INTO model_aliases (name, alias, model_id) VALUES (?, ?, ?) ON CONFLICT (name, alias) "
               "DO UPDATE SET model_id = excluded.model_id",
               {name, alias, id});
  session.commit();
}

void Models::remove_alias(const std::string& name, const std::string& alias) {
  check_alias("remove_alias", alias);
  Session session = open_session(*impl_, Access::Write);
  detail::Connection& conn = connection(session);
  if (conn.execute("DELETE FROM model_aliases WHERE name = ? AND alias = ?", {name, alias}) == 0)
    throw NotFoundError("remove_alias: model '" + name + "' has no alias '" + alias + "'");
  session.commit();
}

void Models::remove(const std::string& name, int64_t version) {
  std::string weights;
  bool unreferenced = false;
  {
    Session session = open_session(*impl_, Access::Write);
    detail::Connection& conn = connection(session);
    const Row row = version_row(conn, name, version);
    const int64_t id = row.integer(0);
    weights = row.text(1);
    std::string aliases;
    for (const Row& a : conn.query("SELECT alias FROM model_aliases WHERE model_id = ? ORDER BY alias", {id}))
      aliases += (aliases.empty() ? "'" : ", '") + a.text(0) + "'";
    if (!aliases.empty())
      throw ConflictError("remove: " + what(name, version) + " is named by the alias(es) " + aliases + ": remove or move them first");
    conn.execute("DELETE FROM models WHERE id = ?", {id});  // metrics and tags cascade
    unreferenced = impl_->blobs->release(conn, weights);
    session.commit();
  }
  detail::crash_point("remove:committed");
  // After the commit, in a write session of its own (src/store/blobs.h says why).
  if (unreferenced) detail::remove_unreferenced(*impl_, {weights});
}

}  // namespace loom::store
