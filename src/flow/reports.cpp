#include "loom/flow/reports.h"

#include <algorithm>
#include <cmath>

#include "flow/dependencies.h"
#include "flow/search_schema.h"
#include "flow/task_schema.h"
#include "loom/store/error.h"
#include "loom/store/session.h"

namespace loom::flow {

using store::Access;
using store::Session;
using Row = store::SqlRow;

namespace {

// numpy.percentile's default (linear interpolation between the closest ranks) of `v`, q in [0, 100].
double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos)), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// ASHA's decision for the report of `value` at `step` by task `id` (Ray Tune's
// AsyncHyperBandScheduler): the highest rung r * eta^k <= step that the trial has not reached
// before records its value; the trial stops if that value is below the (1 - 1/eta) quantile of
// the values recorded at that rung so far (the first trial at a rung always goes on). A trial at
// max_resource has its budget and stops. A rung reached before (a replayed attempt) repeats the
// decision it recorded.
Decision asha_decision(Session& session, int64_t id, int64_t step, double value) {
  const std::vector<Row> rows = session.query(
      "SELECT s.id, s.mode, s.min_resource, s.max_resource, s.reduction_factor FROM search_trials t "
      "JOIN searches s ON s.id = t.search_id WHERE t.task_id = ?",
      {id});
  if (rows.empty() || rows[0].integer(2) <= 0) return Decision::Continue;
  const int64_t search = rows[0].integer(0), r = rows[0].integer(2), max_resource = rows[0].integer(3), eta = rows[0].integer(4);
  const double sign = rows[0].text(1) == "max" ? 1.0 : -1.0;  // compare as "larger is better"
  std::vector<int64_t> rungs;
  for (int64_t m = r; m <= max_resource; m *= eta) {
    rungs.push_back(m);
    if (m > max_resource / eta) break;
  }
  for (auto it = rungs.rbegin(); it != rungs.rend(); ++it) {
    if (step < *it) continue;
    const std::vector<Row> mine = session.query("SELECT decision FROM search_rungs WHERE search_id = ? AND rung = ? AND task_id = ?",
                                                {search, *it, id});
    Decision d = Decision::Continue;
    if (!mine.empty()) {
      d = mine[0].text(0) == "stop" ? Decision::Stop : Decision::Continue;
    } else {
      std::vector<double> recorded;
      for (const Row& v : session.query("SELECT value FROM search_rungs WHERE search_id = ? AND rung = ?", {search, *it}))
        recorded.push_back(sign * v.real(0));
      if (!recorded.empty() && sign * value < percentile(recorded, (1.0 - 1.0 / static_cast<double>(eta)) * 100.0))
        d = Decision::Stop;
      session.execute("INSERT INTO search_rungs (search_id, rung, task_id, value, decision) VALUES (?, ?, ?, ?, ?)",
                      {search, *it, id, value, std::string(decision_name(d))});
    }
    if (d == Decision::Stop) return d;
    break;
  }
  return step >= max_resource ? Decision::Stop : Decision::Continue;
}

}  // namespace

const char* decision_name(Decision d) { return d == Decision::Stop ? "stop" : "continue"; }

Reports::Reports(store::Store store, Clock clock) : store_(std::move(store)), clock_(clock ? std::move(clock) : Clock(system_clock_ms)) {
  store_.ensure_schema(detail::task_schema());
  store_.ensure_schema(detail::search_schema());
}

Decision Reports::report(const Claim& c, int64_t step, double value) {
  if (step < 1) throw ValueError("report: step " + std::to_string(step) + " (valid: 1 or more)");
  if (!std::isfinite(value))
    throw ValueError("report: value " + std::to_string(value) + " at step " + std::to_string(step) +
                     " is not finite (valid: a finite number; report a diverged trial's worst finite value)");
  // The write lock, so that two trials reaching a rung at once see each other's values.
  Session session(store_, Access::Write);
  const std::vector<Row> rows = session.query("SELECT status, token FROM tasks WHERE id = ?" + detail::lock_rows(session), {c.task_id});
  if (rows.empty()) throw store::NotFoundError("report: there is no task " + std::to_string(c.task_id));
  if (detail::stored_status(rows[0], 0) != Status::Running || rows[0].integer(1) != c.token)
    throw ClaimLostError("report: claim " + std::to_string(c.token) + " of task " + std::to_string(c.task_id) +
                         " is no longer current (the task is " + rows[0].text(0) + " at claim " + std::to_string(rows[0].integer(1)) +
                         "): nothing was recorded");
  session.execute("INSERT INTO task_reports (task_id, step, value, token, created_ms) VALUES (?, ?, ?, ?, ?) "
                  "ON CONFLICT (task_id, step) DO UPDATE SET value = excluded.value, token = excluded.token, "
                  "created_ms = excluded.created_ms",
                  {c.task_id, step, value, c.token, clock_()});
  const Decision d = asha_decision(session, c.task_id, step, value);
  session.commit();
  return d;
}

std::vector<Report> Reports::list(int64_t task_id) const {
  Session session(store_, Access::Read);
  if (session.query("SELECT id FROM tasks WHERE id = ?", {task_id}).empty())
    throw store::NotFoundError("reports: there is no task " + std::to_string(task_id));
  // the columns and the reader from Report's field list (loom/store/record.h)
  static const std::string select = "SELECT " + store::column_list<Report>() + " FROM task_reports WHERE task_id = ? ORDER BY step";
  static const store::RowReader<Report> reader;
  std::vector<Report> out;
  for (const Row& r : session.query(select, {task_id})) out.push_back(reader.read(r));
  return out;
}

}  // namespace loom::flow
