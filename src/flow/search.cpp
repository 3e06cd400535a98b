#include "loom/flow/search.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <map>
#include <thread>

#include "flow/dependencies.h"
#include "flow/kind.h"
#include "flow/search_schema.h"
#include "loom/store/error.h"
#include "loom/store/notifications.h"
#include "loom/store/session.h"
#include "loom/store/text.h"

namespace loom::flow {

using store::Access;
using store::Session;
using Row = store::SqlRow;
using Value = store::SqlValue;

namespace {

void check_options(const SearchSpace& space, const SearchOptions& o) {
  detail::check_kind("search", o.kind);
  if (o.name.empty() || o.name.size() > 256)
    throw ValueError("search: the search's name must be 1 to 256 bytes (it is " + std::to_string(o.name.size()) + ")");
  if (o.metric.empty()) throw ValueError("search: no metric (valid: the name of a field of the trials' results)");
  if (o.n_trials < 1 || o.max_concurrent_trials < 1)
    throw ValueError("search: n_trials " + std::to_string(o.n_trials) + ", max_concurrent_trials " +
                     std::to_string(o.max_concurrent_trials) + " (valid: 1 or more each)");
  if (space.size() == 0) throw ValueError("search: the space has no parameters (valid: one or more)");
  const nlohmann::json base = nlohmann::json::parse(detail::canonical_json("search", "hyper_parameters", o.hyper_parameters, true));
  for (const Param& p : space.params())
    if (base.contains(p.name))
      throw ValueError("search: hyper_parameters fix '" + p.name + "', a parameter of the space (valid: other names)");
  if (o.asha) {
    const Asha& a = *o.asha;
    if (a.min_resource < 1 || a.max_resource < a.min_resource || a.reduction_factor < 2)
      throw ValueError("search: ASHA's min_resource " + std::to_string(a.min_resource) + ", max_resource " +
                       std::to_string(a.max_resource) + ", reduction_factor " + std::to_string(a.reduction_factor) +
                       " (valid: min_resource >= 1, max_resource >= min_resource, reduction_factor >= 2)");
  }
  if (o.step_budget < 0 || (o.step_budget > 0 && !o.asha))
    throw ValueError("search: step_budget " + std::to_string(o.step_budget) + " (valid: 0, or with ASHA a number of steps)");
  if (o.timeout_ms < 0 || o.poll_ms < 1)
    throw ValueError("search: timeout_ms " + std::to_string(o.timeout_ms) + ", poll_ms " + std::to_string(o.poll_ms) +
                     " (valid: timeout_ms >= 0, poll_ms >= 1)");
  detail::check_options("search", o.task_options);
}

std::string space_json(const SearchSpace& space) {
  static const char* kinds[] = {"uniform", "log_uniform", "int", "categorical"};
  nlohmann::json j = nlohmann::json::array();
  for (const Param& p : space.params()) {
    nlohmann::json e = {{"name", p.name}, {"kind", kinds[static_cast<int>(p.kind)]}};
    if (p.kind == ParamKind::Categorical) {
      e["choices"] = nlohmann::json::array();
      for (const std::string& c : p.choices) e["choices"].push_back(nlohmann::json::parse(c));
    } else {
      e["low"] = p.low;
      e["high"] = p.high;
    }
    j.push_back(e);
  }
  return j.dump();
}

// A search's columns: its record's, then its ASHA's (loom/store/record.h).
std::vector<std::string> search_columns() {
  std::vector<std::string> columns = store::column_names<SearchInfo>();
  for (std::string& c : store::column_names<Asha>()) columns.push_back(std::move(c));
  return columns;
}

const std::string& select_searches() {
  static const std::string sql = "SELECT " + store::column_list<SearchInfo>() + ", " + store::column_list<Asha>() + " FROM searches";
  return sql;
}

SearchInfo search_of(const Row& r) {
  static const store::RowReader<SearchInfo> info(search_columns());
  static const store::RowReader<Asha> asha(search_columns());
  SearchInfo s = info.read(r);
  const Asha a = asha.read(r);
  if (a.min_resource > 0) s.asha = a;  // 0: none
  return s;
}

// The search's trials as they stand, read in one snapshot. A trial's steps and last report are
// its latest attempt's (a lost attempt's reports of later steps do not count).
void read_trials(Session& session, SearchInfo& s) {
  s.trials.clear();
  // the trial's fields by name (TrialInfo::fields), then what its state and value are decided by
  static const store::RowReader<TrialInfo> reader(
      {"number", "task_id", "params", "error", "steps", "status", "result", "last_value", "stops"});
  const std::vector<Row> rows = session.query(
      "SELECT st.number, st.task_id, st.params, t.error, "
      "(SELECT MAX(step) FROM task_reports r WHERE r.task_id = st.task_id AND r.token = t.token), t.status, t.result, "
      "(SELECT value FROM task_reports r WHERE r.task_id = st.task_id AND r.token = t.token ORDER BY step DESC LIMIT 1), "
      "(SELECT COUNT(*) FROM search_rungs g WHERE g.task_id = st.task_id AND g.search_id = st.search_id AND g.decision = 'stop' "
      "AND g.rung < ?) "
      "FROM search_trials st JOIN tasks t ON t.id = st.task_id WHERE st.search_id = ? ORDER BY st.number",
      {s.asha ? s.asha->max_resource : int64_t{0}, s.id});
  for (const Row& r : rows) {
    TrialInfo t = reader.read(r);
    const Status status = parse_status(r.text(5));
    t.result = r.is_null(6) ? "" : r.text(6);
    switch (status) {
      case Status::Pending: t.state = TrialState::Pending; break;
      case Status::Running: t.state = TrialState::Running; break;
      case Status::Failed: t.state = TrialState::Failed; break;
      case Status::Cancelled: t.state = TrialState::Cancelled; break;
      case Status::Finished: {
        t.state = r.integer(8) > 0 ? TrialState::Stopped : TrialState::Completed;
        const nlohmann::json result = nlohmann::json::parse(t.result, nullptr, false);
        if (result.is_object() && result.contains(s.metric) && result[s.metric].is_number() &&
            std::isfinite(result[s.metric].get<double>()))
          t.value = result[s.metric].get<double>();
        else if (!r.is_null(7))
          t.value = r.real(7);
        break;
      }
    }
    s.trials.push_back(std::move(t));
  }
}

// One trial's task and its row, in one transaction; returns the task's id.
int64_t submit_trial(Tasks& tasks, int64_t search, int64_t number, const std::string& kind, const std::string& hyper,
                     const std::string& params, const TaskOptions& o) {
  Session session(tasks.store(), Access::RowWrite);
  const int64_t waiting = detail::check_dependencies(session, "search", o.depends_on);
  const int64_t id = detail::insert_task(session, kind, hyper, o, 0, "", o.depends_on, waiting, tasks.now_ms());
  session.execute("INSERT INTO search_trials (task_id, search_id, number, params) VALUES (?, ?, ?, ?)", {id, search, number, params});
  session.commit();
  return id;
}

}  // namespace

const char* trial_state_name(TrialState s) { return store::to_string(s); }

const TrialInfo* SearchInfo::best_trial() const {
  const TrialInfo* best = nullptr;
  const auto better = [this](double a, double b) { return mode == Mode::Maximize ? a > b : a < b; };
  for (const TrialInfo& t : trials)
    if (t.state == TrialState::Completed && t.value && (!best || better(*t.value, *best->value))) best = &t;
  if (best) return best;
  for (const TrialInfo& t : trials)
    if (t.state == TrialState::Stopped && t.value &&
        (!best || t.steps > best->steps || (t.steps == best->steps && better(*t.value, *best->value))))
      best = &t;
  return best;
}

int64_t SearchInfo::total_steps() const {
  int64_t n = 0;
  for (const TrialInfo& t : trials) n += t.steps;
  return n;
}

SearchInfo search(Tasks tasks, const SearchSpace& space, Sampler& sampler, const SearchOptions& o) {
  check_options(space, o);
  detail::check_lineage(tasks.store(), "search", o.task_options.lineage);
  tasks.store().ensure_schema(detail::search_schema());
  const nlohmann::json base = nlohmann::json::parse(o.hyper_parameters);
  int64_t id = 0;
  {
    Session session(tasks.store(), Access::Write);
    id = session
             .query("INSERT INTO searches (name, kind, space, sampler, metric, mode, min_resource, max_resource, reduction_factor, "
                    "created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    {store::storable_text(o.name), o.kind, space_json(space), store::storable_text(sampler.name()),
                     store::storable_text(o.metric), std::string(store::to_string(o.mode)),
                     o.asha ? o.asha->min_resource : int64_t{0}, o.asha ? o.asha->max_resource : int64_t{0},
                     o.asha ? o.asha->reduction_factor : int64_t{0}, tasks.now_ms()})[0]
             .integer(0);
    session.commit();
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.timeout_ms);
  store::Notifications events(tasks.store(), detail::kEventChannel);  // a trial's end wakes the loop below
  std::map<int64_t, Point> points;  // by trial number
  int64_t submitted = 0;
  bool exhausted = false;
  for (;;) {
    SearchInfo info = get_search(tasks, id);
    int64_t running = 0;
    int64_t committed = info.total_steps();  // steps spent, plus what the running trials may still spend
    std::vector<Observation> observed;  // the ended trials with a value, in trial order
    for (const TrialInfo& t : info.trials) {
      if (t.state == TrialState::Pending || t.state == TrialState::Running) {
        ++running;
        if (o.asha) committed += std::max<int64_t>(0, o.asha->max_resource - t.steps);
      }
      if ((t.state == TrialState::Completed || t.state == TrialState::Stopped) && t.value)
        observed.push_back({points.at(t.number), o.mode == Mode::Maximize ? -*t.value : *t.value, t.state == TrialState::Completed,
                            t.steps});
    }
    const auto affordable = [&] { return o.step_budget == 0 || committed + o.asha->max_resource <= o.step_budget; };
    if (!affordable() && running == 0) exhausted = true;  // nothing left to wait for
    while (!exhausted && submitted < o.n_trials && running < o.max_concurrent_trials && affordable()) {
      const std::optional<Point> x = sampler.next(space, observed);
      if (!x) {
        exhausted = true;
        break;
      }
      const std::string params = space.to_json(*x);  // ValueError for a point out of the space
      nlohmann::json hyper = base;
      hyper.update(nlohmann::json::parse(params));
      submit_trial(tasks, id, submitted, o.kind, hyper.dump(), params, o.task_options);
      points[submitted++] = *x;
      ++running;
      if (o.asha) committed += o.asha->max_resource;
    }
    if (running == 0 && (exhausted || submitted >= o.n_trials)) return get_search(tasks, id);
    if (o.timeout_ms > 0 && std::chrono::steady_clock::now() >= until) {
      for (const TrialInfo& t : info.trials) tasks.cancel(t.task_id);  // false for the ended ones
      return get_search(tasks, id);
    }
    events.wait(o.poll_ms);
  }
}

SearchInfo get_search(const Tasks& tasks, int64_t id) {
  tasks.store().ensure_schema(detail::search_schema());
  Session session(tasks.store(), Access::Read);
  const std::vector<Row> rows = session.query(select_searches() + " WHERE id = ?", {id});
  if (rows.empty()) throw store::NotFoundError("search: there is no search " + std::to_string(id));
  SearchInfo s = search_of(rows[0]);
  read_trials(session, s);
  return s;
}

std::vector<SearchInfo> list_searches(const Tasks& tasks, int64_t limit) {
  if (limit < 0) throw ValueError("list_searches: limit " + std::to_string(limit) + " is negative (valid: 0 for all, or a count)");
  tasks.store().ensure_schema(detail::search_schema());
  Session session(tasks.store(), Access::Read);
  std::vector<SearchInfo> out;
  std::vector<Value> params;
  std::string sql = select_searches() + " ORDER BY id";
  if (limit > 0) {
    sql += " LIMIT ?";
    params.emplace_back(limit);
  }
  for (const Row& r : session.query(sql, params)) out.push_back(search_of(r));
  return out;
}

}  // namespace loom::flow
