// `loom runs`: list, show, top and compare training runs (docs/cli.md).
#include <cctype>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "cli.h"
#include "loom/store/runs.h"
#include "loom/train/tensorboard.h"

namespace loom::cli {

namespace {

using store::RunInfo;

std::string final_metrics(const RunInfo& r) {
  std::vector<std::string> parts;
  for (const auto& [k, c] : r.metrics)
    if (!c.values.empty()) parts.push_back(k + "=" + format_number(c.values.back()));
  return join(parts, " ");
}

// The run record's JSON (loom/store/record.h): the dashboard's keys too.
nlohmann::ordered_json to_json(const RunInfo& r) { return store::record_json<nlohmann::ordered_json>(r); }

int print_runs(const Args& a, const std::vector<RunInfo>& runs) {
  if (a.json()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& r : runs) j.push_back(to_json(r));
    print_json(j);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : runs)
    rows.push_back({std::to_string(r.id), r.experiment, r.name, store::to_string(r.status), format_time(r.started_ms), format_time(r.ended_ms),
                    final_metrics(r), join(r.tags)});
  print_table({"ID", "EXPERIMENT", "NAME", "STATUS", "STARTED", "ENDED", "METRICS", "TAGS"}, rows);
  return kExitOk;
}

// One row per epoch that any of `columns` has, one column per (run, metric).
void print_curves(const std::vector<std::string>& names, const std::vector<const store::Curve*>& columns) {
  std::set<int64_t> epochs;
  std::vector<std::map<int64_t, double>> values(columns.size());
  for (size_t i = 0; i < columns.size(); ++i)
    for (size_t k = 0; k < columns[i]->epochs.size(); ++k) {
      epochs.insert(columns[i]->epochs[k]);
      values[i][columns[i]->epochs[k]] = columns[i]->values[k];
    }
  std::vector<std::string> header = {"EPOCH"};
  header.insert(header.end(), names.begin(), names.end());
  std::vector<std::vector<std::string>> rows;
  for (int64_t e : epochs) {
    std::vector<std::string> row = {std::to_string(e)};
    for (const auto& v : values) {
      auto it = v.find(e);
      row.push_back(it == v.end() ? "-" : format_number(it->second));
    }
    rows.push_back(std::move(row));
  }
  print_table(header, rows);
}

store::RunQuery query_of(const Args& a) {
  store::RunQuery q{.experiment = a.value("--experiment"), .name = a.value("--name"), .tags = a.values("--tag")};
  if (const auto s = a.value("--status")) {
    try {
      q.status = store::parse_state<store::RunStatus>(*s);
    } catch (const ValueError& e) {
      a.fail(std::string("--status: ") + e.what());
    }
  }
  return q;
}

int list(const Args& a) {
  const store::RunQuery q = query_of(a);
  return print_runs(a, a.open_store().runs().find(q));
}

int show(const Args& a) {
  const RunInfo r = a.open_store().runs().get(parse_integer(a, a.positional()[0], "ID"));
  if (a.json()) {
    print_json(to_json(r));
    return kExitOk;
  }
  print_fields({{"id", std::to_string(r.id)},
                {"experiment", r.experiment},
                {"name", r.name},
                {"status", store::to_string(r.status) + (r.error.empty() ? "" : " (" + r.error + ")")},
                {"started", format_time(r.started_ms)},
                {"ended", format_time(r.ended_ms)},
                {"hyper-parameters", r.hyper_parameters},
                {"tags", join(r.tags)},
                {"checkpoint", r.checkpoint_sha256.empty() ? "-" : r.checkpoint_sha256}});
  if (r.metrics.empty()) return kExitOk;
  std::cout << '\n';
  std::vector<std::string> names;
  std::vector<const store::Curve*> columns;
  for (const auto& [k, c] : r.metrics) {
    names.push_back(k);
    columns.push_back(&c);
  }
  print_curves(names, columns);
  return kExitOk;
}

int top(const Args& a) {
  const auto metric = a.value("--metric");
  const std::string at_name = a.value("--at").value_or("final");
  if (at_name != "final" && at_name != "max" && at_name != "min")
    a.fail("unknown --at '" + at_name + "' (valid: final, max, min)");
  const store::At at = at_name == "max" ? store::At::Max : at_name == "min" ? store::At::Min : store::At::Final;
  const store::RunQuery q{.experiment = a.value("--experiment"), .tags = a.values("--tag")};
  return print_runs(a, a.open_store().runs().find_top(*metric, at, a.integer("-n", 1, 1), q));
}

int compare(const Args& a) {
  std::vector<int64_t> ids;
  for (const auto& p : a.positional()) ids.push_back(parse_integer(a, p, "ID"));
  const auto runs = a.open_store().runs().compare(ids, a.values("--metric"));
  if (a.json()) return print_runs(a, runs);
  std::vector<std::string> names;
  std::vector<const store::Curve*> columns;
  for (const auto& r : runs)
    for (const auto& [k, c] : r.metrics) {
      names.push_back(std::to_string(r.id) + ":" + k);
      columns.push_back(&c);
    }
  print_curves(names, columns);
  return kExitOk;
}

// The run's folder under DIR: its name with everything but [A-Za-z0-9._-] made '_' (names come
// from the database: untrusted, and may hold '/'), at most 100 bytes, then "-<id>", so that it
// is one path component, never "." or "..", and distinct per run.
std::string run_folder(const RunInfo& r) {
  std::string slug = r.name.substr(0, 100);
  for (char& c : slug)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  return slug + "-" + std::to_string(r.id);
}

int export_runs(const Args& a) {
  const auto dir = a.value("--tensorboard");
  std::vector<int64_t> ids;
  for (const auto& p : a.positional()) ids.push_back(parse_integer(a, p, "ID"));
  const auto runs = a.open_store().runs().compare(ids);  // every run exists before anything is written
  for (const auto& r : runs) {
    std::map<int64_t, train::Logs> epochs;
    for (const auto& [k, c] : r.metrics)
      for (size_t i = 0; i < c.epochs.size(); ++i) epochs[c.epochs[i]][k] = c.values[i];
    // The store keeps no time per epoch: every event carries the run's start time.
    train::TensorBoardLogger logger((std::filesystem::path(*dir) / run_folder(r)).string());
    for (const auto& [e, logs] : epochs) logger.log_epoch(e, logs, static_cast<double>(r.started_ms) / 1000.0);
    if (!a.json()) std::cout << "run " << r.id << " (" << epochs.size() << " epochs) -> " << logger.log_dir() << "\n";
  }
  if (a.json()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& r : runs) j.push_back({{"id", r.id}, {"log_dir", (std::filesystem::path(*dir) / run_folder(r)).string()}});
    print_json(j);
  }
  return kExitOk;
}

}  // namespace

const Group& runs_group() {
  static const Group g{
      "runs", "list, show, rank, compare and export training runs",
      {{"list", "", 0, 0,
        {{"--experiment", "E", false, "", "only the runs of experiment E"},
         {"--name", "N", false, "", "only runs named N"},
         {"--status", "S", false, "", "only runs in state S: running, finished or failed"},
         {"--tag", "T", true, "", "only runs carrying tag T (every one given)"}},
        "runs in start order with each metric's last value",
        list},
       {"show", "ID", 1, 1, {}, "one run and its learning curves, one row per epoch", show},
       {"top", "", 0, 0,
        {{.name = "--metric", .value = "M", .help = "the metric to rank by", .required = true},
         {"--at", "final|max|min", false, "", "its last epoch's value (final, the default; highest first), or its highest (max) or lowest (min) over all epochs"},
         {"-n", "K", false, "", "how many runs (default 1)"},
         {"--experiment", "E", false, "", "only the runs of experiment E"},
         {"--tag", "T", true, "", "only runs carrying tag T"}},
        "the K best runs by their last (final), highest or lowest value of M",
        top},
       {"compare", "ID ID...", 2, -1, {{"--metric", "M", true, "", "only metric M (default: every metric)"}},
        "the curves of several runs side by side (columns ID:METRIC)",
        compare},
       {"export", "ID...", 1, -1,
        {{.name = "--tensorboard", .value = "DIR", .help = "the folder to write event files in", .required = true}},
        "TensorBoard event files of each run's curves in DIR/<name>-<id>/{train,validation}, laid out as "
        "train::TensorBoardLogger writes them (tensorboard --logdir DIR shows them); the name made one safe path component",
        export_runs}}};
  return g;
}

}  // namespace loom::cli
