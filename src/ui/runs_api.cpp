// The runs page's API (docs/ui.md, "Runs"): the table, curves, comparison and groups.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/utf8.h"
#include "loom/store/runs.h"
#include "loom/train/plot.h"
#include "ui/api.h"

namespace loom::ui::detail {

namespace {

using loom::detail::quote_text;
using train::downsample;
using train::line_plot_svg;
using train::smooth;
using Series = train::PlotSeries;

store::MetricSummary summarize(const store::Curve& c) {
  store::MetricSummary s;
  s.epochs = static_cast<int64_t>(c.values.size());
  for (double v : c.values) {
    if (std::isnan(v)) continue;
    s.min = std::isnan(s.min) ? v : std::min(s.min, v);
    s.max = std::isnan(s.max) ? v : std::max(s.max, v);
  }
  if (!c.values.empty()) s.final = c.values.back();
  return s;
}

// A run as the record's JSON (loom/store/record.h: the keys of `loom runs --json`, its curves
// left out: a table needs only their summaries) and each metric in brief under "summaries", as
// MetricSummary's JSON ({final, min, max, epochs}; which of min and max is the best is the
// page's to say).
nlohmann::json run_json(store::RunInfo r, const std::map<std::string, store::MetricSummary>& summaries) {
  r.metrics.clear();
  nlohmann::json out = store::record_json<nlohmann::json>(r);
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& [name, s] : summaries) metrics[name] = store::record_json<nlohmann::json>(s);
  out["summaries"] = std::move(metrics);
  return out;
}

bool matches(const store::RunInfo& r, const std::string& needle) {
  if (needle.empty()) return true;
  auto has = [&](const std::string& s) { return s.find(needle) != std::string::npos; };
  if (has(r.name) || has(r.experiment) || has(store::to_string(r.status)) || has(r.hyper_parameters)) return true;
  for (const auto& t : r.tags)
    if (has(t)) return true;
  // "lr=0.01" finds a hyper-parameter by its key and value as the table shows them
  const nlohmann::json hp = parse_object(r.hyper_parameters);
  for (auto it = hp.begin(); it != hp.end(); ++it)
    if (has(it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump()))) return true;
  return false;
}

std::vector<store::RunInfo> load(store::Store& store, const std::vector<int64_t>& ids, const std::vector<std::string>& metrics = {}) {
  try {
    return store.runs().compare(ids, metrics);
  } catch (const store::NotFoundError& e) {
    throw HttpError(404, e.what());
  }
}

// Every metric name of `runs` (RunInfo or RunSummary), sorted.
template <class RunList>
std::vector<std::string> metric_names_of(const RunList& runs) {
  std::vector<std::string> names;
  for (const auto& run : runs)
    for (const auto& m : run.metrics) names.push_back(m.first);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

Response list(store::Store& store, const Request& r) {
  only_params(r, {"filter", "sort", "order", "limit", "offset"});
  const std::string filter = param(r, "filter").value_or("");
  const std::string sort = param(r, "sort").value_or("id");
  const std::string order = choice_param(r, "order", {"asc", "desc"});
  const int64_t limit = int_param(r, "limit", 100, 1, 1000);
  const int64_t offset = int_param(r, "offset", 0, 0, std::numeric_limits<int32_t>::max());
  std::vector<store::RunSummary> runs = store.runs().summaries();
  const std::vector<std::string> metric_names = metric_names_of(runs);
  std::erase_if(runs, [&](const store::RunSummary& s) { return !matches(s.run, filter); });

  const std::vector<std::string> columns = {"id", "name", "experiment", "status", "started"};
  const bool by_column = std::find(columns.begin(), columns.end(), sort) != columns.end();
  const bool by_metric = std::find(metric_names.begin(), metric_names.end(), sort) != metric_names.end();
  if (!by_column && !by_metric) {
    std::string valid = "id, name, experiment, status, started";
    for (const auto& m : metric_names) valid += ", " + m;
    throw HttpError(400, "parameter 'sort' is " + quote_text(sort) + " (valid: " + valid + ")");
  }
  // runs without the metric (or with NaN) go last whatever the order
  auto final_of = [&](const store::RunSummary& s) {
    const auto it = s.metrics.find(sort);
    return it == s.metrics.end() ? NAN : it->second.final;
  };
  const bool desc = order == "desc";
  std::stable_sort(runs.begin(), runs.end(), [&](const store::RunSummary& a, const store::RunSummary& b) {
    if (by_metric) {
      const double x = final_of(a), y = final_of(b);
      if (std::isnan(x) || std::isnan(y)) return !std::isnan(x) && std::isnan(y);
      return desc ? x > y : x < y;
    }
    auto key = [&](const store::RunInfo& run) -> std::pair<std::string, int64_t> {
      if (sort == "name") return {run.name, 0};
      if (sort == "experiment") return {run.experiment, 0};
      if (sort == "status") return {store::to_string(run.status), 0};
      if (sort == "started") return {"", run.started_ms};
      return {"", run.id};
    };
    return desc ? key(b.run) < key(a.run) : key(a.run) < key(b.run);
  });
  nlohmann::json out = {{"total", runs.size()}, {"offset", offset}, {"metrics", metric_names}, {"runs", nlohmann::json::array()}};
  for (int64_t i = offset; i < static_cast<int64_t>(runs.size()) && i < offset + limit; ++i)
    out["runs"].push_back(run_json(runs[i].run, runs[i].metrics));
  const int64_t next = offset + limit;
  out["next_offset"] = next < static_cast<int64_t>(runs.size()) ? nlohmann::json(next) : nlohmann::json(nullptr);
  return json_response(out);
}

// The metric to draw: the one asked for, else the first the runs have ("loss" when they have it).
std::string metric_of(const Request& r, const std::vector<std::string>& names) {
  const auto asked = param(r, "metric");
  if (!asked) {
    if (names.empty()) throw HttpError(404, "the runs have no metrics to draw");
    return std::find(names.begin(), names.end(), "loss") != names.end() ? "loss" : names.front();
  }
  if (std::find(names.begin(), names.end(), *asked) == names.end()) {
    std::string valid;
    for (const auto& n : names) valid += (valid.empty() ? "" : ", ") + n;
    throw HttpError(400, "parameter 'metric' is " + quote_text(*asked) + " (valid: a metric of these runs: " +
                             (valid.empty() ? "none" : valid) + ")");
  }
  return *asked;
}

// A run's curve as x (epoch, or seconds since the run started) and y, smoothed.
Series series_of(const store::RunInfo& run, const std::string& metric, bool time, double weight) {
  Series s;
  s.id = std::to_string(run.id);
  s.label = run.name + " (" + std::to_string(run.id) + ", " + run.experiment + ")";
  const auto it = run.metrics.find(metric);
  if (it == run.metrics.end()) return s;
  const store::Curve& c = it->second;
  for (size_t i = 0; i < c.values.size(); ++i) {
    if (time && (i >= c.times_ms.size() || c.times_ms[i] == 0)) continue;  // logged before times were recorded
    s.x.push_back(time ? static_cast<double>(c.times_ms[i] - run.started_ms) / 1000.0 : static_cast<double>(c.epochs[i]));
    s.y.push_back(c.values[i]);
  }
  if (weight > 0) s.y = smooth(s.y, weight);
  return s;
}

Response curves(store::Store& store, const Request& r) {
  only_params(r, {"runs", "metric", "x", "width", "height", "smoothing", "format"});
  const std::vector<int64_t> ids = ids_param(r, "runs", 1000);
  const std::string x = choice_param(r, "x", {"step", "time"});
  const int64_t width = int_param(r, "width", 800, 200, 4000);
  const int64_t height = int_param(r, "height", 360, 150, 2000);
  const double weight = real_param(r, "smoothing", 0, 0, 0.99);
  const std::string format = choice_param(r, "format", {"svg", "json"});
  // Only the asked-for metric's epochs are read, or those of "loss", the default when the runs
  // have it (a quarter of the rows of a run of four metrics); every metric's only to say which are
  // valid, or to find the default otherwise.
  const std::string first = param(r, "metric").value_or("loss");
  std::vector<store::RunInfo> runs = load(store, ids, {first});
  if (std::all_of(runs.begin(), runs.end(), [&](const store::RunInfo& run) { return run.metrics.at(first).values.empty(); }))
    runs = load(store, ids);
  const std::string metric = metric_of(r, metric_names_of(runs));
  std::vector<Series> series;
  for (const auto& run : runs) series.push_back(series_of(run, metric, x == "time", weight));
  const std::string x_label = x == "time" ? "seconds since the run started" : "epoch";
  if (format == "svg") return {200, "image/svg+xml", line_plot_svg(series, {.x_label = x_label, .y_label = metric, .width = static_cast<int>(width), .height = static_cast<int>(height)}), {}};
  nlohmann::json out = {{"metric", metric}, {"x", x}, {"series", nlohmann::json::array()}};
  const double pw = static_cast<double>(width) - 90;
  for (const Series& s : series) {
    double x0 = s.x.empty() ? 0 : s.x.front(), x1 = s.x.empty() ? 0 : s.x.back();
    nlohmann::json xs = nlohmann::json::array(), ys = nlohmann::json::array();
    for (size_t i : downsample(s.x, s.y, x0, x1, static_cast<int>(pw))) {
      xs.push_back(s.x[i]);
      ys.push_back(json_number(s.y[i]));
    }
    out["series"].push_back({{"run", std::stoll(s.id)}, {"label", s.label}, {"x", xs}, {"y", ys}});
  }
  return json_response(out);
}

Response compare(store::Store& store, const Request& r) {
  only_params(r, {"runs", "differences"});
  const std::vector<int64_t> ids = ids_param(r, "runs", 100);
  const bool only_differences = choice_param(r, "differences", {"0", "1"}) == "1";
  const std::vector<store::RunInfo> runs = load(store, ids);
  std::vector<nlohmann::json> hps;
  std::map<std::string, int> keys;  // sorted, every key of any run
  for (const auto& run : runs) {
    hps.push_back(parse_object(run.hyper_parameters));
    for (auto it = hps.back().begin(); it != hps.back().end(); ++it) keys[it.key()] = 1;
  }
  nlohmann::json params = nlohmann::json::array();
  for (const auto& kv : keys) {
    nlohmann::json values = nlohmann::json::array();
    bool differs = false;
    for (size_t i = 0; i < hps.size(); ++i) {
      values.push_back(hps[i].contains(kv.first) ? hps[i][kv.first] : nlohmann::json(nullptr));
      differs = differs || values[i] != values[0] || hps[i].contains(kv.first) != hps[0].contains(kv.first);
    }
    if (only_differences && !differs) continue;
    params.push_back({{"key", kv.first}, {"values", values}, {"differs", differs}});
  }
  nlohmann::json list = nlohmann::json::array();
  for (const auto& run : runs) {
    std::map<std::string, store::MetricSummary> summaries;
    for (const auto& [name, curve] : run.metrics) summaries[name] = summarize(curve);
    list.push_back(run_json(run, summaries));
  }
  return json_response({{"runs", list}, {"hyper_parameters", params}});
}

Response group(store::Store& store, const Request& r) {
  only_params(r, {"by", "metric", "width", "height", "format", "filter"});
  const auto by = param(r, "by");
  if (!by || by->empty()) throw HttpError(400, "parameter 'by' is missing (valid: a hyper-parameter's key)");
  const int64_t width = int_param(r, "width", 800, 200, 4000);
  const int64_t height = int_param(r, "height", 360, 150, 2000);
  const std::string format = choice_param(r, "format", {"svg", "json"});
  const std::string filter = param(r, "filter").value_or("");
  std::vector<store::RunSummary> summaries = store.runs().summaries();
  std::erase_if(summaries, [&](const store::RunSummary& s) { return !matches(s.run, filter); });
  const std::string metric = metric_of(r, metric_names_of(summaries));
  // by the hyper-parameter's value as JSON text; runs without it form the group "(none)"
  std::map<std::string, std::vector<int64_t>> groups;
  for (const auto& s : summaries) {
    if (!s.metrics.count(metric)) continue;
    const nlohmann::json hp = parse_object(s.run.hyper_parameters);
    groups[hp.contains(*by) ? hp[*by].dump() : "(none)"].push_back(s.run.id);
  }
  std::vector<Series> series;
  nlohmann::json out = {{"by", *by}, {"metric", metric}, {"groups", nlohmann::json::array()}};
  for (const auto& [value, members] : groups) {
    const store::EpochStatistics st = store.runs().epoch_statistics(members, metric);  // the database reduces the curves
    Series s;
    s.id = value;
    s.label = *by + " = " + value + " (" + std::to_string(members.size()) + (members.size() == 1 ? " run)" : " runs)");
    for (size_t i = 0; i < st.epochs.size(); ++i) s.x.push_back(static_cast<double>(st.epochs[i]));
    s.y = st.mean;
    s.lo = st.min;
    s.hi = st.max;
    out["groups"].push_back({{"value", value}, {"runs", members}, {"epochs", st.epochs}, {"mean", st.mean}, {"min", st.min}, {"max", st.max}});
    series.push_back(std::move(s));
  }
  if (format == "svg")
    return {200, "image/svg+xml", line_plot_svg(series, {.x_label = "epoch", .y_label = metric + ": mean, min to max", .width = static_cast<int>(width), .height = static_cast<int>(height)}), {}};
  return json_response(out);
}

}  // namespace

Response runs_api(store::Store& store, const Request& r, const std::vector<std::string>& p) {
  if (r.method != "GET") throw HttpError(405, "use GET for " + r.path);
  if (p.size() == 1) return list(store, r);
  if (p.size() == 2 && p[1] == "curves") return curves(store, r);
  if (p.size() == 2 && p[1] == "compare") return compare(store, r);
  if (p.size() == 2 && p[1] == "group") return group(store, r);
  throw HttpError(404, "no route " + quote_text(r.path) + " (valid: /api/runs, /api/runs/curves, /api/runs/compare, /api/runs/group)");
}

}  // namespace loom::ui::detail
