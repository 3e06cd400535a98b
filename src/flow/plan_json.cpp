// TaskGraph <-> JSON: the text `loom plans submit` reads and a stream controller stores as its
// template (docs/workflow.md, "Plans"). Only the shape is checked here; Plans::submit checks
// names, kinds, options and dependencies.
#include <nlohmann/json.hpp>

#include <cstdint>

#include "loom/core/error.h"
#include "loom/flow/plans.h"

namespace loom::flow {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& what) { throw ValueError(where + ": " + what); }

// An integer of int64_t's range (JSON's unsigned numbers above it would wrap).
bool is_int64(const json& v) { return v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX); }

constexpr const char* kLineageKeys =
    "input_dataset, input_dataset_version, input_dataset_query, input_model, input_model_version, output_model, output_dataset, "
    "input_dataset_last_version, input_query";

void read_lineage(const json& v, Lineage& l, const std::string& where, const std::string& at) {
  if (!v.is_object()) bad(where, at + ".lineage must be an object");
  for (const auto& [key, value] : v.items()) {
    const bool integer = key == "input_dataset_version" || key == "input_model_version" || key == "input_dataset_last_version";
    if (integer ? !is_int64(value) : !value.is_string())
      bad(where, at + ".lineage." + key + (integer ? " must be an integer" : " must be a string"));
    if (key == "input_dataset") l.input_dataset = value.get<std::string>();
    else if (key == "input_dataset_version") l.input_dataset_version = value.get<int64_t>();
    else if (key == "input_dataset_query") l.input_dataset_query = value.get<std::string>();
    else if (key == "input_model") l.input_model = value.get<std::string>();
    else if (key == "input_model_version") l.input_model_version = value.get<int64_t>();
    else if (key == "output_model") l.output_model = value.get<std::string>();
    else if (key == "output_dataset") l.output_dataset = value.get<std::string>();
    else if (key == "input_dataset_last_version") l.input_dataset_last_version = value.get<int64_t>();
    else if (key == "input_query") l.input_query = value.get<std::string>();
    else bad(where, at + ".lineage: unknown key \"" + key + "\" (valid: " + kLineageKeys + ")");
  }
}

json lineage_json(const Lineage& l) {
  json j = json::object();
  const auto text = [&](const char* key, const std::string& v) {
    if (!v.empty()) j[key] = v;
  };
  const auto integer = [&](const char* key, int64_t v) {
    if (v != 0) j[key] = v;
  };
  text("input_dataset", l.input_dataset);
  integer("input_dataset_version", l.input_dataset_version);
  integer("input_dataset_last_version", l.input_dataset_last_version);
  text("input_dataset_query", l.input_dataset_query);
  text("input_query", l.input_query);
  text("input_model", l.input_model);
  integer("input_model_version", l.input_model_version);
  text("output_model", l.output_model);
  text("output_dataset", l.output_dataset);
  return j;
}

}  // namespace

std::string TaskGraph::to_json() const {
  json j{{"name", name}, {"tasks", json::array()}};
  for (const PlanTask& t : tasks) {
    json task{{"name", t.name}, {"kind", t.kind}};
    try {
      task["hyper_parameters"] = json::parse(t.hyper_parameters);
    } catch (const json::exception&) {
      throw ValueError("TaskGraph::to_json: the hyper-parameters of task '" + t.name + "' are not valid JSON");
    }
    task["depends_on"] = t.depends_on;
    if (!t.options.depends_on.empty()) task["after"] = t.options.depends_on;
    const json lineage = lineage_json(t.options.lineage);
    if (!lineage.empty()) task["lineage"] = lineage;
    task["priority"] = t.options.priority;
    task["max_attempts"] = t.options.max_attempts;
    task["timeout_ms"] = t.options.timeout_ms;
    task["lease_ms"] = t.options.lease_ms;
    j["tasks"].push_back(std::move(task));
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

TaskGraph TaskGraph::from_json(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    bad(where, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) bad(where, "the plan must be a JSON object with \"name\" and \"tasks\"");
  for (const auto& [key, v] : j.items())
    if (key != "name" && key != "tasks") bad(where, "unknown key \"" + key + "\" (valid: name, tasks)");
  if (!j.contains("name") || !j["name"].is_string()) bad(where, "\"name\" must be a string");
  if (!j.contains("tasks") || !j["tasks"].is_array()) bad(where, "\"tasks\" must be an array of tasks");
  TaskGraph plan{.name = j["name"].get<std::string>(), .tasks = {}};
  for (size_t i = 0; i < j["tasks"].size(); ++i) {
    const json& t = j["tasks"][i];
    const std::string at = "tasks[" + std::to_string(i) + "]";
    if (!t.is_object()) bad(where, at + " must be an object");
    PlanTask task;
    for (const auto& [key, v] : t.items()) {
      if (key == "name" || key == "kind") {
        if (!v.is_string()) bad(where, at + "." + key + " must be a string");
        (key == "name" ? task.name : task.kind) = v.get<std::string>();
      } else if (key == "hyper_parameters") {
        if (!v.is_object()) bad(where, at + ".hyper_parameters must be a JSON object");
        task.hyper_parameters = v.dump(-1, ' ', false, json::error_handler_t::replace);
      } else if (key == "depends_on" || key == "after") {
        const bool names = key == "depends_on";
        const std::string want = at + "." + key + (names ? " must be an array of task names" : " must be an array of task ids");
        if (!v.is_array()) bad(where, want);
        for (const json& d : v) {
          if (names ? !d.is_string() : !is_int64(d)) bad(where, want);
          if (names) task.depends_on.push_back(d.get<std::string>());
          else task.options.depends_on.push_back(d.get<int64_t>());
        }
      } else if (key == "lineage") {
        read_lineage(v, task.options.lineage, where, at);
      } else if (key == "priority" || key == "max_attempts" || key == "timeout_ms" || key == "lease_ms") {
        if (!is_int64(v)) bad(where, at + "." + key + " must be an integer");
        const int64_t n = v.get<int64_t>();
        (key == "priority" ? task.options.priority
         : key == "max_attempts" ? task.options.max_attempts
         : key == "timeout_ms" ? task.options.timeout_ms
                               : task.options.lease_ms) = n;
      } else {
        bad(where, at + ": unknown key \"" + key +
                       "\" (valid: name, kind, hyper_parameters, depends_on, after, lineage, priority, max_attempts, timeout_ms, "
                       "lease_ms)");
      }
    }
    plan.tasks.push_back(std::move(task));
  }
  return plan;
}

std::string record_text(const TaskGraph& g) { return g.tasks.empty() ? std::string() : g.to_json(); }
TaskGraph record_from_text(const std::string& text, const TaskGraph*) { return TaskGraph::from_json(text, "plan"); }

}  // namespace loom::flow
