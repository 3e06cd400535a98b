#include "loom/flow/controllers.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/json_util.h"
#include "core/utf8.h"
#include "flow/dependencies.h"
#include "flow/kind.h"
#include "loom/store/datasets.h"
#include "loom/store/notifications.h"
#include "loom/store/queries.h"
#include "loom/store/session.h"

namespace loom::flow {

using store::Access;
using store::Session;
using Row = store::SqlRow;
using Value = store::SqlValue;
using detail::in_list;

namespace {

// The columns of a ControllerInfo, from its field list (loom/store/record.h).
const std::string& select_controllers() {
  static const std::string sql = "SELECT " + store::column_list<ControllerInfo>() + " FROM stream_controllers";
  return sql;
}

ControllerInfo info_of(const Row& r) {
  static const store::RowReader<ControllerInfo> reader;
  try {
    return reader.read(r);
  } catch (const store::StoreError& e) {
    // the name is the first column (its field's): the message says which controller cannot be read
    throw store::StoreError("stream controller " + loom::detail::quote_text(r.text(0)) + " cannot be read from its row: " + e.what());
  }
}

ControllerInfo find(Session& session, const char* op, const std::string& name) {
  const std::vector<Row> rows = session.query(select_controllers() + " WHERE name = ?", {name});
  if (rows.empty()) throw store::NotFoundError(std::string(op) + ": there is no stream controller " + loom::detail::quote_text(name));
  return info_of(rows[0]);
}

// Committed versions of the watched dataset (in the query's range) not in a batch yet, with
// their samples (those the query selects) and commit times, read through the store's API.
struct Pending {
  std::vector<int64_t> versions;
  std::vector<int64_t> samples;
  std::vector<int64_t> created_ms;
  int64_t total() const {
    int64_t n = 0;
    for (int64_t s : samples) n += s;
    return n;
  }
};

Pending pending_of(const store::Store& st, const ControllerSpec& spec, bool count_query) {
  int64_t first = 1, last = 0;
  store::SampleQuery filter;
  if (!spec.query.empty()) {
    const store::NamedQuery q = st.queries().get(spec.query);
    first = std::max<int64_t>(1, q.first_version);
    last = q.last_version;
    filter.tags = q.query.tags;
    filter.where = q.query.where;
  }
  std::set<int64_t> taken;
  {
    Session session(st, Access::Read);
    for (const Row& r : session.query("SELECT version FROM stream_batch_versions WHERE controller = ?", {spec.name}))
      taken.insert(r.integer(0));
    session.commit();
  }
  Pending p;
  for (const store::DatasetInfo& d : st.datasets().versions(spec.dataset)) {
    if (d.version < first || (last > 0 && d.version > last) || taken.count(d.version)) continue;
    int64_t n = d.samples;
    if (count_query && !spec.query.empty()) {
      try {
        n = st.queries().open_versions(spec.dataset, {d.version}, filter)->size();
      } catch (const store::NotFoundError&) {
        continue;  // removed meanwhile
      }
    }
    p.versions.push_back(d.version);
    p.samples.push_back(n);
    p.created_ms.push_back(d.created_ms);
  }
  return p;
}

bool significant(const ControllerSpec& s, int64_t covered, int64_t fresh, int64_t oldest_ms, int64_t now) {
  if (fresh <= 0) return false;
  if (s.min_samples == 0 && s.min_fraction == 0 && s.max_wait_ms == 0) return true;
  return (s.min_samples > 0 && fresh >= s.min_samples) ||
         (s.min_fraction > 0 && static_cast<double>(fresh) >= s.min_fraction * static_cast<double>(covered)) ||
         (s.max_wait_ms > 0 && now - oldest_ms >= s.max_wait_ms);
}

TaskOptions task_options(const ControllerSpec& s) {
  TaskOptions o;
  o.priority = s.priority;
  o.max_attempts = s.max_attempts;
  o.timeout_ms = s.timeout_ms;
  o.lease_ms = s.lease_ms;
  return o;
}

// A plan's longest name, so that ": batch N" still fits Plans' 256 bytes.
constexpr size_t kMaxPlanName = 200;

// `hyper` (a JSON object's text) with the batch's "stream" object added.
std::string with_stream(const std::string& hyper, const nlohmann::json& stream) {
  nlohmann::json j = nlohmann::json::parse(hyper);
  j["stream"] = stream;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The lineage of a task reading batch `b`: the watched dataset, the batch's versions, the query.
void read_batch(Lineage& l, const ControllerSpec& s, const BatchInfo& b) {
  l.input_dataset = s.dataset;
  l.input_dataset_version = b.versions.front();
  l.input_dataset_last_version = b.versions.size() > 1 ? b.versions.back() : 0;
  if (!s.query.empty()) l.input_query = s.query;
}

// The controller's plan for batch `b`: "stream" in every task's hyper-parameters, and the
// batch's data in the lineage of the tasks that read it (ControllerSpec::plan says which).
TaskGraph plan_for(const ControllerSpec& s, const BatchInfo& b, const nlohmann::json& stream) {
  TaskGraph plan = s.plan;
  plan.name += ": batch " + std::to_string(b.batch);
  for (PlanTask& t : plan.tasks) {
    t.hyper_parameters = with_stream(t.hyper_parameters, stream);
    const Lineage& l = t.options.lineage;
    if (t.depends_on.empty() && (l.input_dataset.empty() || (l.input_dataset == s.dataset && l.input_dataset_version == 0)))
      read_batch(t.options.lineage, s, b);
  }
  return plan;
}


}  // namespace

Controllers::Controllers(Tasks tasks) : tasks_(std::move(tasks)) {}

ControllerInfo Controllers::create(const ControllerSpec& in) {
  ControllerSpec s = in;
  detail::check_kind("create", s.name);
  const bool plan = !s.plan.tasks.empty() || !s.plan.name.empty();
  if (plan) {
    if (!s.kind.empty() || !s.output_model.empty())
      throw ValueError("create: controller '" + s.name + "' names both a plan and a task's " + (s.kind.empty() ? "output model" : "kind") +
                       " (valid: one of them; a plan's tasks carry their own kinds, options and lineage)");
    if (s.plan.name.size() > kMaxPlanName)
      throw ValueError("create: the plan's name is " + std::to_string(s.plan.name.size()) + " bytes (valid: 1 to " +
                       std::to_string(kMaxPlanName) + ", so that \": batch N\" fits)");
    detail::check_plan(s.plan);
    for (const PlanTask& t : s.plan.tasks) {
      if (!t.options.depends_on.empty())
        throw ValueError("create: task '" + t.name + "' of the plan depends on tasks outside it (valid for a controller's plan: "
                         "dependencies on its own tasks, by name)");
      detail::check_lineage(tasks_.store(), "create", t.options.lineage);
    }
  } else {
    detail::check_kind("create", s.kind);
  }
  s.hyper_parameters = detail::canonical_json("create", "hyper-parameters", s.hyper_parameters, true);
  if (plan && s.hyper_parameters != "{}")
    throw ValueError("create: controller '" + s.name + "' has hyper-parameters and a plan (valid: put them in the plan's tasks)");
  const TaskOptions o = task_options(s);
  detail::check_options("create", o);
  if (s.min_samples < 0) throw ValueError("create: min_samples " + std::to_string(s.min_samples) + " is negative (valid: 0 for none, or a count)");
  if (!(s.min_fraction >= 0) || !std::isfinite(s.min_fraction))
    throw ValueError("create: min_fraction " + std::to_string(s.min_fraction) + " is invalid (valid: 0 for none, or a finite fraction > 0)");
  if (s.max_wait_ms < 0) throw ValueError("create: max_wait_ms " + std::to_string(s.max_wait_ms) + " is negative (valid: 0 for none, or milliseconds)");
  const store::Store& st = tasks_.store();
  if (!s.query.empty()) {
    const store::NamedQuery q = st.queries().get(s.query);  // NotFoundError
    if (s.dataset.empty()) s.dataset = q.dataset;
    if (s.dataset != q.dataset)
      throw ValueError("create: query '" + s.query + "' is over dataset " + loom::detail::quote_text(q.dataset) + ", not " +
                       loom::detail::quote_text(s.dataset) + " (valid: the query's dataset, or none)");
  }
  if (s.dataset.empty()) throw ValueError("create: no dataset to watch (valid: a dataset name, or a named query)");
  Lineage names;
  names.input_dataset = s.dataset;
  names.output_model = s.output_model;
  detail::check_lineage(st, "create", names);  // the names' rules
  const int64_t now = tasks_.now_ms();
  Session session(st, Access::Write);
  if (session.execute("INSERT INTO stream_controllers (name, dataset, query, min_samples, min_fraction, max_wait_ms, kind, "
                      "hyper_parameters, priority, max_attempts, timeout_ms, lease_ms, output_model, batches, samples, created_ms, plan) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?) ON CONFLICT (name) DO NOTHING",
                      {s.name, s.dataset, s.query.empty() ? Value() : Value(s.query), s.min_samples, s.min_fraction, s.max_wait_ms,
                       s.kind, s.hyper_parameters, s.priority, s.max_attempts, s.timeout_ms, s.lease_ms,
                       s.output_model.empty() ? Value() : Value(s.output_model), now, plan ? Value(s.plan.to_json()) : Value()}) == 0)
    throw store::ConflictError("create: a stream controller '" + s.name + "' already exists (remove it first, or choose another name)");
  session.commit();
  return get(s.name);
}

ControllerInfo Controllers::get(const std::string& name) const {
  ControllerInfo c;
  {
    Session session(tasks_.store(), Access::Read);
    c = find(session, "get", name);
    session.commit();
  }
  const Pending p = pending_of(tasks_.store(), c.spec, false);
  c.pending_versions = static_cast<int64_t>(p.versions.size());
  c.pending_samples = p.total();
  return c;
}

std::vector<ControllerInfo> Controllers::list() const {
  std::vector<ControllerInfo> out;
  {
    Session session(tasks_.store(), Access::Read);
    for (const Row& r : session.query(select_controllers() + " ORDER BY name")) out.push_back(info_of(r));
    session.commit();
  }
  for (ControllerInfo& c : out) {
    const Pending p = pending_of(tasks_.store(), c.spec, false);
    c.pending_versions = static_cast<int64_t>(p.versions.size());
    c.pending_samples = p.total();
  }
  return out;
}

void Controllers::remove(const std::string& name) {
  Session session(tasks_.store(), Access::Write);
  find(session, "remove", name);
  session.execute("DELETE FROM stream_batch_versions WHERE controller = ?", {name});
  session.execute("DELETE FROM stream_batches WHERE controller = ?", {name});
  session.execute("DELETE FROM stream_controllers WHERE name = ?", {name});
  session.commit();
}

std::vector<BatchInfo> Controllers::batches(const std::string& name) const {
  Session session(tasks_.store(), Access::Read);
  find(session, "batches", name);
  std::vector<BatchInfo> out;
  static const store::RowReader<BatchInfo> reader;
  for (const Row& r : session.query("SELECT " + store::column_list<BatchInfo>() + " FROM stream_batches WHERE controller = ? ORDER BY batch",
                                    {name})) {
    out.push_back(reader.read(r));
    out.back().controller = name;
  }
  size_t i = 0;
  for (const Row& r : session.query("SELECT batch, version FROM stream_batch_versions WHERE controller = ? ORDER BY batch, version", {name})) {
    while (i < out.size() && out[i].batch < r.integer(0)) ++i;
    if (i < out.size() && out[i].batch == r.integer(0)) out[i].versions.push_back(r.integer(1));
  }
  session.commit();
  return out;
}

std::optional<BatchInfo> Controllers::step(const std::string& name) {
  ControllerInfo c;
  {
    Session session(tasks_.store(), Access::Read);
    c = find(session, "step", name);
    session.commit();
  }
  const ControllerSpec& s = c.spec;
  Pending p = pending_of(tasks_.store(), s, true);  // outside the write lock: may read shards' indexes
  if (p.versions.empty()) return std::nullopt;
  const int64_t now = tasks_.now_ms();
  if (!significant(s, c.samples, p.total(), *std::min_element(p.created_ms.begin(), p.created_ms.end()), now)) return std::nullopt;

  // Under the write lock: the versions another controller took since are dropped, the batch is
  // decided again, and the progress, the batch's records and its task commit together.
  Session session(tasks_.store(), Access::Write);
  const std::vector<Row> rows = session.query("SELECT batches, samples FROM stream_controllers WHERE name = ?", {name});
  if (rows.empty()) return std::nullopt;  // removed meanwhile
  const int64_t batches = rows[0].integer(0), covered = rows[0].integer(1);
  std::vector<Value> params{name};
  for (int64_t v : p.versions) params.emplace_back(v);
  std::set<int64_t> taken;
  for (const Row& r : session.query("SELECT version FROM stream_batch_versions WHERE controller = ? AND version IN (" +
                                        in_list(p.versions.size()) + ")",
                                    params))
    taken.insert(r.integer(0));
  BatchInfo b{name, batches + 1, {}, 0, 0, now, 0};
  int64_t oldest = now;
  std::vector<int64_t> counts;
  for (size_t k = 0; k < p.versions.size(); ++k)
    if (!taken.count(p.versions[k])) {
      b.versions.push_back(p.versions[k]);
      counts.push_back(p.samples[k]);
      b.samples += p.samples[k];
      oldest = std::min(oldest, p.created_ms[k]);
    }
  if (b.versions.empty() || !significant(s, covered, b.samples, oldest, now)) return std::nullopt;
  // The watermark moves from the batch this controller read to the next, or not at all.
  if (session.execute("UPDATE stream_controllers SET batches = ?, samples = samples + ? WHERE name = ? AND batches = ?",
                      {b.batch, b.samples, name, batches}) == 0)
    return std::nullopt;

  nlohmann::json stream = {{"controller", name}, {"batch", b.batch}, {"dataset", s.dataset}, {"versions", b.versions}, {"samples", b.samples}};
  if (!s.query.empty()) stream["query"] = s.query;
  if (!s.plan.tasks.empty()) {
    const TaskGraph plan = plan_for(s, b, stream);
    b.plan_id = detail::insert_plan(session, plan, detail::check_plan(plan), now);
  } else {
    TaskOptions o = task_options(s);
    read_batch(o.lineage, s, b);
    o.lineage.output_model = s.output_model;
    b.task_id = detail::insert_task(session, s.kind, with_stream(s.hyper_parameters, stream), o, 0, "", {}, 0, now);
  }
  session.execute("INSERT INTO stream_batches (controller, batch, task_id, samples, created_ms, plan_id) VALUES (?, ?, ?, ?, ?, ?)",
                  {name, b.batch, b.task_id, b.samples, now, b.plan_id ? Value(b.plan_id) : Value()});
  for (size_t k = 0; k < b.versions.size(); ++k)
    session.execute("INSERT INTO stream_batch_versions (controller, version, batch, samples) VALUES (?, ?, ?, ?)",
                    {name, b.versions[k], b.batch, counts[k]});
  session.commit();
  return b;
}

int64_t Controllers::run(const std::string& name, const std::function<bool()>& stop, int64_t recheck_ms) {
  if (recheck_ms < 1) throw ValueError("run: recheck_ms " + std::to_string(recheck_ms) + " is out of range (valid: 1 or more)");
  // Made before the first look: a version committed after it wakes the wait below.
  store::Notifications commits(tasks_.store(), store::kDatasetVersionChannel);
  int64_t submitted = 0;
  while (!stop()) {
    while (step(name)) {
      ++submitted;
      if (stop()) return submitted;
    }
    int64_t wait = recheck_ms;
    const ControllerInfo c = get(name);
    if (c.spec.max_wait_ms > 0 && c.pending_versions > 0) {
      const Pending p = pending_of(tasks_.store(), c.spec, false);
      const int64_t ends = *std::min_element(p.created_ms.begin(), p.created_ms.end()) + c.spec.max_wait_ms;
      wait = std::clamp<int64_t>(ends - tasks_.now_ms(), 1, recheck_ms);
    }
    commits.wait(wait);
  }
  return submitted;
}

}  // namespace loom::flow
