// The tasks page's API (docs/ui.md, "Tasks"): the queue by status, the agents holding claims,
// a cursor for polling, and cancelling a task.
#include <charconv>
#include <cstdio>
#include <map>

#include "core/utf8.h"
#include "loom/flow/tasks.h"
#include "loom/store/error.h"
#include "ui/api.h"

namespace loom::ui::detail {

namespace {

using loom::detail::quote_text;

// A task as its record's JSON (loom/store/record.h): the keys of `loom tasks --json`.
nlohmann::json task_json(const flow::TaskInfo& t) { return store::record_json<nlohmann::json>(t); }

std::string valid_statuses() {
  std::string out;
  for (const std::string& s : store::state_names<flow::Status>()) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// A fingerprint of everything the page shows (FNV-1a over the tasks' changing fields): equal
// cursors, nothing new to show.
std::string cursor_of(const std::vector<flow::TaskInfo>& tasks) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  };
  for (const auto& t : tasks) {
    mix(std::to_string(t.id));
    mix(flow::status_name(t.status));
    mix(std::to_string(t.attempts) + "/" + std::to_string(t.token) + "/" + std::to_string(t.lease_expires_ms) + "/" +
        std::to_string(t.finished_ms) + "/" + std::to_string(t.waiting));
    mix(t.agent);
    mix(t.error);
  }
  char b[20];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

Response list(store::Store& store, const Request& r) {
  only_params(r, {"status", "cursor"});
  flow::TaskFilter filter;
  if (const auto s = param(r, "status"); s && !s->empty()) {
    try {
      filter.status = flow::parse_status(*s);
    } catch (const ValueError&) {
      throw HttpError(400, "parameter 'status' is " + quote_text(*s) + " (valid: " + valid_statuses() + ")");
    }
  }
  // A store without flow's tables has no queue yet: an empty one is shown, and the tables are
  // not created (Tasks(store) would create them, a write a read-only dashboard never makes).
  const std::vector<flow::TaskInfo> tasks = flow::Tasks::ready(store) ? flow::Tasks(store).list(filter) : std::vector<flow::TaskInfo>{};
  const std::string cursor = cursor_of(tasks);
  if (param(r, "cursor") == cursor) return json_response({{"cursor", cursor}, {"changed", false}});
  std::map<std::string, int64_t> counts;
  for (const std::string& s : store::state_names<flow::Status>()) counts[s] = 0;
  std::map<std::string, nlohmann::json> agents;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& t : tasks) {
    counts[flow::status_name(t.status)]++;
    list.push_back(task_json(t));
    if (t.agent.empty()) continue;
    nlohmann::json& a = agents[t.agent];
    if (a.is_null()) a = {{"name", t.agent}, {"running", nlohmann::json::array()}, {"claims", 0}, {"lease_expires_ms", 0}};
    a["claims"] = a["claims"].get<int64_t>() + t.attempts;
    if (t.status == flow::Status::Running) {
      a["running"].push_back(t.id);
      a["lease_expires_ms"] = std::max(a["lease_expires_ms"].get<int64_t>(), t.lease_expires_ms);
    }
  }
  nlohmann::json agent_list = nlohmann::json::array();
  for (auto& kv : agents) agent_list.push_back(kv.second);
  return json_response({{"cursor", cursor}, {"changed", true}, {"counts", counts}, {"tasks", list}, {"agents", agent_list}});
}

}  // namespace

Response tasks_api(store::Store& store, const Request& r, const std::vector<std::string>& p, bool write) {
  if (p.size() == 3 && p[2] == "cancel") {
    if (r.method != "POST") throw HttpError(405, "use POST for " + r.path);
    if (!write) throw HttpError(500, "unreachable: writes are checked before routing");
    only_params(r, {});
    int64_t id = 0;
    const auto [end, ec] = std::from_chars(p[1].data(), p[1].data() + p[1].size(), id);
    if (ec != std::errc() || end != p[1].data() + p[1].size() || id < 1)
      throw HttpError(400, "task id " + quote_text(p[1]) + " is not a task id (valid: 1, 2, ...)");
    if (!flow::Tasks::ready(store)) throw HttpError(404, "no task " + std::to_string(id) + " (this store has no task queue)");
    flow::Tasks tasks(store);
    bool cancelled = false;
    try {
      cancelled = tasks.cancel(id);
    } catch (const store::NotFoundError& e) {
      throw HttpError(404, e.what());
    }
    if (!cancelled)
      throw HttpError(409, "task " + std::to_string(id) + " has already ended (" + flow::status_name(tasks.get(id).status) + ")");
    return json_response({{"id", id}, {"status", "cancelled"}});
  }
  if (r.method != "GET") throw HttpError(405, "use GET for " + r.path);
  if (p.size() == 1) return list(store, r);
  throw HttpError(404, "no route " + quote_text(r.path) + " (valid: /api/tasks, POST /api/tasks/ID/cancel)");
}

}  // namespace loom::ui::detail
