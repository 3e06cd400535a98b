// `loom controllers`: create, list, show, run and delete stream controllers (docs/cli.md).
#include <csignal>
#include <iostream>

#include "cli.h"
#include "loom/flow/controllers.h"

namespace loom::cli {

namespace {

using flow::BatchInfo;
using flow::ControllerInfo;

std::string rule_text(const flow::ControllerSpec& s) {
  std::vector<std::string> rules;
  if (s.min_samples > 0) rules.push_back(std::to_string(s.min_samples) + " samples");
  if (s.min_fraction > 0) rules.push_back(format_number(s.min_fraction) + " x earlier");
  if (s.max_wait_ms > 0) rules.push_back(std::to_string(s.max_wait_ms) + " ms");
  return rules.empty() ? "any sample" : join(rules, " or ");
}

nlohmann::ordered_json to_json(const ControllerInfo& c) { return store::record_json<nlohmann::ordered_json>(c); }

nlohmann::ordered_json to_json(const BatchInfo& b) { return store::record_json<nlohmann::ordered_json>(b); }

std::string versions_text(const std::vector<int64_t>& vs) {
  std::vector<std::string> parts;
  for (int64_t v : vs) parts.push_back(std::to_string(v));
  return join(parts);
}

int create(const Args& a) {
  flow::ControllerSpec s;
  s.name = a.positional()[0];
  s.dataset = a.value("--dataset").value_or("");
  s.query = a.value("--query").value_or("");
  const auto kind = a.value("--kind");  // (one of --kind and --plan: the table requires it)
  const auto plan = a.value("--plan");
  if (kind) s.kind = *kind;
  else s.plan = flow::TaskGraph::from_json(read_input(*plan, "controllers create"), "controllers create: " + *plan);
  s.hyper_parameters = a.value("--hyper").value_or("{}");
  s.min_samples = a.integer("--min-samples", 0, 0);
  if (const auto f = a.value("--min-fraction")) {
    char* end = nullptr;
    s.min_fraction = std::strtod(f->c_str(), &end);
    if (f->empty() || *end != '\0') a.fail("--min-fraction '" + *f + "' is not a number");
  }
  s.max_wait_ms = a.integer("--max-wait-ms", 0, 0);
  s.priority = a.integer("--priority", s.priority);
  s.max_attempts = a.integer("--max-attempts", s.max_attempts);
  s.timeout_ms = a.integer("--timeout-ms", s.timeout_ms);
  s.lease_ms = a.integer("--lease-ms", s.lease_ms);
  s.output_model = a.value("--output-model").value_or("");
  const ControllerInfo c = flow::Controllers(flow::Tasks(a.open_store())).create(s);
  if (a.json()) print_json(to_json(c));
  else std::cout << c.spec.name << '\n';
  return kExitOk;
}

int list(const Args& a) {
  const std::vector<ControllerInfo> found = flow::Controllers(flow::Tasks(a.open_store())).list();
  if (a.json()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& c : found) j.push_back(to_json(c));
    print_json(j);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : found)
    rows.push_back({c.spec.name, c.spec.dataset + (c.spec.query.empty() ? "" : " (" + c.spec.query + ")"),
                    c.spec.plan.tasks.empty() ? c.spec.kind : "plan '" + c.spec.plan.name + "'",
                    rule_text(c.spec), std::to_string(c.batches), std::to_string(c.samples),
                    std::to_string(c.pending_versions) + " / " + std::to_string(c.pending_samples)});
  print_table({"NAME", "DATASET", "SUBMITS", "TRIGGER", "BATCHES", "SAMPLES", "PENDING (VERSIONS / SAMPLES)"}, rows);
  return kExitOk;
}

int show(const Args& a) {
  const flow::Controllers controllers(flow::Tasks(a.open_store()));
  const ControllerInfo c = controllers.get(a.positional()[0]);
  const std::vector<BatchInfo> batches = controllers.batches(c.spec.name);
  if (a.json()) {
    nlohmann::ordered_json j = to_json(c);
    j["batch_list"] = nlohmann::ordered_json::array();
    for (const auto& b : batches) j["batch_list"].push_back(to_json(b));
    print_json(j);
    return kExitOk;
  }
  const flow::ControllerSpec& s = c.spec;
  print_fields({{"name", s.name},
                {"dataset", s.dataset},
                {"query", s.query.empty() ? "-" : s.query},
                {"trigger", rule_text(s)},
                {"kind", s.plan.tasks.empty() ? s.kind : "-"},
                {"plan", s.plan.tasks.empty() ? "-" : s.plan.to_json()},
                {"hyper-parameters", s.hyper_parameters},
                {"output model", s.output_model.empty() ? "-" : s.output_model},
                {"batches", std::to_string(c.batches)},
                {"samples", std::to_string(c.samples)},
                {"pending", std::to_string(c.pending_versions) + " version(s), " + std::to_string(c.pending_samples) + " sample(s)"},
                {"created", format_time(c.created_ms)}});
  std::cout << '\n';
  std::vector<std::vector<std::string>> rows;
  for (const auto& b : batches)
    rows.push_back({std::to_string(b.batch), versions_text(b.versions), std::to_string(b.samples),
                    b.plan_id ? "plan " + std::to_string(b.plan_id) : "task " + std::to_string(b.task_id), format_time(b.created_ms)});
  print_table({"BATCH", "VERSIONS", "SAMPLES", "SUBMITTED", "CREATED"}, rows);
  return kExitOk;
}

volatile std::sig_atomic_t g_interrupted = 0;

int run(const Args& a) {
  const int64_t max_batches = a.integer("--max-batches", 0, 0);
  const int64_t recheck_ms = a.integer("--recheck-ms", 1000, 1);
  flow::Controllers controllers(flow::Tasks(a.open_store()));
  const std::string name = a.positional()[0];
  int64_t submitted = 0;
  const auto report = [&](const BatchInfo& b) {
    if (!a.json()) std::cout << "batch " << b.batch << ": versions " << versions_text(b.versions) << ", " << b.samples << " samples -> "
                             << (b.plan_id ? "plan " + std::to_string(b.plan_id) : "task " + std::to_string(b.task_id)) << std::endl;
  };
  if (a.flag("--once")) {
    while (auto b = controllers.step(name)) {
      report(*b);
      if (++submitted == max_batches) break;
    }
  } else {
    std::signal(SIGINT, [](int) { g_interrupted = 1; });
    std::signal(SIGTERM, [](int) { g_interrupted = 1; });
    const int64_t start = controllers.get(name).batches;
    int64_t seen = start;
    submitted = controllers.run(name, [&] {
      for (const BatchInfo& b : controllers.batches(name))
        if (b.batch > seen) {
          report(b);
          seen = b.batch;
        }
      return g_interrupted != 0 || (max_batches > 0 && seen - start >= max_batches);
    }, recheck_ms);
  }
  if (a.json()) print_json({{"submitted", submitted}});
  return kExitOk;
}

int remove(const Args& a) {
  flow::Controllers(flow::Tasks(a.open_store())).remove(a.positional()[0]);
  if (a.json()) print_json({{"deleted", a.positional()[0]}});
  return kExitOk;
}

}  // namespace

const Group& controllers_group() {
  static const Group g{
      "controllers", "create, list, show, run and delete stream controllers (tasks for new data)",
      {{"create", "NAME", 1, 1,
        {{.name = "--dataset", .value = "D", .help = "the dataset whose new versions it batches", .one_of = "source"},
         {.name = "--query", .value = "Q", .help = "a named query: its dataset's new versions, counting what Q selects", .one_of = "source"},
         {.name = "--kind", .value = "K", .help = "submit a task of kind K per batch", .required = true, .one_of = "submits"},
         {.name = "--plan", .value = "FILE", .help = "submit the plan in FILE per batch (as loom plans submit reads it)", .required = true, .one_of = "submits"},
         {"--hyper", "JSON", false, "", "the tasks' hyper-parameters (default {})"},
         {"--min-samples", "N", false, "", "significant at N new samples"},
         {"--min-fraction", "F", false, "", "significant at F times the samples of the earlier batches"},
         {"--max-wait-ms", "T", false, "", "significant once its oldest version is T ms old"},
         {"--priority", "P", false, "", "the tasks' priority"},
         {"--max-attempts", "N", false, "", "the tasks' claims allowed"},
         {"--timeout-ms", "T", false, "", "the tasks' longest attempt"},
         {"--lease-ms", "L", false, "", "the tasks' lease"},
         {"--output-model", "M", false, "", "lineage: the model the tasks write"}},
        "a stream controller (docs/workflow.md, Stream controllers): one task of kind K, or the plan in FILE, per "
        "significant batch of new versions (none of --min-samples, --min-fraction and --max-wait-ms given: any new "
        "sample)",
        create},
       {"list", "", 0, 0, {}, "controllers with their batches so far and what is pending", list},
       {"show", "NAME", 1, 1, {}, "one controller with its batches (versions, samples, task)", show},
       {"run", "NAME", 1, 1,
        {{"--once", "", false, "", "submit what is significant now and return"},
         {"--max-batches", "N", false, "", "return after N batches"},
         {"--recheck-ms", "T", false, "", "how often the time rules are checked without a commit (default 1000)"}},
        "runs it, woken by dataset commits, printing each batch, until SIGINT/SIGTERM or N batches",
        run},
       {"delete", "NAME", 1, 1, {}, "deletes a controller and its batch records (its tasks stay)", remove}}};
  return g;
}

}  // namespace loom::cli
