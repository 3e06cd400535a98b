// `loom tasks`: list, show, submit and cancel tasks (docs/cli.md).
#include <iostream>

#include "cli.h"
#include "loom/flow/events.h"
#include "loom/flow/tasks.h"

namespace loom::cli {

namespace {

using flow::TaskInfo;

std::string versioned(const std::string& name, int64_t version) {
  return name.empty() ? "-" : version ? name + ":" + std::to_string(version) : name + " (latest)";
}

// The task record's JSON (loom/store/record.h): the dashboard's keys too.
nlohmann::ordered_json to_json(const TaskInfo& t) { return store::record_json<nlohmann::ordered_json>(t); }

std::string deps_text(const TaskInfo& t) {
  if (t.depends_on.empty()) return "-";
  std::vector<std::string> ids;
  for (int64_t d : t.depends_on) ids.push_back(std::to_string(d));
  return join(ids, " ") + (t.waiting ? " (waiting for " + std::to_string(t.waiting) + ")" : "");
}

int64_t task_id(const Args& a) { return parse_integer(a, a.positional()[0], "ID"); }

int list(const Args& a) {
  flow::TaskFilter filter{.kind = a.value("--kind"), .limit = a.integer("--limit", 0, 0)};
  if (const auto s = a.value("--status")) {
    try {
      filter.status = flow::parse_status(*s);
    } catch (const ValueError& e) {
      a.fail(std::string("--status: ") + e.what());
    }
  }
  const auto tasks = flow::Tasks(a.open_store()).list(filter);
  if (a.json()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& t : tasks) j.push_back(to_json(t));
    print_json(j);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : tasks)
    rows.push_back({std::to_string(t.id), t.kind, flow::status_name(t.status), std::to_string(t.priority),
                    std::to_string(t.attempts) + "/" + std::to_string(t.max_attempts), t.agent.empty() ? "-" : t.agent,
                    format_time(t.created_ms), shorten(terminal_text(t.hyper_parameters), 40)});
  print_table({"ID", "KIND", "STATUS", "PRIORITY", "ATTEMPTS", "AGENT", "CREATED", "HYPER-PARAMETERS"}, rows);
  return kExitOk;
}

int show(const Args& a) {
  const TaskInfo t = flow::Tasks(a.open_store()).get(task_id(a));
  if (a.json()) {
    print_json(to_json(t));
    return kExitOk;
  }
  print_fields({{"id", std::to_string(t.id)},
                {"kind", t.kind},
                {"status", flow::status_name(t.status)},
                {"hyper-parameters", t.hyper_parameters},
                {"priority", std::to_string(t.priority)},
                {"attempts", std::to_string(t.attempts) + " of " + std::to_string(t.max_attempts)},
                {"timeout", t.timeout_ms ? std::to_string(t.timeout_ms) + " ms" : "none"},
                {"lease", std::to_string(t.lease_ms) + " ms"},
                {"agent", t.agent.empty() ? "-" : t.agent},
                {"created", format_time(t.created_ms)},
                {"started", format_time(t.started_ms)},
                {"finished", format_time(t.finished_ms)},
                {"plan", t.plan_id ? std::to_string(t.plan_id) + " (" + t.name + ")" : "-"},
                {"depends on", deps_text(t)},
                {"input dataset", versioned(t.lineage.input_dataset, t.lineage.input_dataset_version) +
                                      (t.lineage.input_dataset_last_version ? ".." + std::to_string(t.lineage.input_dataset_last_version) : "") +
                                      (t.lineage.input_dataset_query.empty() ? "" : " where " + t.lineage.input_dataset_query) +
                                      (t.lineage.input_query.empty() ? "" : " (query " + t.lineage.input_query + ")")},
                {"input model", versioned(t.lineage.input_model, t.lineage.input_model_version)},
                {"output model", t.lineage.output_model.empty() ? "-" : t.lineage.output_model},
                {"output dataset", t.lineage.output_dataset.empty() ? "-" : t.lineage.output_dataset},
                {"result", t.result.empty() ? "-" : t.result},
                {"error", t.error.empty() ? "-" : t.error}});
  return kExitOk;
}

int submit(const Args& a) {
  const flow::TaskOptions defaults;
  std::vector<int64_t> after;
  for (const std::string& v : a.values("--after")) after.push_back(parse_integer(a, v, "--after"));
  flow::TaskOptions options{.priority = a.integer("--priority", defaults.priority),
                                  .max_attempts = a.integer("--max-attempts", defaults.max_attempts),
                                  .timeout_ms = a.integer("--timeout-ms", defaults.timeout_ms),
                                  .lease_ms = a.integer("--lease-ms", defaults.lease_ms),
                                  .depends_on = after,
                                  .lineage = {}};
  flow::TaskOptions& o = options;
  if (const auto v = a.value("--input-dataset")) {
    const auto [name, version] = split_version(a, *v);
    o.lineage.input_dataset = name;
    o.lineage.input_dataset_version = version.value_or(0);
  }
  if (const auto v = a.value("--input-model")) {
    const auto [name, version] = split_version(a, *v);
    o.lineage.input_model = name;
    o.lineage.input_model_version = version.value_or(0);
  }
  o.lineage.input_dataset_query = a.value("--input-query").value_or("");
  o.lineage.output_model = a.value("--output-model").value_or("");
  o.lineage.output_dataset = a.value("--output-dataset").value_or("");
  const int64_t id = flow::Tasks(a.open_store()).submit(a.positional()[0], a.value("--hyper").value_or("{}"), options);
  if (a.json()) print_json({{"id", id}});
  else std::cout << id << '\n';
  return kExitOk;
}

int cancel(const Args& a) {
  const int64_t id = task_id(a);
  flow::Tasks tasks(a.open_store());
  const bool cancelled = tasks.cancel(id);
  const std::string status = flow::status_name(tasks.get(id).status);
  if (a.json()) print_json({{"id", id}, {"cancelled", cancelled}, {"status", status}});
  else if (cancelled) std::cout << "cancelled task " << id << '\n';
  else std::cout << "task " << id << " had already ended (" << status << ")\n";
  return kExitOk;
}

int replay(const Args& a) {
  const std::vector<int64_t> reopened = flow::Tasks(a.open_store()).replay(task_id(a));
  if (a.json()) {
    print_json({{"id", task_id(a)}, {"reopened", reopened}});
    return kExitOk;
  }
  std::vector<std::string> ids;
  for (int64_t t : reopened) ids.push_back(std::to_string(t));
  std::cout << "reopened " << join(ids, " ") << '\n';
  return kExitOk;
}

int events(const Args& a) {
  const int64_t after = a.integer("--after", 0, 0), wait_ms = a.integer("--wait-ms", 0, 0), limit = a.integer("--limit", 0, 0);
  std::optional<int64_t> plan;
  if (a.value("--plan")) plan = a.integer("--plan", 0, 1);
  flow::Tasks tasks(a.open_store());
  std::vector<flow::TaskEvent> found;
  if (wait_ms > 0) {  // the first event through a subscription (woken, not polled), the rest read
    flow::Subscription sub(tasks, {.after = after, .plan_id = plan});
    if (auto e = sub.next(wait_ms)) {
      found.push_back(*e);
      for (auto& more : flow::read_events(tasks, e->id, limit > 0 ? limit - 1 : 0, plan))
        if (limit == 0 || int64_t(found.size()) < limit) found.push_back(std::move(more));
    }
  } else {
    found = flow::read_events(tasks, after, limit, plan);
  }
  if (a.json()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& e : found) j.push_back(store::record_json<nlohmann::ordered_json>(e));
    print_json(j);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : found)
    rows.push_back({std::to_string(e.id), std::to_string(e.task_id), e.plan_id ? std::to_string(e.plan_id) : "-",
                    flow::event_name(e.kind), format_time(e.created_ms), shorten(terminal_text(e.detail), 60)});
  print_table({"EVENT", "TASK", "PLAN", "KIND", "AT", "DETAIL"}, rows);
  return kExitOk;
}

}  // namespace

const Group& tasks_group() {
  static const Group g{
      "tasks", "list, show, submit, cancel and replay tasks; read task events",
      {{"list", "", 0, 0,
        {{"--kind", "K", false, "", "only tasks of kind K"},
         {"--status", "S", false, "", "only tasks in state S: pending, running, finished, failed or cancelled"},
         {"--limit", "N", false, "", "at most N tasks (0, the default: all)"}},
        "tasks in submission order",
        list},
       {"show", "ID", 1, 1, {}, "one task: hyper-parameters, attempts, agent, times, plan, dependencies, lineage, result, last error", show},
       {"submit", "KIND", 1, 1,
        {{"--hyper", "JSON", false, "", "its hyper-parameters: a JSON object (default {})"},
         {"--priority", "P", false, "", "higher runs first (default 0)"},
         {"--max-attempts", "N", false, "", "claims allowed (default 3)"},
         {"--timeout-ms", "T", false, "", "an attempt's longest run (default 0: none)"},
         {"--lease-ms", "L", false, "", "how long a claim lives without a heartbeat (default 30000)"},
         {"--after", "ID", true, "", "claimable once task ID has finished (docs/workflow.md, Plans)"},
         {"--input-dataset", "NAME[:VERSION]", false, "", "lineage: the dataset it reads (docs/workflow.md, Lineage)"},
         {"--input-query", "Q", false, "", "lineage: the selection of the input dataset it reads"},
         {"--input-model", "NAME[:VERSION]", false, "", "lineage: the model it starts from"},
         {"--output-model", "NAME", false, "", "lineage: the model it writes"},
         {"--output-dataset", "NAME", false, "", "lineage: the dataset it writes"}},
        "a new pending task, claimable once the tasks named by --after have finished; its lineage as given (checked "
        "against the store), shown by tasks show, and models show and datasets show print the task and run that "
        "produced a version; prints its id",
        submit},
       {"cancel", "ID", 1, 1, {},
        "cancels a pending or running task and, transitively, the tasks that depend on it; a task that already ended is "
        "left as it is (said so, exit code 0)",
        cancel},
       {"replay", "ID", 1, 1, {}, "reopens an ended task and every task that depends on it (pending again, no attempts); prints the reopened ids", replay},
       {"events", "", 0, 0,
        {{"--after", "N", false, "", "events after event N (default 0)"},
         {"--plan", "P", false, "", "only the events of plan P's tasks"},
         {"--wait-ms", "T", false, "", "wait up to T ms for the first event when there is none yet"},
         {"--limit", "N", false, "", "at most N events (0, the default: all)"}},
        "task events (finished, failed, cancelled, replayed) after event N, oldest first; with --wait-ms, woken by the "
        "commit, not polling",
        events}}};
  return g;
}

}  // namespace loom::cli
