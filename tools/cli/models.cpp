// `loom models`: list, show, top, alias and export model versions (docs/cli.md).
#include <iostream>

#include "cli.h"
#include "loom/io/onnx.h"
#include "loom/store/model_registry.h"

namespace loom::cli {

namespace {

using store::ModelInfo;

// "NAME", "NAME:3" or "NAME@production" (the last ':' or '@' with a version or alias after it).
ModelInfo get_model(const Args& a, const store::Models& models, const std::string& ref) {
  if (const auto [name, version] = split_version(a, ref); version) return models.get(name, *version);
  const size_t at = ref.rfind('@');
  if (at != std::string::npos && at > 0 && at + 1 < ref.size()) return models.get(ref.substr(0, at), ref.substr(at + 1));
  return models.get(ref);
}

std::string metrics_text(const store::Metrics& m) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : m) parts.push_back(k + "=" + format_number(v));
  return join(parts, " ");
}

// The version record's JSON (loom/store/record.h): the dashboard's keys too.
nlohmann::ordered_json to_json(const ModelInfo& v) { return store::record_json<nlohmann::ordered_json>(v); }

int print_versions(const Args& a, const std::vector<ModelInfo>& versions) {
  if (a.json()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& v : versions) j.push_back(to_json(v));
    print_json(j);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& v : versions)
    rows.push_back({v.name, std::to_string(v.version), format_time(v.created_ms), metrics_text(v.metrics), join(v.tags),
                    join(v.aliases)});
  print_table({"NAME", "VERSION", "CREATED", "METRICS", "TAGS", "ALIASES"}, rows);
  return kExitOk;
}

// "accuracy>=0.9": the metric, the operator and a number.
store::MetricFilter parse_where(const Args& a, const std::string& text) {
  static const char* ops[] = {"<=", ">=", "==", "!=", "<", ">"};
  for (const char* op : ops) {
    const size_t at = text.find(op);
    if (at == std::string::npos || at == 0) continue;
    std::string metric = text.substr(0, at), value = text.substr(at + std::char_traits<char>::length(op));
    while (!metric.empty() && metric.back() == ' ') metric.pop_back();
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value.size()) a.fail("--where '" + text + "': '" + value + "' is not a number");
    return {metric, op, v};
  }
  a.fail("--where '" + text + "' is not 'METRIC OP VALUE' (OP one of < <= == != >= >)");
}

int list(const Args& a) {
  store::ModelQuery q{.name = a.value("--name"), .tags = a.values("--tag")};
  for (const auto& w : a.values("--where")) q.metrics.push_back(parse_where(a, w));
  return print_versions(a, a.open_store().models().find(q));
}

int show(const Args& a) {
  const ModelInfo v = get_model(a, a.open_store().models(), a.positional()[0]);
  if (a.json()) {
    print_json(to_json(v));
    return kExitOk;
  }
  print_fields({{"name", v.name},
                {"version", std::to_string(v.version)},
                {"created", format_time(v.created_ms)},
                {"metrics", metrics_text(v.metrics)},
                {"hyper-parameters", v.hyper_parameters},
                {"tags", join(v.tags)},
                {"aliases", join(v.aliases)},
                {"weights", v.weights_sha256 + " (" + std::to_string(v.weights_bytes) + " bytes)"},
                {"produced by", produced_by_text(v.produced_by)}});
  return kExitOk;
}

int top(const Args& a) {
  const auto metric = a.value("--metric");
  store::ModelQuery q{.tags = a.values("--tag")};
  if (!a.positional().empty()) q.name = a.positional()[0];
  const auto order = a.flag("--min") ? store::Order::Min : store::Order::Max;
  return print_versions(a, a.open_store().models().find_top(*metric, order, a.integer("-n", 1, 1), q));
}

int alias_set(const Args& a) {
  const auto& p = a.positional();
  const int64_t version = parse_integer(a, p[2], "VERSION");
  try {
    a.open_store().models().set_alias(p[0], p[1], version, a.flag("--replace"));
  } catch (const store::ConflictError& e) {
    throw store::ConflictError(std::string(e.what()) + " (on the command line: --replace)");
  }
  if (a.json()) print_json({{"name", p[0]}, {"alias", p[1]}, {"version", version}});
  else std::cout << terminal_text(p[0] + "@" + p[1]) << " -> version " << version << '\n';
  return kExitOk;
}

int alias_delete(const Args& a) {
  const auto& p = a.positional();
  a.open_store().models().remove_alias(p[0], p[1]);
  if (a.json()) print_json({{"name", p[0]}, {"alias", p[1]}, {"deleted", true}});
  else std::cout << "deleted " << terminal_text(p[0] + "@" + p[1]) << '\n';
  return kExitOk;
}

int export_model(const Args& a) {
  const auto file = a.value("--onnx");
  store::Store st = a.open_store();
  const ModelInfo v = get_model(a, st.models(), a.positional()[0]);
  const Graph graph = st.models().load(v);
  io::export_onnx(graph, *file, {.dynamic_batch = true, .batch_size = 1, .producer_name = "loom",
                                 .doc_string = v.name + " version " + std::to_string(v.version)});
  if (a.json()) print_json({{"name", v.name}, {"version", v.version}, {"onnx", *file}});
  else std::cout << terminal_text(v.name) << " version " << v.version << " -> " << terminal_text(*file) << " (ONNX, opset 17)\n";
  return kExitOk;
}

}  // namespace

const Group& models_group() {
  static const Group g{
      "models", "list, show, rank, alias and export model versions",
      {{"list", "", 0, 0,
        {{"--name", "N", false, "", "only the versions of model N"},
         {"--tag", "T", true, "", "only versions carrying tag T (every one given)"},
         {"--where", "'METRIC OP VALUE'", true, "", "only versions whose METRIC satisfies the condition (OP one of < <= == != >= >)"}},
        "the versions carrying every tag and satisfying every condition, by name then version",
        list},
       {"show", "NAME[:VERSION|@ALIAS]", 1, 1, {},
        "one version (default: the latest): metrics, hyper-parameters, tags, aliases, weights and the task and run that "
        "produced it",
        show},
       {"top", "[NAME]", 0, 1,
        {{.name = "--metric", .value = "M", .help = "the metric to rank by", .required = true},
         {"--min", "", false, "", "rank the lowest first"},
         {"-n", "K", false, "", "how many versions (default 1)"},
         {"--tag", "T", true, "", "only versions carrying tag T"}},
        "the K versions with the highest (--min: lowest) value of M",
        top},
       {"alias set", "NAME ALIAS VERSION", 3, 3, {{"--replace", "", false, "", "move an alias that names another version"}},
        "names a version; --replace moves an alias that names another one",
        alias_set},
       {"alias delete", "NAME ALIAS", 2, 2, {}, "removes an alias", alias_delete},
       {"export", "NAME[:VERSION|@ALIAS]", 1, 1,
        {{.name = "--onnx", .value = "FILE", .help = "the ONNX file to write", .required = true}},
        "writes the version's graph and weights as an ONNX model (opset 17, dynamic batch; docs/onnx.md); fails listing "
        "every layer that cannot be exported",
        export_model}}};
  return g;
}

}  // namespace loom::cli
