// `loom controllers`: create, list, show, run and delete stream controllers (docs/cli.md).
#include <csignal>
#include <iostream>

#include "cli.h"
#include "loom/flow/controllers.h"

namespace loom::cli {

namespace {

using flow::BatchInfo;
using flow::ControllerInfo;

const char* kUsage = R"(usage: loom controllers COMMAND [options]

commands:
  create NAME (--dataset D | --query Q) (--kind K | --plan FILE) [--hyper JSON]
         [--min-samples N] [--min-fraction F] [--max-wait-ms T] [--priority P]
         [--max-attempts N] [--timeout-ms T] [--lease-ms L] [--output-model M]
                       a controller that submits a task of kind K (or the plan in FILE, as
                       'loom plans submit' reads it) for each batch of new versions of D (or
                       of the named query Q's dataset, counting what Q selects) once it holds
                       N samples, F times the earlier batches', or its oldest version is T ms
                       old (none given: any new sample)
  list                 the controllers, their batches so far and what is pending
  show NAME            one controller and its batches (versions, samples, task)
  run NAME [--once] [--max-batches N] [--recheck-ms T]
                       runs the controller (woken by dataset commits) until interrupted, N
                       batches were submitted, or with --once until nothing is significant
  delete NAME          deletes the controller and its batch records (its tasks stay)

options: --store URL, --json (see 'loom --help')
)";

std::string rule_text(const flow::ControllerSpec& s) {
  std::vector<std::string> rules;
  if (s.min_samples > 0) rules.push_back(std::to_string(s.min_samples) + " samples");
  if (s.min_fraction > 0) rules.push_back(format_number(s.min_fraction) + " x earlier");
  if (s.max_wait_ms > 0) rules.push_back(std::to_string(s.max_wait_ms) + " ms");
  return rules.empty() ? "any sample" : join(rules, " or ");
}

nlohmann::ordered_json to_json(const ControllerInfo& c) {
  const flow::ControllerSpec& s = c.spec;
  nlohmann::ordered_json j;
  j["name"] = s.name;
  j["dataset"] = s.dataset;
  j["query"] = s.query;
  j["min_samples"] = s.min_samples;
  j["min_fraction"] = s.min_fraction;
  j["max_wait_ms"] = s.max_wait_ms;
  j["kind"] = s.kind;
  j["hyper_parameters"] = json_value(s.hyper_parameters);
  j["priority"] = s.priority;
  j["max_attempts"] = s.max_attempts;
  j["timeout_ms"] = s.timeout_ms;
  j["lease_ms"] = s.lease_ms;
  j["output_model"] = s.output_model;
  j["plan"] = s.plan.tasks.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json::parse(s.plan.to_json());
  j["batches"] = c.batches;
  j["samples"] = c.samples;
  j["pending_versions"] = c.pending_versions;
  j["pending_samples"] = c.pending_samples;
  j["created_ms"] = c.created_ms;
  return j;
}

nlohmann::ordered_json to_json(const BatchInfo& b) {
  return {{"batch", b.batch},     {"versions", b.versions}, {"samples", b.samples},
          {"task_id", b.task_id}, {"plan_id", b.plan_id},   {"created_ms", b.created_ms}};
}

std::string versions_text(const std::vector<int64_t>& vs) {
  std::vector<std::string> parts;
  for (int64_t v : vs) parts.push_back(std::to_string(v));
  return join(parts);
}

int create(const std::vector<std::string>& args) {
  Args a(args, {{"--dataset", "D"}, {"--query", "Q"}, {"--kind", "K"}, {"--hyper", "JSON"}, {"--min-samples", "N"},
                {"--min-fraction", "F"}, {"--max-wait-ms", "T"}, {"--priority", "P"}, {"--max-attempts", "N"},
                {"--timeout-ms", "T"}, {"--lease-ms", "L"}, {"--output-model", "M"}, {"--plan", "FILE"}},
         1, 1, "controllers create", "NAME", kUsage);
  flow::ControllerSpec s;
  s.name = a.positional()[0];
  s.dataset = a.value("--dataset").value_or("");
  s.query = a.value("--query").value_or("");
  const auto kind = a.value("--kind");
  const auto plan = a.value("--plan");
  if (kind.has_value() == plan.has_value()) a.fail("give one of --kind and --plan");
  if (kind) s.kind = *kind;
  else s.plan = flow::Plan::from_json(read_input(*plan, "controllers create"), "controllers create: " + *plan);
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

int list(const std::vector<std::string>& args) {
  Args a(args, {}, 0, 0, "controllers list", "", kUsage);
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

int show(const std::vector<std::string>& args) {
  Args a(args, {}, 1, 1, "controllers show", "NAME", kUsage);
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

int run(const std::vector<std::string>& args) {
  Args a(args, {{"--once", ""}, {"--max-batches", "N"}, {"--recheck-ms", "T"}}, 1, 1, "controllers run", "NAME", kUsage);
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

int remove(const std::vector<std::string>& args) {
  Args a(args, {}, 1, 1, "controllers delete", "NAME", kUsage);
  flow::Controllers(flow::Tasks(a.open_store())).remove(a.positional()[0]);
  if (a.json()) print_json({{"deleted", a.positional()[0]}});
  return kExitOk;
}

}  // namespace

int controllers_main(const std::vector<std::string>& args) {
  const auto [sub, rest] = subcommand(args, {"create", "list", "show", "run", "delete"}, "controllers", kUsage);
  if (sub == "create") return create(rest);
  if (sub == "list") return list(rest);
  if (sub == "show") return show(rest);
  if (sub == "run") return run(rest);
  return remove(rest);
}

}  // namespace loom::cli
