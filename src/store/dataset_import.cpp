// Imports of whole arrays as one dataset version: IDX, NPY and CSV (loom/store/datasets.h).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "core/json_util.h"
#include "loom/data/csv.h"
#include "loom/data/idx.h"
#include "loom/data/npy.h"
#include "store/datasets_impl.h"
#include "store/query.h"

namespace loom::store {

using detail::shape_text;
using nlohmann::json;

namespace {

// The JSON text of element i of a 1-D tensor (integers stay integers).
std::string scalar_text(const Tensor& t, int64_t i) {
  if (t.dtype() == Int64) return std::to_string(static_cast<const int64_t*>(t.data_ptr())[i]);
  const double v = t[i].item<double>();
  if (!is_floating(t.dtype())) return std::to_string(static_cast<int64_t>(v));
  if (!std::isfinite(v)) return "NaN";  // refused by append as not a JSON object
  return loom::detail::json_float_text(v);
}

// Samples from arrays sharing their first dimension (one field each), as one version.
DatasetInfo import_arrays(Datasets& ds, const char* op, const std::string& name,
                          const std::vector<std::pair<std::string, Tensor>>& arrays, const ImportOptions& options) {
  if (arrays.empty()) throw ValueError(std::string(op) + ": no arrays to import");
  const int64_t n = arrays[0].second.ndim() > 0 ? arrays[0].second.shape()[0] : -1;
  for (const auto& [f, t] : arrays)
    if (t.ndim() == 0 || t.shape()[0] != n)
      throw ShapeError(std::string(op) + ": array '" + f + "' has shape " + shape_text(t.shape()) + ", '" + arrays[0].first +
                       "' has shape " + shape_text(arrays[0].second.shape()) + " (valid: the same first dimension, one sample each)");
  std::vector<std::pair<std::string, Tensor>> meta;  // metadata key, 1-D values
  for (const auto& [field, key] : options.metadata) {
    check_label(op, "metadata key", key);
    auto it = std::find_if(arrays.begin(), arrays.end(), [&field = field](const auto& a) { return a.first == field; });
    if (it == arrays.end()) throw ValueError(std::string(op) + ": metadata names field '" + field + "', which is not imported");
    if (it->second.ndim() != 1)
      throw ShapeError(std::string(op) + ": field '" + field + "' has shape " + shape_text(it->second.shape()) +
                       ": only a scalar per sample can go into metadata");
    meta.emplace_back(key, it->second.to(Device::cpu()).contiguous());
  }
  DatasetOptions opts;
  for (const auto& a : arrays) opts.fields.push_back(a.first);
  opts.tags = options.tags;
  opts.shard_samples = options.shard_samples;
  opts.produced_by = options.produced_by;
  DatasetWriter w = ds.create(name, opts);  // aborted by its destructor if anything below throws
  std::vector<Tensor> columns;
  for (const auto& a : arrays) columns.push_back(a.second.to(Device::cpu()).contiguous());
  for (int64_t i = 0; i < n; ++i) {
    Sample s;
    for (size_t k = 0; k < arrays.size(); ++k) s.tensors.emplace(arrays[k].first, columns[k][i]);
    if (!meta.empty()) {
      s.metadata = "{";
      for (size_t k = 0; k < meta.size(); ++k)
        s.metadata += (k ? "," : "") + json(meta[k].first).dump() + ":" + scalar_text(meta[k].second, i);
      s.metadata += "}";
    }
    w.append(s);
  }
  return w.commit();
}

}  // namespace

DatasetInfo Datasets::import_idx(const std::string& name, const std::string& images_path, const std::string& labels_path,
                                 const ImportOptions& options) {
  std::vector<std::pair<std::string, Tensor>> arrays{{"x", data::read_idx(images_path)}};
  ImportOptions opts = options;
  if (!labels_path.empty()) {
    arrays.emplace_back("y", data::read_idx(labels_path));
    opts.metadata.emplace("y", "label");
  }
  return import_arrays(*this, "import_idx", name, arrays, opts);
}

DatasetInfo Datasets::import_npy(const std::string& name, const std::map<std::string, std::string>& field_paths,
                                 const ImportOptions& options) {
  std::vector<std::pair<std::string, Tensor>> arrays;
  for (const auto& [field, path] : field_paths) arrays.emplace_back(field, data::load_npy(path));
  return import_arrays(*this, "import_npy", name, arrays, options);
}

DatasetInfo Datasets::import_csv(const std::string& name, const std::string& path,
                                 const std::map<std::string, std::vector<std::string>>& field_columns, const ImportOptions& options,
                                 DType dtype, char delimiter) {
  if (field_columns.empty()) throw ValueError("import_csv: no fields (valid: e.g. {{\"x\", {\"a\", \"b\"}}, {\"y\", {\"label\"}}})");
  std::vector<std::pair<std::string, Tensor>> arrays;
  for (const auto& [field, columns] : field_columns) {
    if (columns.empty()) throw ValueError("import_csv: field '" + field + "' names no columns");
    data::CsvOptions csv;
    csv.delimiter = delimiter;
    csv.names = columns;
    csv.dtype = dtype;
    Tensor t = data::read_csv(path, csv);
    if (columns.size() == 1) t = t.reshape({t.shape()[0]});
    arrays.emplace_back(field, t);
  }
  return import_arrays(*this, "import_csv", name, arrays, options);
}

}  // namespace loom::store
