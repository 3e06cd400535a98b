#pragma once
// The shape the store's two catalogs of named, numbered versions share — models
// (loom/store/model_registry.h) and datasets (loom/store/datasets.h): each has names(), versions(name),
// get(name, version), get(name) (the latest), find(query), find_top(metric, order, k, query)
// and remove(name, version), with one query type and one ranking (docs/store.md, "Catalogs").
#include <optional>
#include <string>
#include <vector>

#include "loom/core/api.h"

namespace loom::store {

// `metric op value` with op one of "<", "<=", "==", "!=", ">=", ">". A version without the
// metric does not match. A model's metrics are the ones saved with it; a dataset version's are
// its numbers: "samples", "shards", "version" and "created_ms".
struct LOOM_API MetricFilter {
  std::string metric;
  std::string op;
  double value = 0;
};

// The versions find() and find_top() consider: every condition holds.
struct LOOM_API CatalogQuery {
  std::optional<std::string> name;
  std::vector<std::string> tags;        // a version must carry all of them
  std::vector<MetricFilter> metrics;    // and satisfy all of them
};

// find_top's ranking: the highest (Max) or lowest (Min) value first; ties go to the older version.
enum class Order { Max, Min };

}  // namespace loom::store
