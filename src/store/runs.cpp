#include "loom/store/runs.h"

#include <nlohmann/json.hpp>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "core/json_util.h"
#include "loom/core/file.h"
#include "loom/store/text.h"
#include "store/query.h"
#include "store/store_impl.h"

namespace loom::store {

using detail::Row;
using detail::connection;
using detail::open_session;
using detail::Value;
using detail::now_ms;

namespace {

std::string what(int64_t run) { return "run " + std::to_string(run); }

// The columns of a RunInfo, from its field list (loom/store/record.h).
const std::string& select_runs() {
  static const std::string sql = "SELECT " + column_list<RunInfo>("r") + " FROM runs r";
  return sql;
}

RunInfo run_of(const Row& r) {
  static const RowReader<RunInfo> reader;
  return reader.read(r);
}

// `metric IN (?, ...)` for `only` (empty: every metric), its names appended to `params`.
std::string metric_in(const std::vector<std::string>* only, std::vector<Value>& params) {
  if (!only || only->empty()) return "";
  std::string sql = " AND m.metric IN (";
  for (size_t i = 0; i < only->size(); ++i) {
    sql += i ? ", ?" : "?";
    params.emplace_back((*only)[i]);
  }
  return sql + ")";
}

// The runs that `where` selects (an SQL condition on `runs r` with its `params`), in id order,
// with their tags and, unless `curves` is false, their curves (only `only`'s when given): three
// statements whatever the number of runs, where one per run made a table of 1,000 runs slow.
std::vector<RunInfo> load_runs(detail::Connection& conn, const std::string& where, const std::vector<Value>& params,
                               const std::vector<std::string>* only, bool curves = true) {
  std::vector<RunInfo> out;
  std::map<int64_t, size_t> at;
  for (const Row& r : conn.query(select_runs() + where + " ORDER BY r.id", params)) {
    out.push_back(run_of(r));
    at[out.back().id] = out.size() - 1;
    if (only)
      for (const std::string& m : *only) out.back().metrics[m];
  }
  if (out.empty()) return out;
  const std::string ids = " IN (SELECT r.id FROM runs r" + where + ")";
  for (const Row& t : conn.query("SELECT run_id, tag FROM run_tags WHERE run_id" + ids + " ORDER BY run_id, tag", params))
    out[at.at(t.integer(0))].tags.push_back(t.text(1));
  if (!curves) return out;
  std::vector<Value> metric_params = params;
  const std::string sql = "SELECT m.run_id, m.metric, m.epoch, m.value, m.time_ms FROM run_metrics m WHERE m.run_id" + ids +
                          metric_in(only, metric_params) + " ORDER BY m.run_id, m.metric, m.epoch";
  for (const Row& m : conn.query(sql, metric_params)) {
    Curve& c = out[at.at(m.integer(0))].metrics[m.text(1)];
    c.epochs.push_back(m.integer(2));
    c.values.push_back(m.is_null(3) ? std::numeric_limits<double>::quiet_NaN() : m.real(3));
    c.times_ms.push_back(m.is_null(4) ? 0 : m.integer(4));
  }
  return out;
}

RunInfo info_of(detail::Connection& conn, int64_t run, const std::vector<std::string>* only = nullptr) {
  std::vector<RunInfo> runs = load_runs(conn, " WHERE r.id = ?", {run}, only);
  if (runs.empty()) throw NotFoundError("store: no " + what(run));
  return std::move(runs[0]);
}

// The run's row (without tags and curves).
RunInfo run_row(detail::Connection& conn, int64_t run) {
  std::vector<Row> rows = conn.query(select_runs() + " WHERE r.id = ?", {run});
  if (rows.empty()) throw NotFoundError("store: no " + what(run));
  return run_of(rows[0]);
}

// The value of a run's metric series that `at` selects, as an SQL expression (NULL when none).
std::string metric_value(At at) {
  switch (at) {
    case At::Max: return "(SELECT MAX(x.value) FROM run_metrics x WHERE x.run_id = r.id AND x.metric = ?)";
    case At::Min: return "(SELECT MIN(x.value) FROM run_metrics x WHERE x.run_id = r.id AND x.metric = ?)";
    case At::Final: break;
  }
  return "(SELECT x.value FROM run_metrics x WHERE x.run_id = r.id AND x.metric = ? ORDER BY x.epoch DESC LIMIT 1)";
}

std::string where(const RunQuery& q, std::vector<Value>& params) {
  std::string sql = " WHERE 1 = 1";
  auto eq = [&](const char* column, const std::optional<std::string>& v) {
    if (!v) return;
    sql += std::string(" AND r.") + column + " = ?";
    params.emplace_back(*v);
  };
  eq("experiment", q.experiment);
  eq("name", q.name);
  if (q.status) eq("status", std::string(to_string(*q.status)));
  for (const std::string& tag : q.tags) {
    check_label("find", "tag", tag);
    sql += " AND EXISTS (SELECT 1 FROM run_tags t WHERE t.run_id = r.id AND t.tag = ?)";
    params.emplace_back(tag);
  }
  for (const RunMetricFilter& f : q.metrics) {
    check_label("find", "metric name", f.metric);
    const char* op = detail::sql_comparison("find", "metric operator", f.op, "'" + f.metric + "'");
    if (std::isnan(f.value)) throw ValueError("find: the value compared with metric '" + f.metric + "' is NaN");
    sql += " AND " + metric_value(f.at) + " " + op + " ?";
    params.emplace_back(f.metric);
    params.emplace_back(f.value);
  }
  return sql;
}

// Ids bound per statement: far below SQLite's 32,766 and PostgreSQL's 65,535 parameters, so that a
// group of any number of runs can be read (in slices of this many).
constexpr size_t kIdsPerStatement = 1000;

// "(?, ?, ...)" for ids[first, first + n), their values appended to `params`.
std::string id_list(const std::vector<int64_t>& ids, size_t first, size_t n, std::vector<Value>& params) {
  std::string sql = "(";
  for (size_t i = first; i < first + n; ++i) {
    sql += i > first ? ", ?" : "?";
    params.emplace_back(ids[i]);
  }
  return sql + ")";
}

// The runs of `ids` in that order (repeats kept), with their curves (only `only`'s when given);
// NotFoundError naming a missing run.
std::vector<RunInfo> load_ids(detail::Connection& conn, const std::vector<int64_t>& ids, const std::vector<std::string>* only) {
  std::vector<int64_t> unique = ids;
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  std::map<int64_t, RunInfo> by_id;
  for (size_t first = 0; first < unique.size(); first += kIdsPerStatement) {
    std::vector<Value> params;
    const std::string where = " WHERE r.id IN " + id_list(unique, first, std::min(kIdsPerStatement, unique.size() - first), params);
    for (RunInfo& r : load_runs(conn, where, params, only)) by_id.emplace(r.id, std::move(r));
  }
  std::vector<RunInfo> out;
  for (int64_t id : ids) {
    const auto it = by_id.find(id);
    if (it == by_id.end()) throw NotFoundError("store: no " + what(id));
    out.push_back(it->second);
  }
  return out;
}

}  // namespace

Runs::Runs(std::shared_ptr<detail::StoreImpl> impl) : impl_(std::move(impl)) {}

RunInfo Runs::start(const std::string& experiment, const std::string& name, const std::string& hyper_parameters,
                    const std::vector<std::string>& tags) {
  check_label("start", "experiment name", experiment);
  if (!name.empty()) check_label("start", "run name", name);
  std::vector<std::string> tag_set = tags;
  std::sort(tag_set.begin(), tag_set.end());
  tag_set.erase(std::unique(tag_set.begin(), tag_set.end()), tag_set.end());
  for (const std::string& t : tag_set) check_label("start", "tag", t);
  std::string parse_error;
  const std::optional<nlohmann::json> hyper = loom::detail::parse_json(hyper_parameters, &parse_error);
  if (!hyper || !hyper->is_object())
    throw ValueError("start: the hyper-parameters of a run of '" + experiment + "' are not a JSON object" +
                     (hyper ? "" : ": " + parse_error));
  Session session = open_session(*impl_, Access::Write);
  detail::Connection& conn = connection(session);
  const int64_t id = conn.query("INSERT INTO runs (experiment, name, status, hyper_parameters, started_ms) "
                                "VALUES (?, ?, ?, ?, ?) RETURNING id",
                                {experiment, name, std::string(to_string(RunStatus::Running)), hyper->dump(), now_ms()})[0]
                         .integer(0);
  if (name.empty()) conn.execute("UPDATE runs SET name = ? WHERE id = ?", {experiment + "-" + std::to_string(id), id});
  for (const std::string& t : tag_set) conn.execute("INSERT INTO run_tags (run_id, tag) VALUES (?, ?)", {id, t});
  RunInfo info = info_of(conn, id);
  session.commit();
  return info;
}

void Runs::log_epoch(int64_t run, int64_t epoch, const std::map<std::string, double>& metrics) {
  if (epoch < 0) throw ValueError("log_epoch: epoch " + std::to_string(epoch) + " of " + what(run) + " (valid: >= 0)");
  for (const auto& [k, v] : metrics) check_label("log_epoch", "metric name", k);
  Session session = open_session(*impl_, Access::Write);
  detail::Connection& conn = connection(session);
  const RunInfo row = run_row(conn, run);
  if (row.status != RunStatus::Running) throw ConflictError("log_epoch: " + what(run) + " has ended (" + to_string(row.status) + ")");
  const int64_t now = now_ms();
  for (const auto& [k, v] : metrics) {
    conn.execute("INSERT INTO run_metrics (run_id, metric, epoch, value, time_ms) VALUES (?, ?, ?, ?, ?) "
                 "ON CONFLICT (run_id, metric, epoch) DO UPDATE SET value = excluded.value, time_ms = excluded.time_ms",
                 {run, k, epoch, std::isnan(v) ? Value() : Value(v), now});
    // The summary again from the metric's epochs: a replaced value may have been the lowest.
    conn.execute("INSERT INTO run_metric_summaries (run_id, metric, epochs, last_epoch, final_value, min_value, max_value) "
                 "SELECT run_id, metric, COUNT(*), MAX(epoch), (SELECT l.value FROM run_metrics l WHERE l.run_id = ? AND l.metric = ? "
                 "ORDER BY l.epoch DESC LIMIT 1), MIN(value), MAX(value) FROM run_metrics WHERE run_id = ? AND metric = ? "
                 "GROUP BY run_id, metric ON CONFLICT (run_id, metric) DO UPDATE SET epochs = excluded.epochs, "
                 "last_epoch = excluded.last_epoch, final_value = excluded.final_value, min_value = excluded.min_value, "
                 "max_value = excluded.max_value",
                 {run, k, run, k});
  }
  session.commit();
}

void Runs::set_checkpoint(int64_t run, const std::string& bytes) {
  const detail::PreparedBlob blob = detail::prepare_blob(bytes);
  std::string old;
  bool unreferenced = false;
  {
    Session session = open_session(*impl_, Access::Write);
    detail::Connection& conn = connection(session);
    const RunInfo row = run_row(conn, run);
    impl_->blobs->add_ref(conn, blob);  // durable before the row commits
    conn.execute("UPDATE runs SET checkpoint = ? WHERE id = ?", {blob.sha256, run});
    if (!row.checkpoint_sha256.empty()) {
      old = row.checkpoint_sha256;
      unreferenced = impl_->blobs->release(conn, old);
    }
    session.commit();
  }
  if (unreferenced) detail::remove_unreferenced(*impl_, {old});
}

void Runs::finish(int64_t run, RunStatus status, const std::string& error) {
  if (status != RunStatus::Finished && status != RunStatus::Failed)
    throw ValueError("finish: status '" + std::string(to_string(status)) + "' for " + what(run) + " (valid: finished, failed)");
  Session session = open_session(*impl_, Access::Write);
  detail::Connection& conn = connection(session);
  const RunInfo row = run_row(conn, run);
  if (row.status != RunStatus::Running) throw ConflictError("finish: " + what(run) + " has already ended (" + to_string(row.status) + ")");
  conn.execute("UPDATE runs SET status = ?, ended_ms = ?, error = ? WHERE id = ?",
               {std::string(to_string(status)), now_ms(), error.empty() ? Value() : Value(storable_text(error)), run});
  session.commit();
}

RunInfo Runs::get(int64_t run) const {
  Session session = open_session(*impl_, Access::Read);
  return info_of(connection(session), run);
}

std::vector<RunInfo> Runs::find(const RunQuery& query, const std::vector<std::string>& metrics) const {
  for (const std::string& m : metrics) check_label("find", "metric name", m);
  std::vector<Value> params;
  const std::string sql = where(query, params);
  Session session = open_session(*impl_, Access::Read);
  return load_runs(connection(session), sql, params, metrics.empty() ? nullptr : &metrics);
}

std::vector<RunSummary> Runs::summaries(const RunQuery& query) const {
  std::vector<Value> params;
  const std::string sql = where(query, params);
  Session session = open_session(*impl_, Access::Read);
  detail::Connection& conn = connection(session);
  std::vector<RunSummary> out;
  std::map<int64_t, size_t> at;
  for (RunInfo& r : load_runs(conn, sql, params, nullptr, false)) {
    at[r.id] = out.size();
    out.push_back({std::move(r), {}});
  }
  if (out.empty()) return out;
  // the run and the metric, then the summary's columns (its fields'); a NULL value reads as NaN,
  // the field's default
  std::vector<std::string> selected{"run_id", "metric"};
  for (std::string& c : column_names<MetricSummary>()) selected.push_back(std::move(c));
  static const RowReader<MetricSummary> reader(selected);
  const std::string kept = "SELECT run_id, metric, " + column_list<MetricSummary>() +
                           " FROM run_metric_summaries WHERE run_id IN (SELECT r.id FROM runs r" + sql + ")";
  for (const Row& m : conn.query(kept, params)) out[at.at(m.integer(0))].metrics[m.text(1)] = reader.read(m);
  return out;
}

EpochStatistics Runs::epoch_statistics(const std::vector<int64_t>& runs, const std::string& metric) const {
  check_label("epoch_statistics", "metric name", metric);
  std::vector<int64_t> unique = runs;
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  struct Sums {
    double sum = 0, min = 0, max = 0;
    int64_t count = 0;
  };
  std::map<int64_t, Sums> at;  // by epoch, over the slices of runs
  Session session = open_session(*impl_, Access::Read);
  for (size_t first = 0; first < unique.size(); first += kIdsPerStatement) {
    std::vector<Value> params{metric};
    const std::string sql = "SELECT epoch, SUM(value), MIN(value), MAX(value), COUNT(value) FROM run_metrics WHERE metric = ? AND run_id IN " +
                            id_list(unique, first, std::min(kIdsPerStatement, unique.size() - first), params) +
                            " GROUP BY epoch HAVING COUNT(value) > 0";
    for (const Row& r : connection(session).query(sql, params)) {
      Sums& e = at[r.integer(0)];
      e.min = e.count ? std::min(e.min, r.real(2)) : r.real(2);
      e.max = e.count ? std::max(e.max, r.real(3)) : r.real(3);
      e.sum += r.real(1);
      e.count += r.integer(4);
    }
  }
  EpochStatistics out;
  for (const auto& [epoch, e] : at) {
    out.epochs.push_back(epoch);
    out.mean.push_back(e.sum / static_cast<double>(e.count));
    out.min.push_back(e.min);
    out.max.push_back(e.max);
    out.count.push_back(e.count);
  }
  return out;
}

std::vector<RunInfo> Runs::find_top(const std::string& metric, At at, int64_t k, const RunQuery& query) const {
  check_label("find_top", "metric name", metric);
  if (k < 1) throw ValueError("find_top: k is " + std::to_string(k) + " (valid: k >= 1)");
  std::vector<Value> params{metric};
  const std::string inner = "SELECT r.id AS id, " + metric_value(at) + " AS kv FROM runs r" + where(query, params);
  const std::string sql = "SELECT q.id FROM (" + inner + ") q WHERE q.kv IS NOT NULL ORDER BY q.kv " +
                          (at == At::Min ? "ASC" : "DESC") + ", q.id LIMIT ?";
  params.emplace_back(k);
  Session session = open_session(*impl_, Access::Read);
  detail::Connection& conn = connection(session);
  std::vector<int64_t> ids;
  for (const Row& r : conn.query(sql, params)) ids.push_back(r.integer(0));
  return load_ids(conn, ids, nullptr);
}

std::vector<RunInfo> Runs::compare(const std::vector<int64_t>& runs, const std::vector<std::string>& metrics) const {
  for (const std::string& m : metrics) check_label("compare", "metric name", m);
  Session session = open_session(*impl_, Access::Read);
  return load_ids(connection(session), runs, metrics.empty() ? nullptr : &metrics);
}

std::string Runs::checkpoint(int64_t run) const {
  detail::BlobRef ref;
  std::string stored;
  {
    Session session = open_session(*impl_, Access::Read);
    detail::Connection& conn = connection(session);
    const RunInfo row = run_row(conn, run);
    if (row.checkpoint_sha256.empty()) throw NotFoundError("store: " + what(run) + " has no checkpoint");
    ref = impl_->blobs->ref(conn, row.checkpoint_sha256, what(run) + " checkpoint");
    stored = impl_->blobs->stored(conn, ref, what(run) + " checkpoint");
  }
  return impl_->blobs->decode(ref, stored, what(run) + " checkpoint");  // verified outside the lock
}

void Runs::save_checkpoint_file(int64_t run, const std::string& path) const { write_file_atomic(path, checkpoint(run)); }

void Runs::remove(int64_t run) {
  std::string blob;
  bool unreferenced = false;
  {
    Session session = open_session(*impl_, Access::Write);
    detail::Connection& conn = connection(session);
    const RunInfo row = run_row(conn, run);
    conn.execute("DELETE FROM runs WHERE id = ?", {run});  // metrics and tags cascade
    if (!row.checkpoint_sha256.empty()) {
      blob = row.checkpoint_sha256;
      unreferenced = impl_->blobs->release(conn, blob);
    }
    session.commit();
  }
  if (unreferenced) detail::remove_unreferenced(*impl_, {blob});
}

// ---------------------------------------------------------------- StoreLogger

StoreLogger::StoreLogger(Store store, std::string experiment, std::string hyper_parameters, std::vector<std::string> tags,
                         std::string name, bool save_checkpoint)
    : store_(std::move(store)),
      experiment_(std::move(experiment)),
      hyper_(std::move(hyper_parameters)),
      name_(std::move(name)),
      tags_(std::move(tags)),
      save_checkpoint_(save_checkpoint) {}

StoreLogger::~StoreLogger() {
  if (!running_) return;
  try {
    store_.runs().finish(run_, RunStatus::Failed, "training stopped before on_train_end (an exception in fit)");
  } catch (...) {  // a destructor must not throw; the run stays "running"
  }
}

void StoreLogger::on_train_begin(train::Model&) {
  run_ = store_.runs().start(experiment_, name_, hyper_, tags_).id;
  running_ = true;
}

void StoreLogger::on_epoch_end(train::Model&, int64_t epoch, const train::Logs& logs) {
  if (running_) store_.runs().log_epoch(run_, epoch, logs);
}

void StoreLogger::on_train_end(train::Model& model, const train::History&) {
  if (!running_) return;
  if (save_checkpoint_) {
    // Model::save_checkpoint writes a file: a private temporary directory, removed after.
    std::string dir = (std::filesystem::temp_directory_path() / "loom-run-XXXXXX").string();
    if (!::mkdtemp(dir.data())) throw StoreError("StoreLogger: cannot create a temporary directory for the checkpoint of " + what(run_));
    std::string bytes;
    try {
      model.save_checkpoint(dir + "/checkpoint.safetensors");
      bytes = read_file(dir + "/checkpoint.safetensors");
    } catch (...) {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      throw;
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    store_.runs().set_checkpoint(run_, bytes);
  }
  store_.runs().finish(run_, RunStatus::Finished);
  running_ = false;
}

}  // namespace loom::store
