// `loom searches`: start a hyper-parameter search whose trials agents run (a command kind, say),
// list a store's searches and show one with its trials (docs/cli.md; flow::search in C++,
// docs/workflow.md "Search").
#include <cmath>
#include <iostream>
#include <memory>

#include "cli.h"
#include "loom/flow/search.h"

namespace loom::cli {

namespace {

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

// The search's record's JSON (loom/store/record.h; each trial its TrialInfo's) with, before its
// trials, the best trial's number (null for none) and the steps spent.
nlohmann::ordered_json search_json(const flow::SearchInfo& s) {
  nlohmann::ordered_json j = store::record_json<nlohmann::ordered_json>(s);
  nlohmann::ordered_json trials = std::move(j["trials"]);
  j.erase("trials");
  const flow::TrialInfo* best = s.best_trial();
  j["best_trial"] = best ? nlohmann::ordered_json(best->number) : nlohmann::ordered_json(nullptr);
  j["total_steps"] = s.total_steps();
  j["trials"] = std::move(trials);
  return j;
}

int list(const Args& a) {
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

// A number of a --param SPEC; UsageError naming the parameter otherwise.
double spec_number(const Args& a, const std::string& name, const std::string& text) {
  size_t used = 0;
  double v = NAN;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || !std::isfinite(v)) a.fail("--param " + name + ": '" + terminal_text(text) + "' is not a finite number");
  return v;
}

// "NAME=KIND:ARGS" added to `space` (the space's own ValueError for a bad range, else UsageError).
void add_param(const Args& a, flow::SearchSpace& space, const std::string& text) {
  const size_t eq = text.find('=');
  const size_t colon = eq == std::string::npos ? std::string::npos : text.find(':', eq);
  const std::string valid = " (valid: NAME=uniform:LOW:HIGH, NAME=log_uniform:LOW:HIGH, NAME=int:LOW:HIGH, NAME=choice:V1,V2,...)";
  if (eq == std::string::npos || eq == 0 || colon == std::string::npos) a.fail("--param '" + terminal_text(text) + "'" + valid);
  const std::string name = text.substr(0, eq), kind = text.substr(eq + 1, colon - eq - 1), rest = text.substr(colon + 1);
  if (kind == "choice") {
    std::vector<std::string> choices;
    size_t start = 0;
    while (true) {
      const size_t comma = rest.find(',', start);
      const std::string c = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      const nlohmann::json j = nlohmann::json::parse(c, nullptr, false);
      choices.push_back(!c.empty() && !j.is_discarded() ? j.dump() : nlohmann::json(c).dump());  // relu: the string "relu"
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    space.categorical(name, choices);
    return;
  }
  const size_t sep = rest.find(':');
  if (sep == std::string::npos || (kind != "uniform" && kind != "log_uniform" && kind != "int"))
    a.fail("--param '" + terminal_text(text) + "'" + valid);
  const double low = spec_number(a, name, rest.substr(0, sep)), high = spec_number(a, name, rest.substr(sep + 1));
  if (kind == "uniform") space.uniform(name, low, high);
  else if (kind == "log_uniform") space.log_uniform(name, low, high);
  else if (low != std::floor(low) || high != std::floor(high) || std::abs(low) > 9e15 || std::abs(high) > 9e15)
    a.fail("--param " + name + ": int bounds must be integers");
  else space.integer(name, static_cast<int64_t>(low), static_cast<int64_t>(high));
}

int print_search(const Args& a, const flow::SearchInfo& s);

int start(const Args& a) {
  flow::SearchSpace space;
  for (const std::string& p : a.values("--param")) add_param(a, space, p);
  const std::string mode = a.value("--mode").value_or("min");
  if (mode != "min" && mode != "max") a.fail("--mode '" + terminal_text(mode) + "' (valid: min, max)");
  const std::string sampler_name = a.value("--sampler").value_or("random");
  const auto seed = static_cast<uint64_t>(a.integer("--seed", 0, 0));
  std::unique_ptr<flow::Sampler> sampler;
  if (sampler_name == "random") sampler = std::make_unique<flow::RandomSampler>(seed);
  else if (sampler_name == "tpe") sampler = std::make_unique<flow::TPESampler>(flow::TPEOptions{.seed = seed});
  else if (sampler_name == "grid") sampler = std::make_unique<flow::GridSampler>(a.integer("--grid-points", 5, 2));
  else a.fail("--sampler '" + terminal_text(sampler_name) + "' (valid: random, tpe, grid)");
  flow::SearchOptions options{.name = a.value("--name").value_or("search"),
                              .kind = *a.value("--kind"),
                              .metric = *a.value("--metric"),
                              .mode = mode == "max" ? flow::Mode::Maximize : flow::Mode::Minimize,
                              .n_trials = a.integer("--trials", 0, 1),
                              .max_concurrent_trials = a.integer("--concurrent", 4, 1),
                              .hyper_parameters = a.value("--hyper-parameters").value_or("{}"),
                              .step_budget = a.integer("--step-budget", 0, 0),
                              .timeout_ms = a.integer("--timeout-ms", 0, 0)};
  if (a.value("--asha"))
    options.asha = flow::Asha{.min_resource = a.integer("--asha-min", 1, 1), .max_resource = a.integer("--asha", 0, 1),
                              .reduction_factor = a.integer("--asha-eta", 3, 2)};
  else if (a.value("--asha-min") || a.value("--asha-eta") || a.value("--step-budget"))
    a.fail("--asha-min, --asha-eta and --step-budget need --asha R");
  const flow::SearchInfo s = flow::search(flow::Tasks(a.open_store()), space, *sampler, options);
  return print_search(a, s);
}

int show(const Args& a) {
  return print_search(a, flow::get_search(flow::Tasks(a.open_store()), parse_integer(a, a.positional()[0], "ID")));
}

int print_search(const Args& a, const flow::SearchInfo& s) {
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

const Group& searches_group() {
  static const Group g{
      "searches", "start, list and show hyper-parameter searches and their trials",
      {{"start", "", 0, 0,
        {{.name = "--kind", .value = "K", .help = "each trial a task of kind K", .required = true},
         {.name = "--metric", .value = "M", .help = "a trial's value: its result's field M (else its last report)", .required = true},
         {.name = "--trials", .value = "N", .help = "how many trials", .required = true},
         {.name = "--param", .value = "NAME=SPEC", .repeated = true,
          .help = "a sampled hyper-parameter; SPEC: uniform:LOW:HIGH, log_uniform:LOW:HIGH, int:LOW:HIGH or "
                  "choice:V1,V2,... (each a JSON value, else a string: act=choice:relu,gelu)",
          .required = true},
         {"--mode", "min|max", false, "", "minimize (the default) or maximize M"},
         {"--sampler", "random|tpe|grid", false, "", "how trials are sampled (default random)"},
         {"--seed", "S", false, "", "the sampler's seed"},
         {"--grid-points", "N", false, "", "points per continuous parameter of the grid (default 5)"},
         {"--asha", "R", false, "", "stop poor trials at rungs r, r*ETA, ... up to R steps"},
         {"--asha-min", "r", false, "", "ASHA's first rung (default 1)"},
         {"--asha-eta", "ETA", false, "", "ASHA's reduction factor (default 3)"},
         {"--step-budget", "N", false, "", "steps all trials may spend together"},
         {"--concurrent", "N", false, "", "trials running at once (default 4)"},
         {"--hyper-parameters", "JSON", false, "", "hyper-parameters every trial gets besides the sampled ones"},
         {"--name", "NAME", false, "", "the search's name"},
         {"--timeout-ms", "MS", false, "", "give up after MS ms"}},
        "runs a search to its end (flow::search; docs/workflow.md, Search) and shows it as show does: each trial a task "
        "of kind K that agents run (a command kind, loom agent --command K=PROGRAM, reports STEP VALUE lines on "
        "descriptor 3 for ASHA), its hyper-parameters the sampled ones plus --hyper-parameters",
        start},
       {"list", "", 0, 0, {{"--limit", "N", false, "", "at most N searches (0, the default: all)"}},
        "hyper-parameter searches in start order: sampler, metric, ASHA's rungs, trials, steps spent, best value",
        list},
       {"show", "ID", 1, 1, {},
        "one search and its trials: task id (loom tasks show ID), state (completed, stopped by ASHA, ...), value, steps, "
        "parameters; the best marked *",
        show}}};
  return g;
}

}  // namespace loom::cli
