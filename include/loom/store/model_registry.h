#pragma once
// The model registry of a Store (docs/store.md): each save of a graph under a name makes an
// immutable version (1, 2, ... per name, never reused) holding the architecture (graph_to_json),
// the weights and buffers (a safetensors blob), metrics, hyper-parameters (a JSON object) and
// tags. Versions are found by name, tags and metric predicates, ranked by a metric, named by
// aliases ("production"), loaded into a runnable Graph without the model's code, and deleted.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/graph/graph.h"
#include "loom/store/catalog.h"
#include "loom/store/provenance.h"
#include "loom/store/record.h"
#include "loom/store/store.h"

namespace loom::train {
class Model;
}

namespace loom::store {

using Metrics = std::map<std::string, double>;

struct LOOM_API ModelInfo {
  std::string name;
  int64_t version = 0;
  int64_t created_ms = 0;             // Unix time in milliseconds
  Metrics metrics;
  std::string hyper_parameters;       // a JSON object, as text
  std::vector<std::string> tags;      // sorted
  std::vector<std::string> aliases;   // sorted
  std::string weights_sha256;         // the weights blob (hex)
  uint64_t weights_bytes = 0;         // its uncompressed size
  Provenance produced_by;             // the task and run that saved it (0: none)

  // Its columns and its JSON's keys, listed once (loom/store/record.h): the store's reader,
  // `loom models --json` and the dashboard's /api/models/NAME come from this list.
  template <class Visit>
  void fields(Visit&& visit) {
    visit("name", name);
    visit("version", version);
    visit("created_ms", created_ms);
    visit("metrics", metrics, RecordField::not_stored());  // model_metrics
    visit("hyper_parameters", hyper_parameters, RecordField::json());
    visit("tags", tags, RecordField::not_stored());        // model_tags
    visit("aliases", aliases, RecordField::not_stored());  // model_aliases
    visit("weights_sha256", weights_sha256, RecordField::in_column("weights"));
    visit("weights_bytes", weights_bytes, RecordField::in_column("size"));  // the blob's
    visit("produced_by", produced_by);
  }
};

// The catalog's query (loom/store/catalog.h): name, tags, metric filters.
using ModelQuery = CatalogQuery;

class LOOM_API Models {
 public:
  explicit Models(std::shared_ptr<detail::StoreImpl> impl);

  // Saves a new version of `name`. Everything is encoded first; the weights blob is durable on
  // disk before the version's row commits, and a failure leaves no row. Throws ValueError for
  // an invalid name, tag or hyper-parameter JSON (it must be an object), a NaN metric, or a
  // graph that cannot be serialised (a Lambda layer), a negative id in `produced_by`;
  // NotFoundError for a produced_by.run_id that is not a run of the store (the task id is
  // flow's, above the store: recorded as given).
  ModelInfo save(const std::string& name, const Graph& graph, const Metrics& metrics = {},
                 const std::string& hyper_parameters = "{}", const std::vector<std::string>& tags = {},
                 const Provenance& produced_by = {});
  // The same for a train::Model's inference graph.
  ModelInfo save(const std::string& name, const train::Model& model, const Metrics& metrics = {},
                 const std::string& hyper_parameters = "{}", const std::vector<std::string>& tags = {},
                 const Provenance& produced_by = {});

  std::vector<std::string> names() const;                  // sorted
  std::vector<ModelInfo> versions(const std::string& name) const;  // ascending; empty if none
  // A version by number, by alias ("latest" is the highest version), or the latest. Throws
  // NotFoundError naming what was asked and what exists.
  ModelInfo get(const std::string& name, int64_t version) const;
  ModelInfo get(const std::string& name, const std::string& alias) const;
  ModelInfo get(const std::string& name) const;

  // Versions matching every condition, by name then version.
  std::vector<ModelInfo> find(const ModelQuery& query = {}) const;
  // The k versions (matching `query`) with the highest (Max) or lowest (Min) value of `metric`;
  // ties go to the older version.
  std::vector<ModelInfo> find_top(const std::string& metric, Order order, int64_t k = 1, const ModelQuery& query = {}) const;

  // Rebuilds the version's graph from its architecture and loads its weights. The blob is
  // verified first (BlobError if missing or corrupt); weights that do not fit the architecture
  // throw ValueError / ShapeError / DTypeError naming the model; nothing is half loaded.
  Graph load(const std::string& name, int64_t version) const;
  Graph load(const std::string& name, const std::string& alias) const;
  Graph load(const ModelInfo& info) const;

  // Aliases name one version each, per model name. An alias is 1-64 characters of [A-Za-z0-9_.-],
  // not all digits and not "latest" (ValueError otherwise). set_alias throws NotFoundError for a
  // missing version and ConflictError when the alias names another version unless `replace`.
  void set_alias(const std::string& name, const std::string& alias, int64_t version, bool replace = false);
  void remove_alias(const std::string& name, const std::string& alias);  // NotFoundError if absent

  // Deletes a version (its row, metrics and tags) and releases its weights blob: the blob file
  // goes when no other version uses it. ConflictError while an alias names the version.
  void remove(const std::string& name, int64_t version);

 private:
  std::shared_ptr<detail::StoreImpl> impl_;
};

}  // namespace loom::store
