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

int64_t finished_count(const PlanInfo& p) {
  int64_t n = 0;
  for (const TaskInfo& t : p.tasks) n += t.status == flow::Status::Finished;
  return n;
}

// The plan's record's JSON (loom/store/record.h; each task as `loom tasks show --json` prints
// it) with, before its tasks, how many finished of how many; `plans list` leaves the tasks out.
nlohmann::ordered_json plan_json(const PlanInfo& p, bool with_tasks) {
  nlohmann::ordered_json j = store::record_json<nlohmann::ordered_json>(p);
  nlohmann::ordered_json tasks = std::move(j["tasks"]);
  j.erase("tasks");
  j["finished"] = finished_count(p);
  j["total"] = p.tasks.size();
  if (with_tasks) j["tasks"] = std::move(tasks);
  return j;
}

int64_t plan_id(const Args& a) { return parse_integer(a, a.positional()[0], "ID"); }

int submit(const Args& a) {
  const std::string file = a.positional()[0];
  const flow::TaskGraph plan = flow::TaskGraph::from_json(read_input(file, "plans submit"), "plans submit: " + file);
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

int list(const Args& a) {
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

int show(const Args& a) {
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

int cancel(const Args& a) {
  const int64_t id = plan_id(a);
  const int64_t n = flow::Plans(flow::Tasks(a.open_store())).cancel(id);
  if (a.json()) print_json({{"id", id}, {"cancelled", n}});
  else std::cout << "cancelled " << n << " task" << (n == 1 ? "" : "s") << " of plan " << id << '\n';
  return kExitOk;
}

int replay(const Args& a) {
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

const Group& plans_group() {
  static const Group g{
      "plans", "submit, list, show, cancel and replay plans (tasks with dependencies)",
      {{"submit", "FILE", 1, 1, {},
        "submits the plan in FILE (JSON, '-' for stdin; docs/cli.md, Plan files) in one transaction; prints its id",
        submit},
       {"list", "", 0, 0, {{"--limit", "N", false, "", "at most N plans (0, the default: all)"}},
        "plans in submission order with their status and how many of their tasks finished",
        list},
       {"show", "ID", 1, 1, {}, "one plan and its tasks: dependencies, how many they still wait for, status, result or error", show},
       {"cancel", "ID", 1, 1, {}, "cancels every pending or running task of the plan; prints how many it ended", cancel},
       {"replay", "ID", 1, 1, {}, "reopens the plan's failed and cancelled tasks and what depends on them", replay}}};
  return g;
}

}  // namespace loom::cli
