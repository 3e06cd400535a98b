// `loom plans`: submit a plan from a JSON file, list, show, cancel and replay plans (docs/cli.md).
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "loom/flow/plans.h"

namespace loom::cli {

namespace {

using flow::PlanInfo;
using flow::TaskInfo;

const char* kUsage = R"(usage: loom plans COMMAND [options]

commands:
  submit FILE
        submits the plan in FILE (JSON; '-': stdin) in one transaction; prints its id:
        {"name": "...", "tasks": [{"name": "a", "kind": "K", "hyper_parameters": {...},
          "depends_on": ["other task's name", ...], "after": [task id, ...], "lineage": {...},
          "priority": P, "max_attempts": N, "timeout_ms": T, "lease_ms": L}, ...]}
  list [--limit N]
        plans in submission order with their status and how many tasks finished
  show ID
        one plan and its tasks (dependencies, waiting, status, result or error)
  cancel ID
        cancels every pending or running task of the plan
  replay ID
        reopens the plan's failed and cancelled tasks and what depends on them

options: --store URL, --json (see 'loom --help')
)";

[[noreturn]] void bad_plan(const std::string& file, const std::string& what) {
  throw ValueError("plans submit: " + file + ": " + what);
}

flow::Plan parse_plan(const std::string& file, const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    bad_plan(file, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) bad_plan(file, "the plan must be a JSON object with \"name\" and \"tasks\"");
  for (const auto& [key, v] : j.items())
    if (key != "name" && key != "tasks") bad_plan(file, "unknown key \"" + key + "\" (valid: name, tasks)");
  if (!j.contains("name") || !j["name"].is_string()) bad_plan(file, "\"name\" must be a string");
  if (!j.contains("tasks") || !j["tasks"].is_array()) bad_plan(file, "\"tasks\" must be an array of tasks");
  flow::Plan plan{.name = j["name"].get<std::string>()};
  for (size_t i = 0; i < j["tasks"].size(); ++i) {
    const nlohmann::json& t = j["tasks"][i];
    const std::string at = "tasks[" + std::to_string(i) + "]";
    if (!t.is_object()) bad_plan(file, at + " must be an object");
    flow::PlanTask task;
    const auto integer = [&](const char* key, int64_t& out) {
      if (!t.contains(key)) return;
      if (!t[key].is_number_integer()) bad_plan(file, at + "." + key + " must be an integer");
      out = t[key].get<int64_t>();
    };
    for (const auto& [key, v] : t.items()) {
      if (key == "name" || key == "kind") {
        if (!v.is_string()) bad_plan(file, at + "." + key + " must be a string");
        (key == "name" ? task.name : task.kind) = v.get<std::string>();
      } else if (key == "hyper_parameters") {
        if (!v.is_object()) bad_plan(file, at + ".hyper_parameters must be a JSON object");
        task.hyper_parameters = v.dump();
      } else if (key == "depends_on") {
        if (!v.is_array()) bad_plan(file, at + ".depends_on must be an array of task names");
        for (const auto& d : v) {
          if (!d.is_string()) bad_plan(file, at + ".depends_on must be an array of task names");
          task.depends_on.push_back(d.get<std::string>());
        }
      } else if (key == "after") {
        if (!v.is_array()) bad_plan(file, at + ".after must be an array of task ids");
        for (const auto& d : v) {
          if (!d.is_number_integer()) bad_plan(file, at + ".after must be an array of task ids");
          task.options.depends_on.push_back(d.get<int64_t>());
        }
      } else if (key == "lineage") {
        if (!v.is_object()) bad_plan(file, at + ".lineage must be an object");
        flow::Lineage& l = task.options.lineage;
        for (const auto& [lk, lv] : v.items()) {
          const bool is_int = lk == "input_dataset_version" || lk == "input_model_version" || lk == "input_dataset_last_version";
          if (is_int ? !lv.is_number_integer() : !lv.is_string())
            bad_plan(file, at + ".lineage." + lk + (is_int ? " must be an integer" : " must be a string"));
          if (lk == "input_dataset") l.input_dataset = lv;
          else if (lk == "input_dataset_version") l.input_dataset_version = lv;
          else if (lk == "input_dataset_query") l.input_dataset_query = lv;
          else if (lk == "input_model") l.input_model = lv;
          else if (lk == "input_model_version") l.input_model_version = lv;
          else if (lk == "output_model") l.output_model = lv;
          else if (lk == "output_dataset") l.output_dataset = lv;
          else if (lk == "input_dataset_last_version") l.input_dataset_last_version = lv;
          else if (lk == "input_query") l.input_query = lv;
          else
            bad_plan(file, at + ".lineage: unknown key \"" + lk +
                               "\" (valid: input_dataset, input_dataset_version, input_dataset_query, input_model, "
                               "input_model_version, output_model, output_dataset, input_dataset_last_version, input_query)");
        }
      } else if (key != "priority" && key != "max_attempts" && key != "timeout_ms" && key != "lease_ms") {
        bad_plan(file, at + ": unknown key \"" + key +
                           "\" (valid: name, kind, hyper_parameters, depends_on, after, lineage, priority, max_attempts, timeout_ms, "
                           "lease_ms)");
      }
    }
    integer("priority", task.options.priority);
    integer("max_attempts", task.options.max_attempts);
    integer("timeout_ms", task.options.timeout_ms);
    integer("lease_ms", task.options.lease_ms);
    plan.tasks.push_back(std::move(task));
  }
  return plan;
}

nlohmann::ordered_json task_json(const TaskInfo& t) {
  nlohmann::ordered_json j;
  j["id"] = t.id;
  j["name"] = t.name;
  j["kind"] = t.kind;
  j["status"] = flow::status_name(t.status);
  j["depends_on"] = t.depends_on;
  j["waiting"] = t.waiting;
  j["hyper_parameters"] = json_value(t.hyper_parameters);
  j["attempts"] = t.attempts;
  j["max_attempts"] = t.max_attempts;
  j["agent"] = t.agent;
  j["result"] = json_value(t.result);
  j["error"] = t.error;
  j["started_ms"] = t.started_ms;
  j["finished_ms"] = t.finished_ms;
  return j;
}

int64_t finished_count(const PlanInfo& p) {
  int64_t n = 0;
  for (const TaskInfo& t : p.tasks) n += t.status == flow::Status::Finished;
  return n;
}

nlohmann::ordered_json plan_json(const PlanInfo& p, bool with_tasks) {
  nlohmann::ordered_json j;
  j["id"] = p.id;
  j["name"] = p.name;
  j["status"] = flow::status_name(p.status);
  j["created_ms"] = p.created_ms;
  j["finished"] = finished_count(p);
  j["total"] = p.tasks.size();
  if (with_tasks) {
    j["tasks"] = nlohmann::ordered_json::array();
    for (const TaskInfo& t : p.tasks) j["tasks"].push_back(task_json(t));
  }
  return j;
}

int64_t plan_id(const Args& a) { return parse_integer(a, a.positional()[0], "ID"); }

int submit(const std::vector<std::string>& args) {
  Args a(args, {}, 1, 1, "plans submit", "FILE", kUsage);
  const std::string file = a.positional()[0];
  std::stringstream text;
  if (file == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw store::NotFoundError("plans submit: cannot read '" + file + "'");
    text << in.rdbuf();
  }
  const flow::Plan plan = parse_plan(file, text.str());
  flow::Plans plans{flow::Tasks(a.open_store())};
  const PlanInfo p = plans.get(plans.submit(plan));
  if (a.json()) {
    nlohmann::ordered_json ids;
    for (const TaskInfo& t : p.tasks) ids[t.name] = t.id;
    print_json({{"id", p.id}, {"tasks", ids}});
  } else {
    std::cout << p.id << '\n';
  }
  return kExitOk;
}

int list(const std::vector<std::string>& args) {
  Args a(args, {{"--limit", "N"}}, 0, 0, "plans list", "", kUsage);
  const auto plans = flow::Plans(flow::Tasks(a.open_store())).list(a.integer("--limit", 0, 0));
  if (a.json()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& p : plans) j.push_back(plan_json(p, false));
    print_json(j);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : plans)
    rows.push_back({std::to_string(p.id), p.name, flow::status_name(p.status),
                    std::to_string(finished_count(p)) + "/" + std::to_string(p.tasks.size()), format_time(p.created_ms)});
  print_table({"ID", "NAME", "STATUS", "FINISHED", "CREATED"}, rows);
  return kExitOk;
}

int show(const std::vector<std::string>& args) {
  Args a(args, {}, 1, 1, "plans show", "ID", kUsage);
  const PlanInfo p = flow::Plans(flow::Tasks(a.open_store())).get(plan_id(a));
  if (a.json()) {
    print_json(plan_json(p, true));
    return kExitOk;
  }
  print_fields({{"id", std::to_string(p.id)},
                {"name", p.name},
                {"status", flow::status_name(p.status)},
                {"finished", std::to_string(finished_count(p)) + " of " + std::to_string(p.tasks.size())},
                {"created", format_time(p.created_ms)}});
  std::cout << '\n';
  std::vector<std::vector<std::string>> rows;
  for (const TaskInfo& t : p.tasks) {
    std::vector<std::string> deps;
    for (int64_t d : t.depends_on) deps.push_back(std::to_string(d));
    rows.push_back({std::to_string(t.id), t.name, t.kind, flow::status_name(t.status), deps.empty() ? "-" : join(deps),
                    std::to_string(t.waiting), std::to_string(t.attempts) + "/" + std::to_string(t.max_attempts),
                    shorten(terminal_text(t.status == flow::Status::Finished ? t.result : t.error), 50)});
  }
  print_table({"TASK", "NAME", "KIND", "STATUS", "DEPENDS-ON", "WAITING", "ATTEMPTS", "RESULT/ERROR"}, rows);
  return kExitOk;
}

int cancel(const std::vector<std::string>& args) {
  Args a(args, {}, 1, 1, "plans cancel", "ID", kUsage);
  const int64_t id = plan_id(a);
  const int64_t n = flow::Plans(flow::Tasks(a.open_store())).cancel(id);
  if (a.json()) print_json({{"id", id}, {"cancelled", n}});
  else std::cout << "cancelled " << n << " task" << (n == 1 ? "" : "s") << " of plan " << id << '\n';
  return kExitOk;
}

int replay(const std::vector<std::string>& args) {
  Args a(args, {}, 1, 1, "plans replay", "ID", kUsage);
  const int64_t id = plan_id(a);
  const std::vector<int64_t> reopened = flow::Plans(flow::Tasks(a.open_store())).replay(id);
  if (a.json()) {
    print_json({{"id", id}, {"reopened", reopened}});
    return kExitOk;
  }
  std::vector<std::string> ids;
  for (int64_t t : reopened) ids.push_back(std::to_string(t));
  std::cout << "reopened " << reopened.size() << " task" << (reopened.size() == 1 ? "" : "s") << " of plan " << id
            << (ids.empty() ? "" : ": " + join(ids, " ")) << '\n';
  return kExitOk;
}

}  // namespace

int plans_main(const std::vector<std::string>& args) {
  const auto [sub, rest] = subcommand(args, {"submit", "list", "show", "cancel", "replay"}, "plans", kUsage);
  if (sub == "submit") return submit(rest);
  if (sub == "list") return list(rest);
  if (sub == "show") return show(rest);
  if (sub == "cancel") return cancel(rest);
  return replay(rest);
}

}  // namespace loom::cli
