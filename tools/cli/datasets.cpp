// `loom datasets`: list and show dataset versions (docs/cli.md).
#include <iostream>

#include "cli.h"
#include "loom/core/dtype.h"
#include "loom/core/shape.h"
#include "loom/store/datasets.h"

namespace loom::cli {

namespace {

using store::DatasetInfo;

std::string field_text(const store::FieldInfo& f) { return f.name + ":" + dtype_name(f.dtype) + shape_str(f.shape); }

nlohmann::ordered_json to_json(const DatasetInfo& d) { return store::record_json<nlohmann::ordered_json>(d); }

int list(const Args& a) {
  const auto found = a.open_store().datasets().find({.name = a.value("--name"), .tags = a.values("--tag")});
  if (a.json()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& d : found) j.push_back(to_json(d));
    print_json(j);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& d : found) {
    std::vector<std::string> fields;
    for (const auto& f : d.schema) fields.push_back(field_text(f));
    rows.push_back({d.name, std::to_string(d.version), format_time(d.created_ms), std::to_string(d.samples),
                    std::to_string(d.shards), join(fields, " "), join(d.tags)});
  }
  print_table({"NAME", "VERSION", "CREATED", "SAMPLES", "SHARDS", "FIELDS", "TAGS"}, rows);
  return kExitOk;
}

int show(const Args& a) {
  const std::string& ref = a.positional()[0];
  const store::Datasets datasets = a.open_store().datasets();
  const auto [name, version] = split_version(a, ref);
  const DatasetInfo d = version ? datasets.get(name, *version) : datasets.get(name);
  if (a.json()) {
    print_json(to_json(d));
    return kExitOk;
  }
  print_fields({{"name", d.name},
                {"version", std::to_string(d.version)},
                {"created", format_time(d.created_ms)},
                {"samples", std::to_string(d.samples)},
                {"shards", std::to_string(d.shards)},
                {"tags", join(d.tags)},
                {"produced by", produced_by_text(d.produced_by)}});
  std::cout << '\n';
  std::vector<std::vector<std::string>> rows;
  for (const auto& f : d.schema) rows.push_back({f.name, dtype_name(f.dtype), shape_str(f.shape)});
  print_table({"FIELD", "DTYPE", "SHAPE"}, rows);
  return kExitOk;
}

}  // namespace

const Group& datasets_group() {
  static const Group g{"datasets", "list and show dataset versions",
                       {{"list", "", 0, 0,
                         {{"--name", "N", false, "", "only the versions of dataset N"},
                          {"--tag", "T", true, "", "only versions carrying tag T (every one given)"}},
                         "committed dataset versions, by name then version: samples, shards, fields (x:float32(28, 28)), tags",
                         list},
                        {"show", "NAME[:VERSION]", 1, 1, {},
                         "one version (default: the latest) with a table of its fields and the task and run that produced it",
                         show}}};
  return g;
}

}  // namespace loom::cli
