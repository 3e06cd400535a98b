// `loom searches`: list a store's hyper-parameter searches and show one with its trials
// (docs/cli.md; a search is started from C++, flow::search, docs/workflow.md "Search").
#include <iostream>

#include "cli.h"
#include "loom/flow/search.h"

namespace loom::cli {

namespace {

const char* kUsage = R"(usage: loom searches COMMAND [options]

commands:
  list [--limit N]
        searches in start order: sampler, metric, ASHA's rungs, trials and the best value
  show ID
        one search and its trials (task, state, value, steps, parameters), the best marked

options: --store URL, --json (see 'loom --help')
A search is started from C++ (flow::search); its trials are tasks ('loom tasks show ID').
)";

std::string asha_text(const flow::SearchInfo& s) {
  if (!s.asha) return "-";
  return "r=" + std::to_string(s.asha->min_resource) + " R=" + std::to_string(s.asha->max_resource) +
         " eta=" + std::to_string(s.asha->reduction_factor);
}

std::string value_text(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", *v);
  return buf;
}

nlohmann::ordered_json search_json(const flow::SearchInfo& s) {
  nlohmann::ordered_json j;
  j["id"] = s.id;
  j["name"] = s.name;
  j["kind"] = s.kind;
  j["sampler"] = s.sampler;
  j["metric"] = s.metric;
  j["mode"] = s.mode == flow::Mode::Maximize ? "max" : "min";
  if (s.asha)
    j["asha"] = {{"min_resource", s.asha->min_resource}, {"max_resource", s.asha->max_resource},
                 {"reduction_factor", s.asha->reduction_factor}};
  else
    j["asha"] = nullptr;
  j["created_ms"] = s.created_ms;
  const flow::TrialInfo* best = s.best_trial();
  j["best_trial"] = best ? nlohmann::ordered_json(best->number) : nlohmann::ordered_json(nullptr);
  j["total_steps"] = s.total_steps();
  j["trials"] = nlohmann::ordered_json::array();
  for (const flow::TrialInfo& t : s.trials) {
    nlohmann::ordered_json e;
    e["number"] = t.number;
    e["task_id"] = t.task_id;
    e["state"] = flow::trial_state_name(t.state);
    e["value"] = t.value ? nlohmann::ordered_json(*t.value) : nlohmann::ordered_json(nullptr);
    e["steps"] = t.steps;
    e["params"] = json_value(t.params);
    e["error"] = t.error;
    j["trials"].push_back(e);
  }
  return j;
}

int list(const std::vector<std::string>& args) {
  Args a(args, {{"--limit", "N"}}, 0, 0, "searches list", "", kUsage);
  const flow::Tasks tasks(a.open_store());
  std::vector<flow::SearchInfo> searches;
  for (const flow::SearchInfo& s : flow::list_searches(tasks, a.integer("--limit", 0, 0))) searches.push_back(flow::get_search(tasks, s.id));
  if (a.json()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const flow::SearchInfo& s : searches) j.push_back(search_json(s));
    print_json(j);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const flow::SearchInfo& s : searches) {
    const flow::TrialInfo* best = s.best_trial();
    rows.push_back({std::to_string(s.id), s.name, s.kind, s.sampler, s.metric + (s.mode == flow::Mode::Maximize ? " (max)" : " (min)"),
                    asha_text(s), std::to_string(s.trials.size()), std::to_string(s.total_steps()),
                    best ? value_text(best->value) : "-", format_time(s.created_ms)});
  }
  print_table({"ID", "NAME", "KIND", "SAMPLER", "METRIC", "ASHA", "TRIALS", "STEPS", "BEST", "CREATED"}, rows);
  return kExitOk;
}

int show(const std::vector<std::string>& args) {
  Args a(args, {}, 1, 1, "searches show", "ID", kUsage);
  const flow::SearchInfo s = flow::get_search(flow::Tasks(a.open_store()), parse_integer(a, a.positional()[0], "ID"));
  if (a.json()) {
    print_json(search_json(s));
    return kExitOk;
  }
  const flow::TrialInfo* best = s.best_trial();
  print_fields({{"id", std::to_string(s.id)},
                {"name", s.name},
                {"kind", s.kind},
                {"sampler", s.sampler},
                {"metric", s.metric + (s.mode == flow::Mode::Maximize ? " (maximized)" : " (minimized)")},
                {"asha", asha_text(s)},
                {"steps", std::to_string(s.total_steps())},
                {"best", best ? "trial " + std::to_string(best->number) + ": " + value_text(best->value) + " " + best->params : "-"},
                {"created", format_time(s.created_ms)}});
  std::cout << '\n';
  std::vector<std::vector<std::string>> rows;
  for (const flow::TrialInfo& t : s.trials)
    rows.push_back({std::to_string(t.number) + (best && best->number == t.number ? " *" : ""), std::to_string(t.task_id),
                    flow::trial_state_name(t.state), value_text(t.value), std::to_string(t.steps), shorten(terminal_text(t.params), 60)});
  print_table({"TRIAL", "TASK", "STATE", "VALUE", "STEPS", "PARAMS"}, rows);
  return kExitOk;
}

}  // namespace

int searches_main(const std::vector<std::string>& args) {
  const auto [sub, rest] = subcommand(args, {"list", "show"}, "searches", kUsage);
  if (sub == "list") return list(rest);
  return show(rest);
}

}  // namespace loom::cli
