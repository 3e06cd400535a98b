#include "loom/store/model_registry.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/json_util.h"
#include "core/utf8.h"
#include "loom/graph/serialize.h"
#include "loom/io/model_file.h"
#include "loom/train/model.h"
#include "store/catalog_impl.h"
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

// A model version's metrics are those saved with it (model_metrics), any name a label may be.
void check_metric(const char* op, const std::string& metric) { check_label(op, "metric name", metric); }

std::string metric_condition(const std::string& metric, const char* cmp, std::vector<Value>& params) {
  params.emplace_back(metric);
  return std::string(" AND EXISTS (SELECT 1 FROM model_metrics x WHERE x.model_id = m.id AND x.metric = ? AND x.value ") + cmp + " ?)";
}

detail::CatalogRanking ranking(const std::string& metric, std::vector<Value>& params) {
  params.emplace_back(metric);
  return {" JOIN model_metrics k ON k.model_id = m.id AND k.metric = ?", "k.value"};
}

// Every version is visible; the latest is the highest number.
constexpr detail::CatalogTables kTables{"model", "model", "models", "m", "1 = 1", "m.version DESC", "model_tags", "model_id",
                                        "model_names", check_metric, metric_condition, ranking};

std::string what(const std::string& name, int64_t version) { return detail::version_text(kTables, name, version); }

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
  info.tags = detail::version_tags(conn, kTables, id);
  for (const Row& a : conn.query("SELECT alias FROM model_aliases WHERE model_id = ? ORDER BY alias", {id}))
    info.aliases.push_back(a.text(0));
  return info;
}

const detail::Catalog<ModelInfo>& catalog() {
  static const detail::Catalog<ModelInfo> c(kTables, select_versions(), info_of);
  return c;
}

// The model id and weights of a version, in the caller's transaction; NotFoundError otherwise.
Row version_row(detail::Connection& conn, const std::string& name, int64_t version) {
  std::vector<Row> rows = conn.query("SELECT id, weights, architecture FROM models WHERE name = ? AND version = ?", {name, version});
  if (rows.empty()) throw NotFoundError("store: no " + what(name, version) + ": " + detail::versions_help(conn, kTables, name));
  return std::move(rows[0]);
}

int64_t resolve(detail::Connection& conn, const std::string& name, const std::string& alias) {
  if (alias == "latest") return detail::latest_version(conn, kTables, name);
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
  const std::vector<std::string> tag_set = detail::tag_set("save", tags);
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
  info.version = detail::next_version(conn, kTables, name);
  detail::check_provenance(conn, "save", produced_by);
  info.produced_by = produced_by;
  const int64_t id = conn.query("INSERT INTO models (name, version, created_ms, architecture, hyper_parameters, weights, task_id, run_id) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                                {name, info.version, info.created_ms, architecture, hyper_text, blob.sha256,
                                 produced_by.task_id ? Value(produced_by.task_id) : Value(),
                                 produced_by.run_id ? Value(produced_by.run_id) : Value()})[0]
                         .integer(0);
  for (const auto& [k, v] : metrics) conn.execute("INSERT INTO model_metrics (model_id, metric, value) VALUES (?, ?, ?)", {id, k, v});
  detail::insert_tags(conn, kTables, id, tag_set);
  detail::crash_point("save:before-commit");
  session.commit();
  detail::crash_point("save:committed");
  return info;
}

ModelInfo Models::save(const std::string& name, const train::Model& model, const Metrics& metrics,
                       const std::string& hyper_parameters, const std::vector<std::string>& tags, const Provenance& produced_by) {
  return save(name, model.graph(), metrics, hyper_parameters, tags, produced_by);
}

std::vector<std::string> Models::names() const { return catalog().names(*impl_); }

std::vector<ModelInfo> Models::versions(const std::string& name) const { return catalog().versions(*impl_, name); }

ModelInfo Models::get(const std::string& name, int64_t version) const { return catalog().get(*impl_, name, version); }

ModelInfo Models::get(const std::string& name, const std::string& alias) const {
  int64_t version = 0;
  {
    Session session = open_session(*impl_, Access::Read);
    version = resolve(connection(session), name, alias);
  }
  return get(name, version);
}

ModelInfo Models::get(const std::string& name) const { return catalog().latest(*impl_, name); }

std::vector<ModelInfo> Models::find(const ModelQuery& query) const { return catalog().find(*impl_, query); }

std::vector<ModelInfo> Models::find_top(const std::string& metric, Order order, int64_t k, const ModelQuery& query) const {
  return catalog().find_top(*impl_, metric, order, k, query);
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
